"""Ray Tune's ``ray.tune.schedulers.resource_changing_scheduler`` module path:
``from actors.schedulers.resource_changing_scheduler import DistributeResources, ResourceChangingScheduler``."""

from __future__ import annotations

from actors.schedulers._distribute import DistributeResources, DistributeResourcesToTopJob
from actors.schedulers._resource_changing import ResourceChangingScheduler

__all__ = ["DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"]
