"""Stop criteria: when a trial, or the whole experiment, should stop.

``stop=`` in ``RunConfig`` accepts a dict, a function, a :class:`Stopper` or
None; :func:`make_stopper` turns any of those into a :class:`Stopper`.
"""

from __future__ import annotations

from actors.stoppers._base import CombinedStopper, FunctionStopper, NoopStopper, Stopper
from actors.stoppers._criteria import DictStopper, make_stopper
from actors.stoppers._limits import MaximumIterationStopper, TimeoutStopper, with_time_budget
from actors.stoppers._plateau import ExperimentPlateauStopper, TrialPlateauStopper

__all__ = [
    "CombinedStopper",
    "DictStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
    "make_stopper",
    "with_time_budget",
]
