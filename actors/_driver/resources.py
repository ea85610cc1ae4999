"""Ray Tune's ``PlacementGroupFactory`` as a read-only view of a trial's resources.

audition places a trial by one dict of resources (``with_resources(train, {"cpu": 2})``, or each
trial's own from a function of its config: ``ResourcesOf``) and has no placement groups; Ray 2.60
answers ``get_trial_resources()`` / ``Trainable.trial_resources`` with a ``PlacementGroupFactory``
of one bundle made from that dict. This is that object, with the attributes ports read
(``required_resources``, ``bundles``, ``head_cpus``, ``strategy``), so code such as
``torch.set_num_threads(int(r.head_cpus))`` runs unchanged. Nothing here schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from actors._driver.errors import ConfigError

# audition's spelling -> Ray's bundle key (other resource names are kept as they are, as Ray does)
_RAY_KEY = {"cpu": "CPU", "gpu": "GPU"}


def _bundle(values: Mapping[str, Any]) -> dict[str, float]:
    """Ray's bundle form: float amounts, zero amounts dropped (a zero asks for nothing)."""
    return {str(k): float(v) for k, v in values.items() if v}


class PlacementGroupFactory:
    """The resources of one trial as Ray Tune describes them: a list of ``bundles`` (dicts of
    ``"CPU"``, ``"GPU"``, ``"memory"`` or custom names) and a ``strategy``. audition runs a trial
    in one process on one machine, so a trial's own factory always has one bundle."""

    def __init__(self, bundles: list[dict[str, float]], strategy: str = "PACK") -> None:
        if not isinstance(bundles, list) or not all(isinstance(b, Mapping) for b in bundles):
            raise ConfigError(f"PlacementGroupFactory: bundles must be a list of dicts, got {bundles!r}")
        self._bundles = [_bundle(b) for b in bundles]
        # an empty first bundle: the trial's own process needs nothing (Ray drops it and says so)
        self.head_bundle_is_empty = bool(self._bundles) and not self._bundles[0]
        if self.head_bundle_is_empty:
            self._bundles.pop(0)
        if not any(self._bundles):
            raise ConfigError("PlacementGroupFactory: asks for no resources at all")
        self.strategy = strategy

    @classmethod
    def from_resources(cls, resources: Mapping[str, float] | None) -> PlacementGroupFactory:
        """One bundle from audition's per-trial dict (``{"cpu": 1}`` when none was given)."""
        res = dict(resources or {"cpu": 1.0})
        return cls([{_RAY_KEY.get(k, k): v for k, v in res.items()}])

    @property
    def bundles(self) -> list[dict[str, float]]:
        """Copies of the bundles (an empty head left out, as Ray's)."""
        return [dict(b) for b in self._bundles]

    @property
    def required_resources(self) -> dict[str, float]:
        """Every bundle's resources summed."""
        total: dict[str, float] = {}
        for b in self._bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0.0) + v
        return total

    @property
    def head_cpus(self) -> float:
        """The CPUs of the first bundle: the trial's own process (0.0 with an empty head)."""
        return 0.0 if self.head_bundle_is_empty else float(self._bundles[0].get("CPU", 0.0))

    def as_resources(self) -> dict[str, float]:
        """audition's dict for ``with_resources``: only a one-bundle factory can be placed."""
        if len(self._bundles) != 1 or self.head_bundle_is_empty:
            raise ConfigError(
                f"with_resources: a PlacementGroupFactory of {len(self._bundles)} bundles "
                f"({self._bundles}) needs placement groups, which audition has not; a trial gets "
                "one dict of resources on one machine, e.g. with_resources(train, {'cpu': 2})")
        back = {v: k for k, v in _RAY_KEY.items()}
        return {back.get(k, k): v for k, v in self._bundles[0].items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementGroupFactory):
            return NotImplemented
        return (self._bundles, self.strategy, self.head_bundle_is_empty) == (
            other._bundles, other.strategy, other.head_bundle_is_empty)

    def __hash__(self) -> int:
        return hash((repr(self._bundles), self.strategy, self.head_bundle_is_empty))

    def __repr__(self) -> str:
        return f"PlacementGroupFactory(bundles={self.bundles!r}, strategy={self.strategy!r})"


def placement_group_factory(resources: Mapping[str, float] | None) -> PlacementGroupFactory | None:
    """Ray's ``Trial.placement_group_factory`` of a trial given ``resources`` (audition's dict), as
    ``get_trial_resources()`` builds it in the trial; None where the trial's resources are not known."""
    return None if resources is None else PlacementGroupFactory.from_resources(resources)


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
        from actors._driver.config import check_resources

        value = self.fn(config)
        if value is None and self.none_is_default:
            return {"cpu": 1.0}
        return check_resources(value, self.where) or {"cpu": 1.0}  # ({}: Ray's default, one CPU)


class SameResources:
    """The experiment's one resources dict, as a ``ResourcesOf`` gives each trial its own: what trials without
    resources of their own get once some trials have theirs (``run(resume=..., resources_per_trial=...)``)."""

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


__all__ = ["PlacementGroupFactory", "ResourcesOf", "SameResources", "placement_group_factory",
           "resources_from_class"]
