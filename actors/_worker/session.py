"""``report()`` / ``get_checkpoint()``: the function trainable's side of a trial.

A session belongs to the worker thread that runs one trial's trainable; it is
looked up thread-locally (several trials share a process on the in-process
system) with a process-wide fallback for threads the user starts themselves.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from actors._driver.errors import TuneError
from actors._worker.workdir import local_trial_dir

if TYPE_CHECKING:
    from actors._driver.checkpoint import Checkpoint
    from actors._driver.resources import PlacementGroupFactory
    from actors._worker.runner import TrialRunner

_local = threading.local()
_process_session: TrialRunner | None = None


def _set_session(runner: TrialRunner | None) -> None:
    global _process_session
    _local.runner = runner
    _process_session = runner


def _get_session(what: str) -> TrialRunner:
    runner = getattr(_local, "runner", None) or _process_session
    if runner is None:
        raise TuneError(
            f"{what}() was called outside a trial; call it from a trainable run by Tuner.fit()"
        )
    return runner


def report(metrics: dict[str, Any], *, checkpoint: Checkpoint | None = None) -> None:
    """Report one iteration's ``metrics`` (and optionally a checkpoint) to the controller.

    Blocks until the scheduler's decision for this result is known (or, for
    schedulers that tolerate batching, until there is room in the trial's
    bounded result buffer).  When the decision is STOP or PAUSE, the trainable is
    ended here: code after the last ``report`` may not run.
    """
    from actors._driver.checkpoint import Checkpoint

    if not isinstance(metrics, dict):
        raise TypeError(f"report() expects a dict of metrics, got {type(metrics).__name__}")
    if checkpoint is not None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"report(checkpoint=...) takes an actors.Checkpoint, got {type(checkpoint).__name__}; "
                            "wrap the data: Checkpoint.from_dict({...}) or Checkpoint.from_directory(path)")
        checkpoint._check_reportable()
    session = _get_session("report")
    torch = sys.modules.get("torch")
    if torch is not None and _holds_torch_object(metrics, _torch_kinds(torch)):
        # Ray 2.60's words and check (its session's report): the trial fails here, where a tensor would
        # otherwise reach the loggers (recorded: Ray fails the trial; audition's result.json stopped the run)
        raise ValueError("Passing objects containg Torch tensors as metrics is not supported as it will throw an "
                         "exception on deserialization. You can either convert the tensors to Python objects or "
                         "report a `train.Checkpoint` with `ray.train.report` to store your Torch objects.")
    session.report(metrics, checkpoint)


_PLAIN = frozenset({float, int, str, bool, type(None), bytes})


def _torch_kinds(torch: Any) -> tuple[type, ...]:
    """The torch types Ray's check refuses (a module being imported may not have them yet: none then)."""
    try:
        return (torch.Tensor, torch.nn.Module)
    except AttributeError:
        return ()


def _holds_torch_object(value: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``value`` is or holds (in dict keys and values, lists, tuples) one of ``kinds`` (a tensor, a
    module), as Ray's ``contains_tensor`` looks."""
    if type(value) in _PLAIN:  # (most values: skips torch's isinstance hooks, a few microseconds each)
        return False
    if isinstance(value, kinds):
        return True
    if isinstance(value, dict):
        for k, v in value.items():
            if _holds_torch_object(k, kinds) or _holds_torch_object(v, kinds):
                return True
    elif isinstance(value, (list, tuple)):
        for v in value:
            if _holds_torch_object(v, kinds):
                return True
    return False


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint to resume from (None on a fresh start)."""
    return _get_session("get_checkpoint").restore_checkpoint


def get_trial_id() -> str:
    return _get_session("get_trial_id").trial_id


class TuneContext:
    """Ray Tune's ``tune.get_context()``: the running trial, read when asked (so one object serves
    every trial of a process, as Ray's singleton)."""

    def get_trial_id(self) -> str:
        return _get_session("get_context().get_trial_id").trial_id

    def get_trial_name(self) -> str:
        """``<trainable>_<trial id>``, Ray's ``str(trial)``."""
        return _get_session("get_context().get_trial_name").msg.trial_name

    def get_experiment_name(self) -> str:
        return _get_session("get_context().get_experiment_name").msg.experiment_name

    def get_trial_dir(self) -> str:
        """A local directory of this trial's own: its directory in the experiment on local storage;
        with remote storage (Ray's case too) a scratch directory on this machine, not uploaded."""
        runner = _get_session("get_context().get_trial_dir")
        return local_trial_dir(runner.layout.trial_dir(runner.trial_id), runner.ctx.is_local,
                               runner.msg.experiment_name)

    def get_trial_resources(self) -> PlacementGroupFactory:
        """The trial's resources as Ray's ``PlacementGroupFactory`` of one bundle (``[{"CPU": 1.0}]``
        by default, ``[{"CPU": 2.0}]`` for ``with_resources(train, {"cpu": 2})``)."""
        from actors._driver.resources import PlacementGroupFactory

        return PlacementGroupFactory.from_resources(_get_session("get_context().get_trial_resources").msg.resources)

    def get_world_rank(self) -> None:
        """None, as Ray Tune answers outside Ray Train."""
        return None

    # Ray Train's other ranks and sizes: None in a Tune trial, as recorded from Ray 2.60 (code shared with
    # Ray Train may ask them to shard its data)
    def get_world_size(self) -> None:
        return None

    def get_local_rank(self) -> None:
        return None

    def get_local_world_size(self) -> None:
        return None

    def get_node_rank(self) -> None:
        return None

    def get_metadata(self) -> None:
        """Raises, as Ray 2.60's does in a Tune trial (it never held anything there)."""
        raise DeprecationWarning("get_context().get_metadata() is not offered in a Tune trial (Ray 2.60 raises "
                                 "too): pass what the trial needs in its config, or with tune.with_parameters")


_context = TuneContext()


def get_context() -> TuneContext:
    """The running trial's context (``tune.get_context()``); its methods raise outside a trial."""
    return _context


__all__ = ["TuneContext", "get_checkpoint", "get_context", "get_trial_id", "report"]
