"""``Tuner.restore`` / ``Tuner.can_restore``: continue an experiment from storage.

The experiment directory holds the original spec (``tuner.pkl``: searcher,
scheduler and stopper as they were at the start) and the latest experiment
state (trial table plus the searcher's and scheduler's saved state).  Restoring
rebuilds the spec with the new trainable (a registered name needs its name again: ``registry``) and
rewinds the table (``_rewind``, in the driver), tagging each changed row with what the controller's
``prepare_storage`` (``actors._shell.restore_storage``) must do to make storage agree with it.
"""

from __future__ import annotations

import copy
import logging
import os
import posixpath
from typing import Any

from actors._driver.errors import ConfigError
from actors._driver.resume import ResumeChoices, ResumeType
from actors._engine.flat import flatten
from actors._engine.store import RestoreMark
from actors._engine.trial import TrialStatus
from actors._legacy import loads as legacy_loads
from actors._state_codec import UnreadableValues, load_pickled

log = logging.getLogger("audition")

FORCE_TRUNCATE = 10**12
STATE_KEYS = ("trial_prefix", "suggested", "trials")
ROW_KEYS = ("trial_id", "config", "status", "last_result", "num_failures")



def _split(path: str, options: dict[str, Any] | None) -> tuple[Any, Any, str]:
    from storage import ExperimentLayout, StorageContext, StorageError

    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"restore path must be the experiment directory (a non-empty string), got {path!r}")
    p = path.strip().rstrip("/")
    parent, name = posixpath.split(p) if "://" in p else os.path.split(p)
    if not name or not parent or parent.endswith("://"):
        raise ConfigError(f"{path!r} is not an experiment directory; pass <storage>/<experiment name>, "
                          "the experiment_path that fit() returned")
    try:
        ctx = StorageContext(parent, options)
        return ctx, ExperimentLayout(ctx, name), name
    except (StorageError, ValueError) as exc:
        raise ConfigError(f"cannot restore from {path}: {exc}") from exc


def can_restore(path: str, options: dict[str, Any] | None = None) -> bool:
    """True if ``path`` holds what :func:`restore_tuner` reads: a saved tuner (a pickle) and an
    experiment state this version can restore. Files with those names but other contents are not
    an experiment: False (Ray checks only that ``tuner.pkl`` exists)."""
    from storage import StorageError, read_bytes, read_experiment_state

    try:
        ctx, layout, _ = _split(path, options)
        if read_bytes(ctx, layout.tuner_file)[:1] != b"\x80":  # every pickle protocol >= 2 starts so
            return False
        state = read_experiment_state(ctx, layout)
        if state is None:
            return False
        _check_state(state, ctx.uri(layout.experiment_dir))
        return True
    except (ConfigError, StorageError, OSError):  # missing, a directory, unreadable
        return False


def restore_tuner(cls: Any, path: str, trainable: Any, choices: ResumeChoices, options: dict[str, Any] | None,
                  param_space: Any = None) -> Any:
    from actors._driver.checks import pickled
    from actors._driver.parameters import parameters_of
    from actors._driver.registry import resolve_on_restore
    from storage import StorageError, read_bytes, read_experiment_state

    ctx, layout, name = _split(path, options)
    where = ctx.uri(layout.experiment_dir)
    try:
        raw = read_bytes(ctx, layout.tuner_file)
        state = read_experiment_state(ctx, layout)
    except FileNotFoundError:
        raise ConfigError(f"no audition experiment at {where} (tuner.pkl missing); pass the directory "
                          "fit() returned as experiment_path") from None
    except StorageError as exc:
        raise ConfigError(f"cannot restore {where}: {exc}") from exc
    if state is None:
        raise ConfigError(f"no experiment state under {where}: the run stopped before its first state "
                          "write; start it again with fit()")
    _check_state(state, where)
    state = _rebase(state, layout.experiment_dir)  # (a copy)
    try:
        load_pickled(state)  # configs and last results as they were: functions, numpy values, objects (as Ray)
    except UnreadableValues as exc:
        raise ConfigError(f"cannot restore {where}: {exc}") from exc
    try:
        saved = legacy_loads(raw)
        spec = copy.copy(saved["spec"])
    except Exception as exc:
        raise _unreadable_tuner(ctx.uri(layout.tuner_file), exc, "is corrupted or was written by an incompatible "
                                f"version ({exc!r}); start a new experiment") from exc
    _check_param_space(param_space, saved.get("param_space_keys"))
    trainable, spec.trainable_name = resolve_on_restore(trainable, spec)
    spec.trainable = pickled(trainable, "trainable")
    spec.storage_url, spec.storage_options, spec.name = ctx.url, dict(ctx.options), name
    spec.restore_state = _rewind(state, choices, spec.tag_paths)
    tuner = cls.__new__(cls)
    tuner._restored(spec, saved, ctx)
    tuner._parameters = parameters_of(trainable)  # with_parameters objects, published by fit()
    tuner._saved_state = state  # get_results() before fit(): the experiment as it was saved
    return tuner


