"""A ``Trainable`` used by hand, outside ``fit()``: Ray Tune 2.60's ``train()``, ``save()``, ``restore()``...

Ray users unit-test a class trainable by building it and calling these methods themselves (Ray's own
engine calls the same ones). audition's engine drives ``setup``/``step``/``save_checkpoint``/
``load_checkpoint``/``reset_config``/``cleanup`` itself (``actors/_worker/runner.py``) and keeps its
own counts there, so what lives here serves direct use: the counts Ray's ``train()`` keeps
(``DirectRun``), the auto-filled result keys, and saving to/restoring from a local directory.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors._driver.checkpoint import _DICT_FILE, Checkpoint
from actors._worker.counters import EPISODES_TOTAL, TIMESTEPS_TOTAL, RunningTotals
from actors.result import DONE, TIME_THIS_ITER_S, TIME_TOTAL_S, TIMESTAMP, TRAINING_ITERATION, TRIAL_ID

if TYPE_CHECKING:
    from actors._driver.trainable import Trainable

log = logging.getLogger("audition")

RESULT_DUPLICATE = "__duplicate__"  # Ray's marker: such a step() result is returned as it is, uncounted
# the keys Ray's get_auto_filled_metrics(debug_metrics_only=True) keeps (its DEBUG_METRICS)
DEBUG_METRICS = ("trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config")

_engine = threading.local()


@contextlib.contextmanager
def built_by_engine() -> Iterator[None]:
    """The runner builds a trainable: ``__init__`` must not run ``setup()``, the runner calls it itself."""
    _engine.building = True
    try:
        yield
    finally:
        _engine.building = False


def building_for_engine() -> bool:
    return bool(getattr(_engine, "building", False))


class WrongTypeError(TypeError, AssertionError):
    """A value of the wrong type where Ray asserts (AssertionError) and audition's engine raises TypeError:
    ``except`` either catches it."""


@dataclass
class TrainingResult:
    """What ``Trainable.save()`` returns, as Ray 2.60's: the checkpoint and the last result's metrics.

    ``restore()`` takes it back (and then resumes the iteration count and times from ``metrics``).
    """

    checkpoint: Checkpoint
    metrics: dict[str, Any] = field(default_factory=dict)


class DirectRun:
    """The counts Ray's ``train()`` keeps between calls (``iteration`` itself lives on the trainable)."""

    def __init__(self) -> None:
        self.logdir: str | None = None  # made on first use of Trainable.logdir
        self.restart({})
        self.last_result: dict[str, Any] | None = None

    def restart(self, metrics: dict[str, Any]) -> None:
        """Counts as after a restore from a checkpoint whose result is ``metrics`` (``{}``: from scratch)."""
        self.time_total: float = metrics.get(TIME_TOTAL_S, 0.0)
        self.time_since_restore = 0.0
        self.iterations_since_restore = 0
        self.totals = RunningTotals(metrics)


def state_of(t: Trainable) -> DirectRun:
    run = t.__dict__.get("_audition_direct")
    if run is None:  # a subclass __init__ that did not call Trainable.__init__
        run = t.__dict__["_audition_direct"] = DirectRun()
    return run


def _overrides(t: Trainable, name: str) -> bool:
    from actors._driver.trainable import Trainable

    return getattr(type(t), name) is not getattr(Trainable, name)


def train(t: Trainable) -> dict[str, Any]:
    """One ``step()`` and Ray's auto-filled keys (the step's own ``done``/``training_iteration``/truthy
    ``timestamp``/non-None ``time_this_iter_s`` are kept); then ``log_result(result)``."""
    if t.config.get("log_sys_usage"):
        raise ValueError("config['log_sys_usage']=True: audition does not add Ray's 'perf' system metrics to "
                         "results; measure what you need in step() (e.g. with psutil) and return it")
    run = state_of(t)
    start = time.time()
    metrics = t.step()
    if not isinstance(metrics, dict):
        raise WrongTypeError(f"{type(t).__name__}.step() must return a dict of metrics, "
                              f"got {type(metrics).__name__}")
    if RESULT_DUPLICATE in metrics:
        return metrics
    result = dict(metrics)
    t.iteration += 1
    run.iterations_since_restore += 1
    given = result.get(TIME_THIS_ITER_S)
    took = given if given is not None else time.time() - start
    run.time_total += took
    run.time_since_restore += took
    result.setdefault(DONE, False)
    result.update(run.totals.count(result))
    result.setdefault(TRAINING_ITERATION, t.iteration)
    result.update(auto_filled(t, datetime.datetime.now(), took, result.get(TIMESTAMP)))
    t.log_result(result)
    run.last_result = result
    return result


def auto_filled(t: Trainable, now: datetime.datetime | None, time_this_iter: float | None,
                timestamp: int | None, debug_metrics_only: bool = False) -> dict[str, Any]:
    """Ray's ``get_auto_filled_metrics``: the keys ``train()`` writes over every result."""
    from actors._worker.autofill import started_metrics

    run = state_of(t)
    base = started_metrics((now or datetime.datetime.now()).timestamp())
    out = {TRIAL_ID: t.trial_id, "date": base["date"], TIMESTAMP: timestamp or base[TIMESTAMP],
           TIME_THIS_ITER_S: time_this_iter, TIME_TOTAL_S: run.time_total, "pid": base["pid"],
           "hostname": base["hostname"], "node_ip": base["node_ip"], "config": t.config,
           "time_since_restore": run.time_since_restore, "iterations_since_restore": run.iterations_since_restore,
           **run.totals.auto_filled()}
    if debug_metrics_only:
        return {k: v for k, v in out.items() if k in DEBUG_METRICS}
    return out


