"""``stop={...}`` dictionaries and the normaliser for every form ``stop=`` accepts."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from numbers import Real
from typing import Any

from actors._engine.flat import lookup
from actors.stoppers._base import CombinedStopper, FunctionStopper, Stopper

log = logging.getLogger("audition")

_MISSING = object()


class DictStopper(Stopper):
    """Stops a trial as soon as ``result[key] >= value`` for any ``key: value`` in ``criteria``.

    Every threshold means "reached when the result is at least this", as in Ray
    Tune.  To stop when a metric you minimise gets low enough, pass a function
    instead, e.g. ``stop=lambda trial_id, result: result["loss"] <= 0.1``.
    Nested result values are addressed with ``"a/b"``.  As in Ray Tune, a key
    missing from a result is passed over for that result, with a warning the
    first time (if it is never reported, the trial runs until it ends by itself).
    """

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        if not isinstance(criteria, Mapping):
            raise TypeError(
                f"DictStopper: criteria must be a dict of result key -> threshold, got {criteria!r}"
            )
        for key, value in criteria.items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"DictStopper: criterion keys must be result key names, got {key!r}")
            if not isinstance(value, Real):
                raise TypeError(
                    f"DictStopper: the threshold for {key!r} must be a number, got {type(value).__name__} "
                    f"{value!r}; for other conditions pass a function (trial_id, result) -> bool"
                )
        self.criteria = dict(criteria)
        self._warned: set[str] = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        stop = False
        for key, threshold in self.criteria.items():
            value = lookup(result, key, _MISSING)
            if value is _MISSING:  # Ray's Trial.should_stop: warn and go on
                warned = self.__dict__.setdefault("_warned", set())  # (a stopper pickled before had none)
                if key not in warned:
                    warned.add(key)
                    log.warning("stop criterion %r is not in the result of trial %s (keys present: %s); "
                                "if %r is never reported, the trial runs until it ends by itself",
                                key, trial_id, sorted(result), key)
                continue
            if not isinstance(value, Real):
                raise TypeError(
                    f"stop criterion {key!r}: trial {trial_id} reported {type(value).__name__} {value!r}, "
                    "which cannot be compared with a threshold; report a number"
                )
            stop = stop or value >= threshold
        return stop

    def trial_time_limit(self) -> float | None:
        """``{"time_total_s": T}`` also stops a trial that stopped reporting, T seconds into it."""
        limit = self.criteria.get("time_total_s")
        return float(limit) if limit is not None else None


def make_stopper(
    stop: Mapping[str, Any] | Callable[[str, dict[str, Any]], bool] | Stopper | list[Stopper] | None,
) -> Stopper | None:
    """Normalise the ``stop=`` argument: a dict becomes a :class:`DictStopper`, a function
    a :class:`FunctionStopper`, a list of Stoppers their :class:`CombinedStopper`; a :class:`Stopper`
    is returned as is; ``None``, ``{}`` or ``[]`` mean no stopper."""
    if stop is None:
        return None
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, type):
        raise TypeError(
            f"stop={stop.__name__} is a class; pass an instance, e.g. stop={stop.__name__}(...)"
        )
    if isinstance(stop, Mapping):
        return DictStopper(stop) if stop else None
    if isinstance(stop, list):  # as Ray: a list of Stoppers stops when any of them does
        if not stop:
            return None
        bad = [type(s).__name__ for s in stop if not isinstance(s, Stopper)]
        if bad:
            raise TypeError(f"a list given as stop must hold Stopper instances only (as in Ray Tune); it holds "
                            f"{', '.join(bad)}: combine dict criteria into one dict, or make them Stoppers")
        return CombinedStopper(*stop)
    if callable(stop) and FunctionStopper.is_valid_function(stop):  # (one with stop_all is refused, as Ray)
        return FunctionStopper(stop)
    raise TypeError(
        f"stop must be a dict such as {{'training_iteration': 10}}, a function (trial_id, result) -> bool, "
        f"a Stopper or None; got {type(stop).__name__} {stop!r}"
    )


__all__ = ["DictStopper", "make_stopper"]