def requeued_resources(tuner: Any, resources: dict[str, float]) -> None:
    """``run(resume=..., resources_per_trial=...)``: every trial the restore runs again (resumed or restarted)
    gets ``resources``, as Ray 2.60's ``update_pending_trial_resources`` gives them to the trials its requeue
    made PENDING; the others keep theirs, and trials the search draws later get the experiment's own (Ray's
    restored search generator still holds the first run's spec). Trials then differ in size, so the experiment
    is placed trial by trial from here on: those without their own take the experiment's resources."""
    from actors._driver.resources import SameResources
    from actors._engine.store import RestoreMark

    spec = tuner._prebuilt
    again = (RestoreMark.RESUME, RestoreMark.RESTART)
    rows = [r for r in spec.restore_state["trials"] if r.get("restore") in again]
    if not rows:
        return
    for row in rows:
        row["resources"] = dict(resources)
    if spec.resources_of is None:
        spec.resources_of = SameResources(spec.resources_per_trial or {"cpu": 1.0})
        spec.max_concurrent = tuner.tune_config.max_concurrent_trials or 1_000_000


def saved_searcher(state: dict[str, Any] | None) -> Any:
    """The searcher's state in a saved experiment state, decoded; None if it saved none."""
    return _saved(state, "searcher")


def _saved(state: dict[str, Any] | None, what: str) -> Any:
    """A plugin's state in a saved experiment state (``searcher``, ``stopper``, ``scheduler``), decoded."""
    import base64

    text = (state or {}).get(what)
    return legacy_loads(base64.b64decode(text)) if text else None


def hand_back_plugins(scheduler: Any, stopper: Any, state: dict[str, Any] | None) -> None:
    """Ray runs the scheduler and stopper objects the script passed, in the driver; audition runs copies in
    the controller. After a run the script's objects take their copies' final saved states, so that what
    they learned shows after ``fit()``, as in Ray (a scheduler's ``__dict__`` by default; a stopper's
    ``save()``, which is empty for one that keeps no state). One whose ``restore()`` fails keeps its own."""
    from actors.schedulers import Scheduler
    from actors.stoppers import Stopper

    for obj, what in ((scheduler, "scheduler"), (stopper, "stopper")):
        if not isinstance(obj, Scheduler | Stopper):
            continue
        try:
            saved = _saved(state, what)
            if saved is not None:
                obj.restore(saved["scheduler"] if what == "scheduler" else saved)
        except Exception:  # the run's results stand
            log.warning("%s.restore() failed on the run's final state; the object in this script keeps the state "
                        "it had before fit()", type(obj).__name__, exc_info=True)


def experiment_searcher_state(path: str) -> Any:
    """The searcher state the experiment at ``path`` last saved, decoded (``Searcher.restore_from_dir``)."""
    from storage import StorageError, read_experiment_state

    ctx, layout, _ = _split(os.path.expanduser(path) if "://" not in path else path, None)
    try:
        state = read_experiment_state(ctx, layout)
    except StorageError as exc:
        raise ConfigError(f"cannot read the experiment at {path}: {exc}") from exc
    saved = saved_searcher(state)
    if saved is None:
        raise ConfigError(f"no searcher state was saved under {path} (not an experiment directory, or its "
                          "searcher has no save())")
    return saved


def _check_param_space(param_space: Any, saved_keys: list[str] | None) -> None:
    """Ray's rule for a re-specified ``param_space``: the same flattened keys as the original's (unchecked
    for an experiment saved before the keys were kept, as Ray skips it for its older ones)."""
    if param_space is None:
        return
    if not isinstance(param_space, dict):
        raise ConfigError(f"Tuner.restore(param_space=...) must be a dict, got {type(param_space).__name__}")
    keys = sorted(flatten(param_space))
    if saved_keys is not None and keys != saved_keys:
        raise ConfigError("Tuner.restore(param_space=...) must be the param_space the experiment was started with "
                          f"(its keys: {saved_keys}; got {keys}); leave it out to use the saved one")


