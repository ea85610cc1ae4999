"""``create_scheduler(name, **kwargs)``: Ray Tune's scheduler names, mapped to audition's classes.

The rule is ``actors.search._registry.build_by_name`` (Ray 2.60's, shared with ``create_searcher``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.search._registry import build_by_name

# Ray 2.60's ``SCHEDULER_IMPORT`` keys, in its order (listed by its error message)
RAY_SCHEDULER_NAMES = ("fifo", "async_hyperband", "asynchyperband", "median_stopping_rule", "medianstopping",
                       "hyperband", "hb_bohb", "pbt", "pbt_replay", "pb2", "resource_changing")
# names audition does not offer -> what Ray builds, and what to use instead
_NOT_OFFERED: dict[str, tuple[str, str]] = {}


def _table() -> dict[str, Callable[[], Any]]:
    from actors.schedulers import (
        PB2,
        AsyncHyperBandScheduler,
        FIFOScheduler,
        HyperBandForBOHB,
        HyperBandScheduler,
        MedianStoppingRule,
        PopulationBasedTraining,
        PopulationBasedTrainingReplay,
        ResourceChangingScheduler,
    )

    return {"fifo": lambda: FIFOScheduler, "async_hyperband": lambda: AsyncHyperBandScheduler,
            "asynchyperband": lambda: AsyncHyperBandScheduler, "median_stopping_rule": lambda: MedianStoppingRule,
            "medianstopping": lambda: MedianStoppingRule, "hyperband": lambda: HyperBandScheduler,
            "hb_bohb": lambda: HyperBandForBOHB, "pbt": lambda: PopulationBasedTraining,
            "pbt_replay": lambda: PopulationBasedTrainingReplay, "pb2": lambda: PB2,
            "resource_changing": lambda: ResourceChangingScheduler}


def create_scheduler(scheduler: str, **kwargs: Any) -> Any:
    """Ray Tune's ``create_scheduler``: the scheduler Ray's ``name`` stands for (``"fifo"``,
    ``"async_hyperband"``, ``"median_stopping_rule"``, ``"hyperband"``, ``"hb_bohb"``, ``"pbt"``, ``"pbt_replay"``, ...,
    any case), built from the ``kwargs`` its class takes."""
    return build_by_name("create_scheduler", "scheduler", scheduler, _table(), RAY_SCHEDULER_NAMES, _NOT_OFFERED,
                         kwargs)


__all__ = ["RAY_SCHEDULER_NAMES", "create_scheduler"]
