"""Ray Tune's ``PlacementGroupFactory``: a trial's resources as Ray describes them.

audition places a trial by one dict of resources (``with_resources(train, {"cpu": 2})``, or each
trial's own from a function of its config) and has no placement groups; Ray 2.60 answers
``get_trial_resources()`` / ``Trainable.trial_resources`` and ``Trial.placement_group_factory`` with a
``PlacementGroupFactory`` of one bundle made from that dict. This is that object, with the attributes ports
read (``required_resources``, ``bundles``, ``head_cpus``, ``strategy``), so code such as
``torch.set_num_threads(int(r.head_cpus))`` runs unchanged. Pure: the scheduler actor builds them too (a
``ResourceChangingScheduler``'s allocation function). Nothing here schedules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from actors._engine.errors import ConfigError

# audition's spelling -> Ray's bundle key (other resource names are kept as they are, as Ray does)
_RAY_KEY = {"cpu": "CPU", "gpu": "GPU"}


def ray_named(resources: Mapping[str, float]) -> dict[str, float]:
    """audition's resource names as Ray's (``cpu`` -> ``CPU``, ``gpu`` -> ``GPU``; others as they are)."""
    return {_RAY_KEY.get(k, k): v for k, v in resources.items()}


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
        return cls([ray_named(resources or {"cpu": 1.0})])

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


def check_resources(resources: Any, where: str) -> dict[str, float]:
    """Per-trial resources as ``{"cpu": n, ...}`` (Ray's "CPU"/"GPU" spellings accepted).

    A trial that asks for no CPU, or a negative amount, could never be placed and the
    experiment would wait on "PENDING" forever: refused here instead.
    """
    if isinstance(resources, PlacementGroupFactory):  # Ray's form: one bundle is one trial's dict
        resources = resources.as_resources()
    if not isinstance(resources, Mapping):
        raise ConfigError(f"{where}: resources must be a dict such as {{'cpu': 2, 'gpu': 1}}, "
                          f"got {type(resources).__name__}")
    out: dict[str, float] = {}
    for key, value in resources.items():
        name = key.lower() if key in ("CPU", "GPU") else key
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: resource names must be non-empty strings such as 'cpu', got {key!r}")
        if name in out:
            raise ConfigError(f"{where}: {name!r} is given twice ({sorted(resources)}); give it once")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < 0:
            raise ConfigError(f"{where}: the amount of {key!r} must be a finite number >= 0, got {value!r}")
        out[name] = float(value)
    if out.get("cpu", 1.0) <= 0:
        raise ConfigError(f"{where}: {{'cpu': {resources.get('cpu', resources.get('CPU'))!r}}} would never be "
                          "scheduled (every trial runs in a process that needs some CPU); ask for a fraction "
                          "such as {'cpu': 0.5} to run several trials per core")
    if out and not any(out.values()):  # (it used to wait on PENDING forever: no member offers "nothing")
        raise ConfigError(f"{where}: {dict(resources)!r} asks for no resources at all, so no trial could be placed "
                          "(Ray 2.60 refuses it too: a placement group with an empty bundle); ask for some, such as "
                          "{'cpu': 1, 'gpu': 1}, or give no resources for one CPU a trial")
    return out


def summed_resources(value: Any, where: str) -> dict[str, float]:
    """A trial's new size in audition's form (``{"cpu": 2.0, "gpu": 1.0}``): from a ``PlacementGroupFactory``
    (every bundle summed: a trial is one process on one machine, so its bundles are placed together) or a dict
    in Ray's or audition's names, checked as ``check_resources`` checks one; zero amounts dropped. A size with
    no CPU is refused too (no trial process runs on none)."""
    out = {k: v for k, v in check_resources(value.required_resources if isinstance(value, PlacementGroupFactory)
                                            else value, where).items() if v}
    if out.get("cpu", 0.0) <= 0:
        raise ConfigError(f"{where}: {out!r} gives the trial no CPU; its process needs some (e.g. 0.5)")
    return out


__all__ = ["PlacementGroupFactory", "check_resources", "ray_named", "summed_resources"]