def _unreadable_tuner(uri: str, exc: Exception, otherwise: str) -> ConfigError:
    """What to say when ``tuner.pkl`` does not load (``otherwise``: after "the saved tuner at URI"). A module
    missing here is not corruption: the experiment was saved where that module was installed (numpy, say:
    a seeded search keeps numpy's generator, as Ray's does, whenever numpy is importable), and installing
    it is the fix."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return ConfigError(f"the saved tuner at {uri} needs the module {exc.name!r}, which is not installed here "
                           "(the experiment was saved where it was); install the package that provides it, or "
                           "make it importable as when the experiment ran, and try again")
    return ConfigError(f"the saved tuner at {uri} {otherwise}")


def read_results(path: str, options: dict[str, Any] | None) -> tuple[Any, Any, str]:
    """The experiment at ``path`` as saved (its ``ResultGrid``, ``TuneConfig`` and trainable name), without a
    trainable and without running anything: what ``ExperimentAnalysis(path)`` reads."""
    from storage import StorageError, read_bytes, read_experiment_state

    ctx, layout, name = _split(path, options)
    where = ctx.uri(layout.experiment_dir)
    try:
        raw, state = read_bytes(ctx, layout.tuner_file), read_experiment_state(ctx, layout)
    except (FileNotFoundError, StorageError) as exc:
        raise ConfigError(f"no audition experiment at {where} ({exc}); pass the experiment directory: "
                          "<storage_path>/<name>, the experiment_path a run returned") from None
    if state is None:
        raise ConfigError(f"no experiment state under {where}: the run stopped before its first state write")
    _check_state(state, where)
    try:
        saved = legacy_loads(raw)
    except Exception as exc:
        raise _unreadable_tuner(ctx.uri(layout.tuner_file), exc, f"is unreadable ({exc!r})") from exc
    from actors._driver.result_grid import Searched

    searched = Searched(saved["searched"]) if "searched" in saved else None
    grid = stored_results(ctx, name, _rebase(state, layout.experiment_dir), saved["tune_config"],
                          saved["run_config"], searched, getattr(saved["spec"], "resources_per_trial", None))
    return grid, saved["tune_config"], getattr(saved["spec"], "trainable_name", "")


def stored_results(ctx: Any, name: str, state: dict[str, Any], tune_config: Any, run_config: Any,
                   searched: Any = None, resources: dict[str, float] | None = None) -> Any:
    """The saved experiment as a ``ResultGrid``, statuses as saved; nothing runs (Ray Tune's
    ``Tuner.restore(...).get_results()``). Histories and checkpoints are read from storage on use.
    ``resources``: the experiment's ``resources_per_trial``, for the trials without their own."""
    from actors._driver.result_grid import Result, ResultGrid
    from actors._engine.naming import saved_dirname_custom
    from actors.messages import CheckpointRef, TrialSummary
    from storage import ExperimentLayout

    layout = ExperimentLayout(ctx, name)
    results = []
    for row in state["trials"]:
        tid, status, ck = row["trial_id"], TrialStatus(row["status"]), row.get("checkpoint")
        layout.set_dirname(tid, row.get("dirname"))
        error = f"{row.get('error')}\n{row.get('traceback') or ''}" if status is TrialStatus.ERROR else None
        # Ray keeps no unreported run's keys in the saved state: a trial that never reported has its id alone
        last = row["last_result"] if "training_iteration" in row["last_result"] else {"trial_id": tid}
        summary = TrialSummary(tid, row["config"], status, last, CheckpointRef(**ck) if ck else None,
                               error, int(row["num_failures"]), ctx.uri(layout.trial_dir(tid)), row.get("name"),
                               row.get("dirname"), str(row.get("experiment_tag") or ""),
                               dirname_custom=saved_dirname_custom(state, row),
                               resources=row.get("resources") or resources)
        results.append(Result(summary, ctx.url, dict(ctx.options), name, run_config.checkpoint_config, searched))
    return ResultGrid(results, tune_config.metric, tune_config.mode, ctx.uri(layout.experiment_dir))


def _rebase(state: dict[str, Any], experiment_dir: str) -> dict[str, Any]:
    """The state names checkpoints by the paths they had when it was written; an experiment
    directory since moved (copied elsewhere, renamed, uploaded) holds them at the same place under
    ``experiment_dir``: a checkpoint of one of its trials' directories is pointed there, so a
    restore never reads (or deletes) the old location's files, nor loses the checkpoint."""
    state = copy.deepcopy(state)
    dirs = {row.get("dirname") or row["trial_id"] for row in state["trials"]}

    def moved(path: Any) -> Any:
        if not isinstance(path, str):
            return path
        trial_dir, ckpt = posixpath.split(path.rstrip("/"))
        parent, trial = posixpath.split(trial_dir)
        if trial not in dirs or not ckpt.startswith("checkpoint_") or parent == experiment_dir:
            return path
        return posixpath.join(experiment_dir, trial, ckpt)

    for row in state["trials"]:
        if isinstance(row.get("checkpoint"), dict):
            row["checkpoint"]["path"] = moved(row["checkpoint"].get("path"))
    if isinstance(state.get("retired"), list):
        state["retired"] = [moved(p) for p in state["retired"]]
    return state


