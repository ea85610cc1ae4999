"""``Tuner.restore`` / ``Tuner.can_restore``: continue an experiment from storage.

The experiment directory holds the original spec (``tuner.pkl``: searcher,
scheduler and stopper as they were at the start) and the latest experiment
state (trial table plus the searcher's and scheduler's saved state).  Restoring
rebuilds the spec with the new trainable (a registered name needs its name again: ``registry``) and
rewinds the table (``_rewind``, in the driver).  When the controller starts, ``prepare_storage`` makes storage
agree with that table: whatever the crashed run wrote after the state was saved (result rows, checkpoints,
whole trial directories) is removed, because the restored searcher, scheduler and table have never seen it;
except that a resumed trial continues from the newest checkpoint committed in storage, even one newer than the
state, when its history reaches it (the results its manifest carries fill it in).
"""

from __future__ import annotations

import copy
import logging
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from actors._driver.errors import ConfigError
from actors._engine.flat import flatten
from actors._engine.trial import TrialStatus
from actors._legacy import loads as legacy_loads

log = logging.getLogger("audition")
FORCE_TRUNCATE = 10**12
STATE_KEYS = ("trial_prefix", "suggested", "trials")
ROW_KEYS = ("trial_id", "config", "status", "last_result", "num_failures")

# What restoring does to a trial (``row["restore"]``); rows without it are left as saved.
RESUME = "resume"  # continue from the saved checkpoint (or from scratch without one)
RESTART = "restart"  # run again from scratch (restart_errored)
END = "end"  # unfinished, but resume_unfinished=False: ends TERMINATED as saved


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


def restore_tuner(cls: Any, path: str, trainable: Any, resume_unfinished: bool, resume_errored: bool,
                  restart_errored: bool, options: dict[str, Any] | None, param_space: Any = None) -> Any:
    from actors._driver.parameters import parameters_of
    from actors._driver.registry import resolve_on_restore
    from actors._driver.tuner import _dumps
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
    state = _rebase(state, layout.experiment_dir)
    try:
        saved = legacy_loads(raw)
        spec = copy.copy(saved["spec"])
    except Exception as exc:
        raise ConfigError(f"the saved tuner at {ctx.uri(layout.tuner_file)} is corrupted or was written "
                          f"by an incompatible version ({exc!r}); start a new experiment") from exc
    _check_param_space(param_space, saved.get("param_space_keys"))
    trainable, spec.trainable_name = resolve_on_restore(trainable, spec)
    spec.trainable = _dumps(trainable, "trainable")
    spec.storage_url, spec.storage_options, spec.name = ctx.url, dict(ctx.options), name
    spec.restore_state = _rewind(state, resume_unfinished, resume_errored, restart_errored)
    tuner = cls.__new__(cls)
    tuner._restored(spec, saved, ctx)
    tuner._parameters = parameters_of(trainable)  # with_parameters objects, published by fit()
    tuner._saved_state = state  # get_results() before fit(): the experiment as it was saved
    return tuner


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
        raise ConfigError(f"the saved tuner at {ctx.uri(layout.tuner_file)} is unreadable ({exc!r})") from exc
    from actors._driver.result_grid import Searched

    searched = Searched(saved["searched"]) if "searched" in saved else None
    grid = stored_results(ctx, name, _rebase(state, layout.experiment_dir), saved["tune_config"],
                          saved["run_config"], searched)
    return grid, saved["tune_config"], getattr(saved["spec"], "trainable_name", "")


def stored_results(ctx: Any, name: str, state: dict[str, Any], tune_config: Any, run_config: Any,
                   searched: Any = None) -> Any:
    """The saved experiment as a ``ResultGrid``, statuses as saved; nothing runs (Ray Tune's
    ``Tuner.restore(...).get_results()``). Histories and checkpoints are read from storage on use."""
    from actors._driver.result_grid import Result, ResultGrid
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
                               row.get("dirname"))
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


