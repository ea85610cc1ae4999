"""The class trainable API (Ray Tune's ``Trainable``)."""

from __future__ import annotations

import copy
import os
import time
from typing import TYPE_CHECKING, Any

from actors._driver import trainable_direct as _direct
from actors._driver.trainable_direct import TrainingResult

if TYPE_CHECKING:
    import datetime

    from actors._driver.checkpoint import Checkpoint
    from actors._driver.resources import PlacementGroupFactory


class Trainable:
    """Subclass and implement :meth:`step`; the engine calls it in a loop.

    The trial actor runs one instance in a worker thread: ``setup`` once, then
    ``step`` until a stop criterion, a scheduler STOP, or a result with
    ``done=True``.  ``save_checkpoint``/``load_checkpoint`` are called from the
    same thread, only between steps, so no locking is needed in user code.

    Built by hand (``MyTrainable(config={...})``, as in a unit test), it runs
    ``setup`` at once and ``train()``/``save()``/``restore()``/``reset()``/``stop()``
    behave as Ray Tune's (``actors/_driver/trainable_direct.py``).
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = config if config else {}  # the caller's dict itself, as Ray keeps it
        self.iteration = 0
        self._audition_direct = _direct.DirectRun()
        self._audition_engine = _direct.building_for_engine()
        if not self._audition_engine:  # built by hand: Ray runs setup() here (the engine calls it itself)
            self.setup(copy.deepcopy(self.config))

    # ------------------------------------------------------------------ what a subclass implements
    def setup(self, config: dict[str, Any]) -> None:
        """Build models/data for ``config`` (called once, before the first step)."""

    def step(self) -> dict[str, Any]:
        """Train one iteration and return its metrics."""
        raise NotImplementedError(f"{type(self).__name__} does not implement step(): train one iteration "
                                  "there and return a dict of its metrics")

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any] | None:
        """Write the state into ``checkpoint_dir`` (or return a small dict to store)."""
        return None

    def load_checkpoint(self, checkpoint: str | dict[str, Any]) -> None:
        """Restore from a directory written by :meth:`save_checkpoint` (or its dict)."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Switch to ``new_config`` in place (PBT); return False if unsupported."""
        return False

    def cleanup(self) -> None:
        """Release resources; called once when the trial stops for any reason."""

    def log_result(self, result: dict[str, Any]) -> None:
        """Called with every result (auto-filled keys included) in the trial's process; a logging hook."""

    def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
        """Export the model in each of ``export_formats`` into ``export_dir``; map format to path."""
        return {}

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory | None:
        """None, as Ray's (one CPU a trial); a class that overrides it has each trial sized by it under ``fit()``,
        as Ray's (``with_resources`` overrides it)."""
        return None

    @classmethod
    def resource_help(cls, config: dict[str, Any]) -> str:
        return ""

    # ------------------------------------------------------------------ used by hand (Ray's public methods)
    def train(self) -> dict[str, Any]:
        """Run one ``step()`` and return its result with Ray's auto-filled keys (``training_iteration``,
        ``time_this_iter_s``, ``done``, ``timestamp``, ``config``...)."""
        return _direct.train(self)

    def train_buffered(self, buffer_time_s: float, max_buffer_length: int = 1000) -> list[dict[str, Any]]:
        """``train()`` until ``buffer_time_s`` passed (one result at least), ``max_buffer_length`` results,
        or a result that is ``done`` or asks for a checkpoint."""
        results: list[dict[str, Any]] = []
        until = time.time() + buffer_time_s
        while not results or time.time() < until:
            result = self.train()
            results.append(result)
            if (result.get("done") or result.get("should_checkpoint") or result.get(_direct.RESULT_DUPLICATE)
                    or len(results) >= max_buffer_length):
                break
        return results

    def save(self, checkpoint_dir: str | None = None) -> TrainingResult:
        """``save_checkpoint`` into ``checkpoint_dir`` (default: a new temporary directory, yours to delete);
        returns ``.checkpoint`` and ``.metrics`` (the last result), for :meth:`restore`."""
        return _direct.save(self, checkpoint_dir)

    def restore(self, checkpoint_path: str | os.PathLike[str] | Checkpoint | TrainingResult) -> None:
        """``load_checkpoint`` from what :meth:`save` returned (the counts resume from its metrics), its
        ``Checkpoint`` or a checkpoint directory (the counts start from 0)."""
        _direct.restore(self, checkpoint_path)

    def stop(self) -> None:
        """Release resources: calls ``cleanup()``."""
        self.cleanup()

    def reset(self, new_config: dict[str, Any]) -> bool:
        """Take ``new_config``; ``reset_config``'s answer (True: the counts start afresh)."""
        return _direct.reset(self, new_config)

    def export_model(self, export_formats: str | list[str], export_dir: str | None = None) -> dict[str, str]:
        formats = [export_formats] if isinstance(export_formats, str) else list(export_formats)
        return self._export_model(formats, export_dir or self.logdir)

    def get_auto_filled_metrics(self, now: datetime.datetime | None = None, time_this_iter: float | None = None,
                                timestamp: int | None = None, debug_metrics_only: bool = False) -> dict[str, Any]:
        return _direct.auto_filled(self, now, time_this_iter, timestamp, debug_metrics_only)

    def get_state(self) -> dict[str, Any]:
        """The counts ``train()`` keeps and the last result (Ray's keys, ``audition_version`` for its version)."""
        return _direct.get_state(self)

    def get_current_ip_pid(self) -> tuple[str, int]:
        from actors._worker.autofill import node_ip

        return node_ip(), os.getpid()

    def is_actor(self) -> bool:
        """True when the engine runs this instance in a trial (Ray: inside its actor)."""
        return bool(self.__dict__.get("_audition_engine", False))

    # ------------------------------------------------------------------ Ray Tune's read-only views
    @property
    def training_iteration(self) -> int:
        """Completed steps: 0 in ``setup``, ``k - 1`` during the k-th ``step`` (Ray's)."""
        return self.iteration

    def get_config(self) -> dict[str, Any]:
        return self.config

    @property
    def trial_id(self) -> str:
        return _from_context("get_trial_id")

    @property
    def trial_name(self) -> str:
        return _from_context("get_trial_name")

    @property
    def experiment_name(self) -> str:
        return _from_context("get_experiment_name")

    @property
    def logdir(self) -> str:
        """The trial's own local directory (``get_context().get_trial_dir()``); built by hand, a new
        directory under ``~/audition_results`` (Ray's: under ``~/ray_results``)."""
        return _from_context("get_trial_dir", "") or _direct.logdir(self)

    @property
    def trial_resources(self) -> PlacementGroupFactory | None:
        """The trial's resources (``get_context().get_trial_resources()``); None outside a trial, as Ray's."""
        from actors._driver.errors import TuneError
        from actors._worker.session import get_context

        try:
            return get_context().get_trial_resources()
        except TuneError:
            return None


def _from_context(method: str, outside: str = "default") -> str:
    from actors._driver.errors import TuneError
    from actors._worker.session import get_context

    try:
        return str(getattr(get_context(), method)())
    except TuneError:  # not run by Tuner.fit() (a unit test building it directly)
        return outside


__all__ = ["Trainable"]
