"""Ray Tune's ``ray.tune.experiment`` for plugins: ``Trial``, the read-only trial schedulers, searchers' hooks
and callbacks are given (audition's ``TrialSnapshot``), with Ray's status constants (``Trial.PAUSED``).

A plugin ported from Ray imports it for type hints, ``isinstance`` checks and those constants. Unlike Ray's,
it is a snapshot: building one by hand, or changing it, changes no experiment (plugins act through the
controller handle their hooks get).
"""

from __future__ import annotations

from typing import Any

from actors._engine.trial import TrialSnapshot as Trial
from actors._engine.trial import TrialStatus


def __getattr__(name: str) -> Any:
    if name == "Experiment":  # (``ray.tune.experiment.Experiment``: the driver's, imported only when asked for)
        from actors._driver.experiments import Experiment

        return Experiment
    raise AttributeError(f"module 'actors.experiment' has no attribute {name!r}")


__all__ = ["Experiment", "Trial", "TrialStatus"]  # noqa: F822  (Experiment: __getattr__)
