"""``Tuner.restore`` / ``Tuner.can_restore``: continue an experiment from storage.

The experiment directory holds the original spec (``tuner.pkl``: searcher,
scheduler and stopper as they were at the start) and the latest experiment
state (trial table plus the searcher's and scheduler's saved state).  Restoring
rebuilds the spec with the new trainable, rewinds unfinished trials to their
latest committed checkpoint, and lets the controller continue.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

import cloudpickle

from actors._errors import ConfigError
from actors._trial import TrialStatus

FORCE_TRUNCATE = 10**12


def _split(path: str, options: dict[str, Any] | None) -> tuple[Any, Any, str]:
    from storage import ExperimentLayout, StorageContext, StorageError

    p = path.rstrip("/")
    parent, name = posixpath.split(p) if "://" in p else __import__("os").path.split(p)
    if not name:
        raise ConfigError(f"{path!r} is not an experiment directory; pass <storage>/<experiment name>")
    try:
        ctx = StorageContext(parent, options)
    except StorageError as exc:
        raise ConfigError(str(exc)) from exc
    return ctx, ExperimentLayout(ctx, name), name


def can_restore(path: str, options: dict[str, Any] | None = None) -> bool:
    from storage import StorageError, exists

    try:
        ctx, layout, _ = _split(path, options)
        return exists(ctx, layout.tuner_file) and exists(ctx, layout.state_pointer)
    except (ConfigError, StorageError):
        return False


def restore_tuner(cls: Any, path: str, trainable: Any, resume_unfinished: bool, resume_errored: bool,
                  restart_errored: bool, options: dict[str, Any] | None) -> Any:
    from actors._tuner import _check_trainable, _dumps
    from storage import StorageError, read_bytes, read_experiment_state

    ctx, layout, name = _split(path, options)
    try:
        raw = read_bytes(ctx, layout.tuner_file)
        state = read_experiment_state(ctx, layout)
    except FileNotFoundError:
        raise ConfigError(f"no audition experiment at {ctx.uri(layout.experiment_dir)} (tuner.pkl missing); "
                          "pass the directory fit() printed as experiment_path") from None
    except StorageError as exc:
        raise ConfigError(f"cannot restore {path}: {exc}") from exc
    if state is None:
        raise ConfigError(f"no experiment state under {ctx.uri(layout.experiment_dir)}: the run stopped "
                          "before its first state write; start it again with fit()")
    try:
        saved = cloudpickle.loads(raw)
    except Exception as exc:
        raise ConfigError(f"the saved tuner at {ctx.uri(layout.tuner_file)} is corrupted or was written by an "
                          f"incompatible version ({exc!r}); start a new experiment") from exc
    spec = copy.copy(saved["spec"])
    spec.trainable_name = _check_trainable(trainable)
    spec.trainable = _dumps(trainable, "trainable")
    spec.storage_url, spec.storage_options, spec.name = ctx.url, dict(ctx.options), name
    spec.restore_state = _rewind(state, resume_unfinished, resume_errored, restart_errored)
    tuner = cls.__new__(cls)
    tuner._restored(spec, saved, ctx)
    return tuner


def _rewind(state: dict[str, Any], resume_unfinished: bool, resume_errored: bool,
            restart_errored: bool) -> dict[str, Any]:
    state = copy.deepcopy(state)
    for row in state["trials"]:
        status = TrialStatus(row["status"])
        if status is TrialStatus.ERROR:
            if restart_errored:
                row.update(status=TrialStatus.PENDING.value, checkpoint=None, num_failures=0, error=None)
            elif resume_errored:
                row.update(status=TrialStatus.PENDING.value, error=None)
        elif status is TrialStatus.RUNNING:
            row["status"] = (TrialStatus.PENDING if resume_unfinished else TrialStatus.TERMINATED).value
        elif status in (TrialStatus.PENDING, TrialStatus.PAUSED) and not resume_unfinished:
            row["status"] = TrialStatus.TERMINATED.value
        if not TrialStatus(row["status"]).is_finished:
            # the state may be older than the result log: drop everything after the checkpoint
            row["logged_iteration"] = FORCE_TRUNCATE
    state["restored"] = True
    return state


__all__ = ["can_restore", "restore_tuner"]
