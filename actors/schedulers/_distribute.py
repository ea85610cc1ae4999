"""How a ``ResourceChangingScheduler`` sizes a trial: Ray 2.60's ``DistributeResources`` and
``DistributeResourcesToTopJob``, the same arithmetic (checked against Ray's on 900 recorded cases,
``tests/test_resource_changing.py``).

A trial's resources are a list of bundles (``{"CPU": n, "GPU": m}``). With ``add_bundles=False`` (the default)
a trial has one bundle that grows and shrinks by ``increase_by``; with ``add_bundles=True`` bundles of
``increase_by`` are added and removed (audition then runs the trial with their sum: one process on one
machine). Every call works from the trial's base resources (the first trial's), the cluster's CPUs and GPUs
less ``reserve_resources``, and what the live trials hold now. Pure: it runs in the scheduler actor, inside
``on_trial_result``, and reads the cluster only through ``tune_controller``.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from actors._engine.resource_request import PlacementGroupFactory
from actors._engine.trial import TrialSnapshot

Bundles = list[dict[str, float]]


def _cpu(b: dict[str, float]) -> float:
    return b.get("CPU", 0)


def _gpu(b: dict[str, float]) -> float:
    return b.get("GPU", 0)


def _summed(bundles: Bundles) -> dict[str, float]:
    if not bundles:
        return {"CPU": 0, "GPU": 0}
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
    return out


class DistributeResources:
    """Ray's ``DistributeResources``: share the cluster's free CPUs (or GPUs) evenly among the live trials,
    never below a trial's base resources. Called as ``fn(tune_controller, trial, result, scheduler)``; returns
    the trial's new ``PlacementGroupFactory``, or None to leave it as it is (before its first iteration)."""

    def __init__(self, add_bundles: bool = False, increase_by: dict[str, float] | None = None,
                 increase_by_times: int = -1, reserve_resources: dict[str, float] | None = None) -> None:
        self.add_bundles = add_bundles
        self.increase_by = increase_by or {}
        self.increase_by_times = increase_by_times
        self.reserve_resources = reserve_resources or {}

    # ------------------------------------------------------------------ bundle arithmetic
    def _empty(self, b: dict[str, float]) -> bool:
        return not (_cpu(b) or _gpu(b))

    def _joined(self, first: Bundles, second: Bundles, unit: dict[str, float], capped: bool,
                cap_times: int = -1) -> Bundles:
        """``first`` and ``second`` together; ``capped``: at most ``increase_by_times`` (and ``cap_times``) units."""
        if capped:
            if cap_times > 0 and self.increase_by_times > 0:
                cap_times = min(cap_times, self.increase_by_times)
            elif self.increase_by_times > 0:
                cap_times = self.increase_by_times
        if self.add_bundles:
            out = [b for b in first if not self._empty(b)] + [b for b in second if not self._empty(b)]
            return out[:cap_times] if cap_times > 0 else out
        a, b = (first or [{}])[0], (second or [{}])[0]
        one = {"CPU": _cpu(a) + _cpu(b), "GPU": _gpu(a) + _gpu(b)}
        if cap_times > 0:
            one = {"CPU": min(one["CPU"], unit.get("CPU", 0) * cap_times),
                   "GPU": min(one["GPU"], unit.get("GPU", 0) * cap_times)}
        return [one]

    def _units_in(self, unit: dict[str, float], cpus: float = 0, gpus: float = 0, most: int = -1) -> int:
        """How many ``unit``s fit in ``cpus`` and ``gpus`` (negative when they are negative), at most ``most``."""
        if unit.get("CPU", 0) and unit.get("GPU", 0):
            n = min(cpus // unit["CPU"], gpus // unit["GPU"])
        elif unit.get("GPU", 0):
            n = gpus // unit["GPU"]
        else:
            n = cpus // unit.get("CPU", 0)
        if most > 0 and n > 0:
            n = min(most, n)
        return int(n)

    def _less(self, bundles: Bundles, unit: dict[str, float], n: int) -> Bundles:
        n = abs(n)
        if self.add_bundles:
            return bundles[:-n]
        out = copy.deepcopy(bundles)
        out[0]["CPU"] = max(out[0]["CPU"] - unit.get("CPU", 0) * n, 0)
        out[0]["GPU"] = max(out[0]["GPU"] - unit.get("GPU", 0) * n, 0)
        return out

    def _units(self, unit: dict[str, float], n: int) -> Bundles:
        n = abs(n)
        if self.add_bundles:
            return [unit] * n
        return [{"CPU": unit.get("CPU", 0) * n, "GPU": unit.get("GPU", 0) * n}]

    def _resized(self, bundles: Bundles, unit: dict[str, float], free_cpus: float, free_gpus: float, *,
                 most: int = -1, cap_times: int = -1) -> Bundles:
        """``bundles`` grown by the units the free resources hold, or shrunk by those they lack."""
        n = self._units_in(unit, free_cpus, free_gpus, most)
        if n < 0:
            return self._less(bundles, unit, n)
        if n > 0:
            return self._joined(bundles, self._units(unit, n), unit, True, cap_times)
        return bundles

    def _added(self, bundles: Bundles, base: Bundles) -> Bundles:
        """What ``bundles`` hold beyond ``base``."""
        if self.add_bundles:
            return bundles[len(base):]
        b, s = (bundles or [{"CPU": 0, "GPU": 0}])[0], (base or [{"CPU": 0, "GPU": 0}])[0]
        return [{"CPU": _cpu(b) - _cpu(s), "GPU": _gpu(b) - _gpu(s)}]

    def _below_limit(self, bundles: Bundles, base: Bundles | None = None) -> bool:
        """Whether a trial holding ``bundles`` may still grow (``increase_by_times`` of ``increase_by``)."""
        times = self.increase_by_times
        most_cpus = self.increase_by.get("CPU", 0) * times if times > 0 else math.inf
        most_gpus = self.increase_by.get("GPU", 0) * times if times > 0 else math.inf
        added = _summed(self._added(bundles, base) if base else bundles)
        return added.get("CPU", -math.inf) < most_cpus or added.get("GPU", -math.inf) < most_gpus

    # ------------------------------------------------------------------ the share
    def _share(self, trial: TrialSnapshot, live: list[TrialSnapshot], base: Bundles, unit: dict[str, float],
               total_cpus: float, total_gpus: float, used_cpus: float, used_gpus: float) -> Bundles:
        """What ``trial`` gets beyond ``base``: one unit at a time round the live trials, as far as the
        cluster goes, sets how many units the first may have; the trial then grows towards that many by what
        is free (or shrinks by what is over-used)."""
        shares: list[Bundles] = [[] for _ in live]
        base_total = _summed(base)
        cpus_left = total_cpus - base_total.get("CPU", 0) * len(live)
        gpus_left = total_gpus - base_total.get("GPU", 0) * len(live)
        first_units, i, full = 0, 0, set[int]()
        while len(full) < len(live) and cpus_left >= unit.get("CPU", 0) and gpus_left >= unit.get("GPU", 0):
            k = i % len(shares)
            before = copy.deepcopy(shares[k])
            shares[k] = self._resized(shares[k], unit, cpus_left, gpus_left, most=1)
            got = _summed(self._added(shares[k], before))
            if not got.get("CPU", 0) and not got.get("GPU", 0):
                full.add(k)
            elif k == 0:
                first_units += 1
            cpus_left -= got.get("CPU", 0)
            gpus_left -= got.get("GPU", 0)
            i += 1
        own = _current(trial).bundles
        return self._resized(self._added(own, base), unit, total_cpus - used_cpus, total_gpus - used_gpus,
                             cap_times=first_units)

    # ------------------------------------------------------------------ the call
    def __call__(self, tune_controller: Any, trial: TrialSnapshot, result: dict[str, Any],
                 scheduler: Any) -> PlacementGroupFactory | None:
        base_pgf = scheduler.base_trial_resources
        if not isinstance(base_pgf, PlacementGroupFactory):
            raise ValueError(f"{type(self).__name__} only supports PlacementGroupFactories.")
        if not self.add_bundles and len(base_pgf.bundles) > 1:
            raise ValueError("If `add_bundles` is False, the number of bundles in `resources_per_trial` must be 1 "
                             f"(got {len(base_pgf.bundles)}).")
        if result["training_iteration"] < 1:
            return None
        if self.increase_by:
            unit = self.increase_by
            if self._empty(unit) or unit.get("CPU", 0) < 0 or unit.get("GPU", 0) < 0:
                raise ValueError(f"{type(self).__name__}(increase_by={unit!r}): give a positive CPU or GPU amount")
        elif self.add_bundles:
            unit = base_pgf.bundles[-1]
        elif _gpu(base_pgf.bundles[0]):
            unit = {"GPU": 1}
        else:
            unit = {"CPU": 1}
        base = copy.deepcopy(base_pgf.bundles)
        counts = tune_controller._resource_updater
        total_cpus = counts.get_num_cpus() - self.reserve_resources.get("CPU", 0)
        total_gpus = counts.get_num_gpus() - self.reserve_resources.get("GPU", 0)
        live = list(tune_controller.get_live_trials())
        used = [_current(t).required_resources for t in live]
        used_cpus, used_gpus = sum(u.get("CPU", 0) for u in used), sum(u.get("GPU", 0) for u in used)
        share = self._share(trial, live, base, unit, total_cpus, total_gpus, used_cpus, used_gpus)
        return PlacementGroupFactory(self._joined(base, share, unit, False), strategy=base_pgf.strategy)


class DistributeResourcesToTopJob(DistributeResources):
    """Ray's ``DistributeResourcesToTopJob``: the free resources go to the best trial by ``metric`` and ``mode``
    (the scheduler's when not given); the others keep what they have (giving back what is over-used)."""

    def __init__(self, add_bundles: bool = False, increase_by: dict[str, float] | None = None,
                 increase_by_times: int = -1, reserve_resources: dict[str, float] | None = None,
                 metric: str | None = None, mode: str | None = None) -> None:
        super().__init__(add_bundles, increase_by, increase_by_times, reserve_resources)
        self.metric = metric
        self.mode = mode

    @property
    def _metric_op(self) -> float:
        if self.mode not in ("min", "max"):
            raise ValueError("The mode parameter can only be either min or max.")
        return 1.0 if self.mode == "max" else -1.0

    def _share(self, trial: TrialSnapshot, live: list[TrialSnapshot], base: Bundles, unit: dict[str, float],
               total_cpus: float, total_gpus: float, used_cpus: float, used_gpus: float) -> Bundles:
        if self.metric is None:
            raise ValueError("The metric parameter cannot be None. The parameter can be set in either "
                             "`DistributeResourcesToTopJob`, the base scheduler or in `tune.TuneConfig()` "
                             "(highest to lowest priority).")
        free_cpus, free_gpus = total_cpus - used_cpus, total_gpus - used_gpus
        op, metric = self._metric_op, self.metric
        ranked = sorted(live, key=lambda t: -op * t.last_result.get(metric, math.inf))
        added = self._added(_current(trial).bundles, base)
        best = next((t for t in ranked if self._below_limit(_current(t).bundles, base)), ranked[0])
        if trial.trial_id != best.trial_id and self._units_in(unit, free_cpus, free_gpus) >= 0:
            return added
        return self._resized(added, unit, free_cpus, free_gpus)


def _current(trial: TrialSnapshot) -> PlacementGroupFactory:
    """The trial's resources now (one CPU where they are not known, as Ray's default request)."""
    return trial.placement_group_factory or PlacementGroupFactory([{"CPU": 1}])


__all__ = ["DistributeResources", "DistributeResourcesToTopJob"]