def _check_state(state: dict[str, Any], where: str) -> None:
    """A readable JSON state can still be from another program or a bug: refuse it clearly."""
    from actors._engine.store import STATE_VERSION

    problem = None
    if state.get("version") != STATE_VERSION:
        problem = f"state format version {state.get('version')!r}, this audition reads {STATE_VERSION}"
    elif any(k not in state for k in STATE_KEYS) or not isinstance(state["trials"], list):
        problem = f"it lacks {[k for k in STATE_KEYS if k not in state]} or its trial list"
    else:
        for row in state["trials"]:
            if not isinstance(row, dict) or any(k not in row for k in ROW_KEYS):
                problem = f"a trial row is incomplete ({str(row)[:80]})"
                break
            try:
                TrialStatus(row["status"])
            except ValueError:
                problem = f"trial {row['trial_id']} has an unknown status {row['status']!r}"
                break
    if problem:
        raise ConfigError(f"the experiment state at {where} cannot be restored: {problem}. "
                          "Start a new experiment, or restore from a copy written by this version")


def _rewind(state: dict[str, Any], choices: ResumeChoices, tag_paths: Any = None) -> dict[str, Any]:
    """Statuses after restore, as Ray 2.60's ``_requeue_restored_trials``; each changed row is tagged with
    what ``prepare_storage`` must do. A restarted trial is a new one, as Ray's ``Trial.reset()``: a new
    trial id (Ray's 8 hex digits, here derived from the old id, so a restore is repeatable), the same
    config and ``experiment_tag``, no checkpoint, failures or results; its new directory is named when it
    starts, and the old trial's directory is kept (``kept_dirs``) but leaves the table."""
    state = copy.deepcopy(state)
    ids = {str(r["trial_id"]) for r in state["trials"]}
    rows: list[dict[str, Any]] = []
    for row in state["trials"]:
        status = TrialStatus(row["status"])
        how = (choices.errored if status is TrialStatus.ERROR else choices.finished if status.is_finished
               else choices.unfinished)
        if how is ResumeType.RESTART:
            row = _restarted(state, row, ids, tag_paths)
        elif how is ResumeType.RESUME:
            # (a paused trial stays paused: the restored scheduler, which paused it, resumes it)
            if status is not TrialStatus.PAUSED:
                row["status"] = TrialStatus.PENDING.value
            row.update(error=None, traceback=None, restore=RestoreMark.RESUME)
        elif not status.is_finished:  # SKIP: an unfinished trial ends as saved
            row.update(status=TrialStatus.TERMINATED.value, restore=RestoreMark.END)
        if row.get("restore") is RestoreMark.RESUME:
            # the state may be older than the result log: drop everything after the checkpoint (the saved
            # value still tells the storage side whether a PBT clone had logged a row: restore_storage.py)
            row["saved_logged_iteration"] = row.get("logged_iteration")
            row["logged_iteration"] = FORCE_TRUNCATE
        rows.append(row)
    state["trials"] = rows
    state["restored"] = True
    return state


def _restarted(state: dict[str, Any], row: dict[str, Any], ids: set[str], tag_paths: Any) -> dict[str, Any]:
    """The new trial that replaces ``row`` (see ``_rewind``)."""
    import hashlib

    from actors._engine.store import TRIAL_DIRS_NAMED
    from actors._engine.trial import tag_of

    old = str(row["trial_id"])
    n = 0
    while True:  # (a collision is all but impossible; the loop keeps it impossible)
        new = hashlib.sha256(f"{state['trial_prefix']}/{old}/{n}".encode()).hexdigest()[:8]
        if new not in ids:
            break
        n += 1
    ids.add(new)
    dirname = row.get("dirname") or (None if state.get("trial_dirs") == TRIAL_DIRS_NAMED else old)
    if dirname:
        state.setdefault("kept_dirs", []).append(dirname)
    tag = row.get("experiment_tag") or tag_of(old, row["config"], tag_paths)[0]
    fresh = {"trial_id": new, "config": row["config"], "status": TrialStatus.PENDING.value, "last_result": {},
             "num_failures": 0, "error": None, "traceback": None, "checkpoint": None, "logged_iteration": 0,
             "max_index": -1, "marks": [], "experiment_tag": tag, "restore": RestoreMark.RESTART}
    if "resources" in row:  # its own resources, as Ray's Trial.reset keeps its placement group factory
        fresh["resources"] = row["resources"]
    return fresh


__all__ = ["can_restore", "requeued_resources", "restore_tuner"]
