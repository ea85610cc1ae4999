"""The class trainable API (Ray Tune's ``Trainable``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors._driver.resources import PlacementGroupFactory


class Trainable(ABC):
    """Subclass and implement :meth:`step`; the engine calls it in a loop.

    The trial actor runs one instance in a worker thread: ``setup`` once, then
    ``step`` until a stop criterion, a scheduler STOP, or a result with
    ``done=True``.  ``save_checkpoint``/``load_checkpoint`` are called from the
    same thread, only between steps, so no locking is needed in user code.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = dict(config or {})
        self.iteration = 0

    def setup(self, config: dict[str, Any]) -> None:
        """Build models/data for ``config`` (called once, before the first step)."""

    @abstractmethod
    def step(self) -> dict[str, Any]:
        """Train one iteration and return its metrics."""

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

    # Ray Tune's read-only views of the running trial ("default" outside a trial, as Ray's)
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
        """The trial's own local directory (``get_context().get_trial_dir()``)."""
        return _from_context("get_trial_dir")

    @property
    def trial_resources(self) -> PlacementGroupFactory | None:
        """The trial's resources (``get_context().get_trial_resources()``); None outside a trial, as Ray's."""
        from actors._driver.errors import TuneError
        from actors._worker.session import get_context

        try:
            return get_context().get_trial_resources()
        except TuneError:
            return None


def _from_context(method: str) -> str:
    from actors._driver.errors import TuneError
    from actors._worker.session import get_context

    try:
        return str(getattr(get_context(), method)())
    except TuneError:  # not run by Tuner.fit() (a unit test building it directly)
        return "default"


__all__ = ["Trainable"]