def save(t: Trainable, checkpoint_dir: str | None) -> TrainingResult:
    """``save_checkpoint`` into ``checkpoint_dir`` (a new temporary directory if None, left for the
    caller to delete, as Ray's); a returned dict is stored as ``Checkpoint.from_dict`` stores one."""
    import cloudpickle

    name = type(t).__name__
    if not _overrides(t, "save_checkpoint"):
        raise NotImplementedError(f"{name}.save(): {name} does not implement save_checkpoint(checkpoint_dir); "
                                  "write your state into checkpoint_dir there (or return a dict of it)")
    target = os.fspath(checkpoint_dir) if checkpoint_dir else tempfile.mkdtemp()
    os.makedirs(target, exist_ok=True)
    out = t.save_checkpoint(target)
    if isinstance(out, dict):
        with open(os.path.join(target, _DICT_FILE), "wb") as f:
            cloudpickle.dump(out, f)
    elif isinstance(out, str) and out != target:
        raise ValueError(f"{name}.save_checkpoint({target!r}) returned {out!r}: return None (or that same "
                         "directory) after writing your files into it, or a dict of your state")
    last = state_of(t).last_result
    return TrainingResult(Checkpoint.from_directory(target), dict(last) if last else {})


def restore(t: Trainable, checkpoint: str | os.PathLike[str] | Checkpoint | TrainingResult) -> None:
    """``load_checkpoint`` from what ``save()`` returned, its ``Checkpoint``, or a directory path. Only a
    ``save()`` result carries the metrics the iteration count and times resume from (else from 0)."""
    name = type(t).__name__
    if isinstance(checkpoint, (str, os.PathLike)):
        checkpoint = Checkpoint(os.fspath(checkpoint))
    if isinstance(checkpoint, Checkpoint):
        checkpoint = TrainingResult(checkpoint, {})
    if not isinstance(checkpoint, TrainingResult):
        raise WrongTypeError(f"{name}.restore() takes what save() returned, its .checkpoint, or a checkpoint "
                              f"directory's path; got {type(checkpoint).__name__}")
    ckpt = checkpoint.checkpoint
    if ckpt.is_local and not os.path.isdir(ckpt.path.removeprefix("file://")):
        raise ValueError(f"{name}.restore(): the checkpoint directory {ckpt.path} does not exist (anymore); "
                         "restore from a directory save() wrote and that is still there")
    if not _overrides(t, "load_checkpoint"):
        raise NotImplementedError(f"{name}.restore(): {name} does not implement load_checkpoint(checkpoint); "
                                  "read back there what save_checkpoint wrote")
    run = state_of(t)
    metrics = checkpoint.metrics
    t.iteration = metrics.get(TRAINING_ITERATION, 0)
    run.restart(metrics)
    load_into(t, ckpt)
    log.info("%s restored from %s", name, ckpt)


def load_into(t: Trainable, checkpoint: Checkpoint) -> None:
    """Hand ``checkpoint`` to ``load_checkpoint``: the dict ``save_checkpoint`` returned, else the directory
    it wrote (what the engine does on a restore, and ``restore()`` by hand)."""
    with checkpoint.as_directory() as d:
        if os.path.exists(os.path.join(d, _DICT_FILE)):
            t.load_checkpoint(checkpoint.to_dict())
        else:
            t.load_checkpoint(d)


def reset(t: Trainable, new_config: dict[str, Any]) -> bool:
    """Ray's ``reset``: take ``new_config`` (even when refused), ask ``reset_config``; on True start the
    counts afresh (a later ``restore()`` sets them), on False leave them."""
    t.config = new_config
    run = state_of(t)
    run.logdir = None  # Ray gives the reset trainable a new log directory
    if not t.reset_config(new_config):
        return False
    t.iteration = 0
    run.restart({})
    return True


def logdir(t: Trainable) -> str:
    """A directory of this trainable's own under audition's default storage, named as Ray names it (the
    date and a random suffix), made when first asked for."""
    from actors._driver.config import DEFAULT_STORAGE

    run = state_of(t)
    if run.logdir is None:
        root = os.path.expanduser(DEFAULT_STORAGE)
        os.makedirs(root, exist_ok=True)
        run.logdir = tempfile.mkdtemp(prefix=datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"), dir=root)
    return run.logdir


def get_state(t: Trainable) -> dict[str, Any]:
    """Ray's ``get_state()`` keys, but ``audition_version`` for ``ray_version``."""
    from actors import __version__

    run = state_of(t)
    return {"iteration": t.iteration, TIMESTEPS_TOTAL: run.totals.timesteps_total, "time_total": run.time_total,
            EPISODES_TOTAL: run.totals.episodes_total, "last_result": run.last_result,
            "audition_version": __version__}


__all__ = ["DirectRun", "WrongTypeError", "TrainingResult", "built_by_engine", "load_into"]