def _rewind(state: dict[str, Any], resume_unfinished: bool, resume_errored: bool,
            restart_errored: bool) -> dict[str, Any]:
    """Statuses after restore; each changed row is tagged with what ``prepare_storage`` must do."""
    state = copy.deepcopy(state)
    for row in state["trials"]:
        status = TrialStatus(row["status"])
        if status is TrialStatus.ERROR:
            if restart_errored:
                row.update(status=TrialStatus.PENDING.value, checkpoint=None, num_failures=0, error=None,
                           traceback=None, last_result={}, marks=[], restore=RESTART)
            elif resume_errored:
                row.update(status=TrialStatus.PENDING.value, error=None, traceback=None, restore=RESUME)
        elif status is TrialStatus.RUNNING:
            row["status"] = (TrialStatus.PENDING if resume_unfinished else TrialStatus.TERMINATED).value
            row["restore"] = RESUME if resume_unfinished else END
        elif status in (TrialStatus.PENDING, TrialStatus.PAUSED):
            if not resume_unfinished:
                row["status"] = TrialStatus.TERMINATED.value
            row["restore"] = RESUME if resume_unfinished else END
        if row.get("restore") in (RESUME, RESTART):
            # the state may be older than the result log: drop everything after the checkpoint
            row["logged_iteration"] = FORCE_TRUNCATE
    state["restored"] = True
    return state


# ---------------------------------------------------------------------------------- storage side
def prepare_storage(ctx: Any, layout: Any, state: dict[str, Any]) -> dict[str, list[Any]]:
    """Make storage match the restored table; returns each touched trial's kept checkpoints.

    Runs in the controller before any trial starts, so nothing else writes here. For every trial
    that restoring resumes, restarts or ends: checkpoint directories the state does not know
    (uncommitted, or committed after the state was saved) are deleted, a saved checkpoint that
    has disappeared is replaced by an older committed one (or none), and result rows after the
    point the trial continues from are truncated. Trial directories of the run's naming scheme
    that are not in the table belong to trials suggested after the state was saved: the restored
    searcher suggests them again, so they are deleted. So are checkpoints the state lists as
    retired (retention was deleting them when the run died).
    """
    from storage import delete_checkpoint
    from storage._io import list_dir, remove_tree

    rows = {r["trial_id"]: r for r in state["trials"]}
    own = re.compile(rf"{re.escape(str(state['trial_prefix']))}_\d{{5,}}")
    taken = {posixpath.basename(layout.trial_dir(tid)) for tid in rows}
    named = any(r.get("dirname") for r in rows.values())  # trial_dirname_creator: any name may be a trial's
    stale = [e["name"] for e in list_dir(ctx, layout.experiment_dir)
             if e.get("type") == "directory" and posixpath.basename(e["name"].rstrip("/")) not in taken
             and (own.fullmatch(posixpath.basename(e["name"].rstrip("/")))
                  or (named and _is_trial_dir(ctx, e["name"])))]
    touched = [r for r in rows.values() if r.get("restore")]
    inside = layout.experiment_dir.rstrip("/") + "/"
    retired = [p for p in state.get("retired") or [] if isinstance(p, str) and p.startswith(inside)]
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="restore") as pool:
        list(pool.map(lambda p: remove_tree(ctx, p), stale))
        list(pool.map(lambda p: delete_checkpoint(ctx, p), retired))  # a deletion cut short
        kept = dict(zip([r["trial_id"] for r in touched],
                        pool.map(lambda r: _prepare_trial(ctx, layout, r), touched)))
    if stale:
        log.info("restore: removed %d trial dir(s) written after the last state save", len(stale))
    return kept


def _is_trial_dir(ctx: Any, path: str) -> bool:
    """A directory the controller made for a trial (it writes params.json first), not a dot-dir."""
    from storage import PARAMS_NAME, exists

    base = posixpath.basename(path.rstrip("/"))
    return not base.startswith(".") and exists(ctx, posixpath.join(path.rstrip("/"), PARAMS_NAME))


