"""The stopper contract and the stoppers that combine or wrap others.

A stopper is consulted by the controller after every result: ``__call__``
says whether that trial should stop, ``stop_all`` whether the whole experiment
should.  Stoppers are pure and must be quick; their state is saved with the
experiment through :meth:`Stopper.save` / :meth:`Stopper.restore`, which must
stay picklable with the standard ``pickle`` (no functions inside).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any


class Stopper(ABC):
    """Base class of stoppers (Ray Tune's ``Stopper`` interface)."""

    @abstractmethod
    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """True if ``trial_id`` should stop after ``result``."""

    def stop_all(self) -> bool:
        """True if the whole experiment should stop (checked after every result, and about once
        a second without results: a time budget ends trials that never report)."""
        return False

    def trial_time_limit(self) -> float | None:
        """Seconds of ``time_total_s`` after which every trial stops, reporting or not (the
        controller checks it on its own clock); None: no such limit."""
        return None

    def save(self) -> dict[str, Any]:
        """Picklable state for experiment resume; stateless stoppers return ``{}``."""
        return {}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what :meth:`save` returned."""
        if not isinstance(state, dict):
            raise TypeError(
                f"{type(self).__name__}.restore: expected the dict returned by save(), "
                f"got {type(state).__name__}"
            )


class NoopStopper(Stopper):
    """Never stops anything (Ray Tune's ``NoopStopper``, the same as giving no ``stop=``)."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False


class CombinedStopper(Stopper):
    """Stops a trial (or the experiment) when any of ``stoppers`` says so.

    Asked in order, as Ray's ``any(...)`` asks them: once one says stop, the ones
    after it do not see that result (recorded from Ray 2.60: a plateau stopper
    after ``MaximumIterationStopper`` misses each trial's last result, which
    changes when it finds a plateau).
    """

    def __init__(self, *stoppers: Stopper) -> None:
        for i, s in enumerate(stoppers):
            if not isinstance(s, Stopper):
                raise TypeError(
                    f"CombinedStopper: argument {i} is {type(s).__name__}, not a Stopper; wrap dicts with "
                    "DictStopper(...) and functions with FunctionStopper(...)"
                )
        self.stoppers = tuple(stoppers)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return any(s(trial_id, result) for s in self.stoppers)

    def stop_all(self) -> bool:
        return any(s.stop_all() for s in self.stoppers)

    def trial_time_limit(self) -> float | None:
        limits = [x for x in (s.trial_time_limit() for s in self.stoppers) if x is not None]
        return min(limits) if limits else None

    def save(self) -> dict[str, Any]:
        return {"stoppers": [s.save() for s in self.stoppers]}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        saved = state.get("stoppers", [])
        if len(saved) != len(self.stoppers):
            raise ValueError(
                f"CombinedStopper.restore: the state holds {len(saved)} stoppers but this one has "
                f"{len(self.stoppers)}; rebuild it with the stoppers of the original experiment"
            )
        for s, st in zip(self.stoppers, saved, strict=True):
            s.restore(st)


def _accepts_two_args(fn: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True  # builtins without a signature: trust the caller
    try:
        sig.bind("trial_id", {})
    except TypeError:
        return False
    return True


class FunctionStopper(Stopper):
    """Wraps ``fn(trial_id, result) -> bool``; never stops the whole experiment."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:  # (Ray's parameter name)
        fn = function
        if not callable(fn):
            raise TypeError(f"FunctionStopper: expected a function (trial_id, result) -> bool, got {fn!r}")
        if not _accepts_two_args(fn):
            raise TypeError(
                f"FunctionStopper: {getattr(fn, '__name__', fn)!s} must accept two arguments "
                "(trial_id, result), e.g. lambda trial_id, result: result['loss'] < 0.1"
            )
        self.fn = fn

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.fn(trial_id, result))

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        """Ray's check of a ``stop=`` value: a plain function (not a ``Stopper``); a callable with a
        ``stop_all`` that is not a ``Stopper`` is refused, as Ray refuses it."""
        ok = callable(fn) and not isinstance(fn, Stopper)
        if ok and hasattr(fn, "stop_all"):
            raise ValueError(f"{type(fn).__name__} has stop_all but is not an actors.Stopper subclass; subclass "
                             "actors.Stopper so that stop_all is called")
        return ok


__all__ = ["CombinedStopper", "FunctionStopper", "Stopper"]
