"""Each trial's resources from its config (``ResourcesOf``), and the experiment's one size given to trials
that have none of their own (``SameResources``). Ray's ``PlacementGroupFactory`` itself is pure
(``actors._engine.resource_request``) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors._engine.resource_request import PlacementGroupFactory, check_resources


class ResourcesOf:
    """Each trial's resources from its config: Ray's ``with_resources(train, lambda config: ...)`` and a
    class trainable's ``default_resource_request(config)``.

    The controller calls it once per trial, with the trial's config, when the search algorithm gives the
    trial (Ray calls it when it creates the trial); the trial keeps those resources from then on (a PBT
    exploit's new config does not change them, as in Ray), and a restored experiment reads them from its
    state. It runs in the controller's process, so it must be quick and must not block. What it returns is
    checked as ``with_resources`` checks a dict (a one-bundle ``PlacementGroupFactory`` too): a bad value
    stops the experiment with an error naming the trial and its config.
    """

    def __init__(self, fn: Callable[[dict[str, Any]], Any], where: str, none_is_default: bool = False) -> None:
        self.fn = fn
        self.where = where
        self.none_is_default = none_is_default  # default_resource_request's None: Ray's default, one CPU

    def __call__(self, config: dict[str, Any]) -> dict[str, float]:
        value = self.fn(config)
        if value is None and self.none_is_default:
            return {"cpu": 1.0}
        return check_resources(value, self.where) or {"cpu": 1.0}  # ({}: Ray's default, one CPU)


class SameResources:
    """The experiment's one resources dict, as a ``ResourcesOf`` gives each trial its own: what trials without
    resources of their own get once some trials have theirs (``run(resume=..., resources_per_trial=...)``, a
    scheduler that resizes trials)."""

    def __init__(self, resources: Mapping[str, float]) -> None:
        self.resources = dict(resources)

    def __call__(self, config: dict[str, Any]) -> dict[str, float]:
        return dict(self.resources)


def resources_from_class(trainable: Any) -> ResourcesOf | None:
    """A class trainable's own ``default_resource_request(config)`` (Ray sizes each trial by it), if it
    overrides ``Trainable``'s; None otherwise (and for a function trainable)."""
    import inspect

    from actors._driver.trainable import Trainable

    if not inspect.isclass(trainable) or not issubclass(trainable, Trainable):
        return None
    own = inspect.getattr_static(trainable, "default_resource_request")
    if own is inspect.getattr_static(Trainable, "default_resource_request"):
        return None
    return ResourcesOf(trainable.default_resource_request, f"{trainable.__name__}.default_resource_request(config)",
                       none_is_default=True)


__all__ = ["PlacementGroupFactory", "ResourcesOf", "SameResources", "resources_from_class"]