def _prepare_trial(ctx: Any, layout: Any, row: dict[str, Any]) -> list[Any]:
    from actors.messages import CheckpointRef
    from storage import ResultWriter, delete_checkpoint, list_checkpoints
    from storage._io import remove_tree

    tid = row["trial_id"]
    max_index = int(row.get("max_index", -1))
    if row["restore"] == RESUME:
        max_index = row["max_index"] = _resume_newest(ctx, layout, row, max_index)
    kept: list[CheckpointRef] = []
    for info in list_checkpoints(ctx, layout.trial_dir(tid)):
        if not info.committed:
            remove_tree(ctx, info.path)
        elif info.index > max_index:
            delete_checkpoint(ctx, info.path)  # committed after the state: its results are unknown
        else:
            meta = info.metadata
            kept.append(CheckpointRef(info.path, info.index, int(meta.get("iteration", 0)),
                                      float(meta.get("time_total_s", 0.0)), dict(meta.get("metrics") or {})))
    ck = row.get("checkpoint")
    if row["restore"] == RESUME and ck is not None and not _still_there(ctx, ck["path"], kept):
        older = [c for c in kept if c.iteration <= int(ck["iteration"])]
        if older:
            c = older[-1]
            row["checkpoint"] = {"path": c.path, "index": c.index, "iteration": c.iteration,
                                 "time_total_s": c.time_total_s, "metrics": c.metrics}
        else:
            row["checkpoint"] = None
        log.warning("restore: checkpoint %s of trial %s is gone; continuing from %s", ctx.uri(ck["path"]),
                    tid, ctx.uri(row["checkpoint"]["path"]) if row["checkpoint"] else "scratch")
    if row["restore"] == END:
        upto = int(row["last_result"].get("training_iteration", 0))
    elif row.get("checkpoint"):
        upto = int(row["checkpoint"]["iteration"])
    else:
        upto = 0
    writer = ResultWriter(ctx, layout, tid)
    writer.truncate(upto)
    if row["restore"] == RESUME:
        # the history now ends where the trial continues from, and so does its last result until it
        # reports again (a trial stopped before that, by its scheduler or another abort, keeps it)
        history = writer.json.rows()
        row["last_result"] = history[-1] if history else {}
    writer.close()
    row["logged_iteration"] = upto
    return kept


def _resume_newest(ctx: Any, layout: Any, row: dict[str, Any], max_index: int) -> int:
    """Checkpoints committed after the state was saved: the trial resumes from the newest one its
    history reaches (``actors._shell.recovery``), the history filled from their manifests. Returns the
    highest index to keep; the ones above it are deleted as before."""
    from actors._shell.recovery import choose, found_from
    from storage import ResultWriter, committed_after, read_results

    tid = row["trial_id"]
    infos = committed_after(ctx, layout.trial_dir(tid), max_index)
    if not infos:
        return max_index
    logged = 0  # the history's gap-free prefix 1..logged
    prefix: list[dict[str, Any]] = []
    for r in read_results(ctx, layout, tid):
        it = r.get("training_iteration")
        if it == logged + 1:
            logged += 1
            prefix.append(r)
        elif not isinstance(it, int) or it > logged:
            break
    got = choose([found_from(i) for i in infos], logged)
    c = got.checkpoint
    if c is None:
        return max_index
    if got.rows:
        writer = ResultWriter(ctx, layout, tid)
        writer.truncate(logged)
        writer.append(got.rows)
        writer.close()
    # the trial's last result is the history's last row: a run resuming from the final checkpoint
    # reports nothing more, and its Result.metrics must not be an older row (also when the history
    # already held the rows the state had not yet seen)
    reached = [r for r in (*prefix, *got.rows) if int(r.get("training_iteration", 0)) <= c.iteration]
    seen = int(row["last_result"].get("training_iteration", 0))
    # the restored stopper, scheduler and searcher never saw these rows: the core shows them to the
    # stop criteria before the trial runs on (a trial stopped at one of them ends there)
    row["unseen"] = [dict(r) for r in reached if int(r.get("training_iteration", 0)) > seen]
    if row["unseen"]:
        row["last_result"] = dict(reached[-1])
    row["checkpoint"] = {"path": c.path, "index": c.index, "iteration": c.iteration,
                         "time_total_s": c.time_total_s, "metrics": c.metrics}
    log.info("restore: trial %s resumes from %s, committed after the state was saved", tid, ctx.uri(c.path))
    return c.index


def mark_last_done(ctx: Any, layout: Any, trial_id: str) -> None:
    """The history's last row says ``done=True`` (a trial that ended at it)."""
    from storage import ResultWriter

    writer = ResultWriter(ctx, layout, trial_id)
    rows = writer.json.rows()
    if rows and not rows[-1].get("done"):
        last = rows[-1]
        writer.truncate(int(last.get("training_iteration", 0)) - 1)
        writer.append([{**last, "done": True}])
    writer.close()


def _still_there(ctx: Any, path: str, kept: list[Any]) -> bool:
    """The saved checkpoint is usable: listed as kept, or (a PBT clone's) committed elsewhere."""
    from storage import is_committed

    return any(c.path == path for c in kept) or is_committed(ctx, path)


__all__ = ["can_restore", "prepare_storage", "restore_tuner"]
