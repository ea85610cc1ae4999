"""Shared plumbing of the metric-driven schedulers: mode parsing, result
validation, scoring and save/restore.

Pure logic: nothing here touches the actor runtime.
"""

from __future__ import annotations

import copy
import math
import random
from enum import StrEnum
from numbers import Real
from typing import Any, ClassVar

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import FIFOScheduler, SchedulerController


class Mode(StrEnum):
    """Whether the metric is minimised or maximised (a ``str`` so ``Mode.MIN == "min"``)."""

    MIN = "min"
    MAX = "max"


def parse_mode(value: Any, owner: str, *, allow_none: bool = True) -> Mode | None:
    """Turn ``"min"``/``"max"`` (or a :class:`Mode`) into a :class:`Mode`, naming ``owner`` on error."""
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{owner}: mode is required; pass mode='min' or mode='max'")
    if isinstance(value, Mode):
        return value
    if isinstance(value, str) and value in ("min", "max"):
        return Mode(value)
    raise ValueError(f"{owner}: mode must be 'min' or 'max', got {value!r}")


def check_number(owner: str, name: str, value: Any, *, minimum: float | None = None,
                 strict: bool = False, integer: bool = False) -> Any:
    """Return ``value`` if it is a real number within bounds, else raise naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")
    f = float(value)
    if integer and not f.is_integer():
        raise ValueError(f"{owner}: {name} must be a whole number, got {value!r}")
    if minimum is not None and (f <= minimum if strict else f < minimum):
        relation = ">" if strict else ">="
        raise ValueError(f"{owner}: {name} must be {relation} {minimum}, got {value!r}")
    if integer:
        return int(f)
    return value if isinstance(value, int | float) else f


class MissingResultKeyError(KeyError):
    """A result lacks a key a scheduler or stopper needs (message names it and the keys present)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def lookup(result: dict[str, Any], key: str, owner: str) -> Any:
    """``result[key]``, or a clear error naming the key and the keys that are present."""
    if key not in result:
        raise MissingResultKeyError(
            f"{owner}: the result has no {key!r} entry (keys present: {sorted(result)}); "
            f"report {key!r} from the trainable or configure the scheduler with a key it reports"
        )
    return result[key]


def signed(value: Any, mode: Mode, owner: str, key: str, *, keep_nan: bool = False) -> float:
    """Map a metric value to a score where higher is better; NaN becomes the worst score
    unless ``keep_nan`` (Ray's ASHA and PBT keep NaN and let it lose no comparison)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{owner}: metric {key!r} must be a number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) and not keep_nan:
        return -math.inf
    return v if mode is Mode.MAX else -v


def choose_pending_then_paused(tune_controller: SchedulerController) -> TrialSnapshot | None:
    """FIFO choice: the first PENDING trial, else the first PAUSED one."""
    trials = tune_controller.get_trials()
    for status in (TrialStatus.PENDING, TrialStatus.PAUSED):
        for t in trials:
            if t.status is status:
                return t
    return None


class MetricScheduler(FIFOScheduler):
    """Base of the schedulers that rank trials on ``metric``.

    Subclasses list their constructor parameters in ``_PARAMS`` (checked on
    restore so a state is never loaded into a differently-shaped scheduler) and
    their evolving attributes in ``_STATE`` (deep-copied by :meth:`save`; an instance may save
    fewer, see :meth:`_state_keys`).
    """

    tolerates_batching = False
    _PARAMS: ClassVar[tuple[str, ...]] = ()
    _STATE: ClassVar[tuple[str, ...]] = ()
    _STATE_DEFAULTS: ClassVar[dict[str, Any]] = {}  # a _STATE key's value when a state saved before it lacks it

    def __init__(self, metric: str | None, mode: str | None) -> None:
        name = type(self).__name__
        if metric is not None and not isinstance(metric, str):
            raise TypeError(f"{name}: metric must be a string naming a reported result key, got {metric!r}")
        self.metric = metric
        self.mode = parse_mode(mode, name)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Fill metric/mode from the experiment when they were not given here (``**spec``: as the base's)."""
        parsed = parse_mode(mode, type(self).__name__)
        if self.metric is None and metric is not None:
            self.metric = metric
        if self.mode is None and parsed is not None:
            self.mode = parsed
        return True

    def _objective(self) -> tuple[str, Mode]:
        """The metric and mode, or a clear error when neither place set them."""
        name = type(self).__name__
        if self.metric is None or self.mode is None:
            missing = " and ".join(p for p, v in (("metric", self.metric), ("mode", self.mode)) if v is None)
            raise ValueError(
                f"{name}: {missing} not set; pass metric=/mode= to {name}(...) or to TuneConfig(...)"
            )
        mode = parse_mode(self.mode, name, allow_none=False)
        assert mode is not None
        return self.metric, mode

    def _score(self, result: dict[str, Any], *, keep_nan: bool = False) -> float:
        metric, mode = self._objective()
        return signed(lookup(result, metric, type(self).__name__), mode, type(self).__name__, metric,
                      keep_nan=keep_nan)

    def _missing(self, result: dict[str, Any]) -> bool:
        """The result lacks the metric or ``time_attr`` (``skip_missing``: Ray passes it over)."""
        return self._objective()[0] not in result or getattr(self, "time_attr", "") not in result

    def _time(self, result: dict[str, Any], time_attr: str) -> float:
        value = lookup(result, time_attr, type(self).__name__)
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(
                f"{type(self).__name__}: time_attr {time_attr!r} must be a number, got {value!r}"
            )
        return float(value)

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        return Decision.CONTINUE

    def save(self) -> dict[str, Any]:
        """Constructor parameters (for a consistency check) plus a deep copy of the evolving state."""
        return self._saved(_deep_copy_state({s: getattr(self, s) for s in self._state_keys()}))

    def _save_to_pickle(self) -> dict[str, Any]:
        """``save()`` without the copy, for a caller that pickles the answer before the scheduler
        runs again (the scheduler host, at every state write): pickling copies anyway."""
        if type(self).save is not MetricScheduler.save:  # a subclass's own save() decides what is saved
            return self.save()
        return self._saved({s: getattr(self, s) for s in self._state_keys()})

    def _state_keys(self) -> tuple[str, ...]:
        """The ``_STATE`` attributes this instance saves: a subclass drops one its options leave
        unused (it is saved at every state write, about once a second)."""
        return self._STATE

    def _saved(self, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "scheduler": type(self).__name__,
            "params": {p: getattr(self, p) for p in self._PARAMS},
            "metric": self.metric,
            "mode": None if self.mode is None else Mode(self.mode).value,
            "state": state,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load a :meth:`save` result into a scheduler built with the same arguments."""
        name = type(self).__name__
        if not isinstance(state, dict) or "state" not in state or "params" not in state:
            raise ValueError(
                f"{name}.restore: expected the dict returned by {name}.save(), got {str(state)[:200]}"
            )
        # a class renamed since the state was written answers to its former names (its own, not a subclass's)
        saved_by = state.get("scheduler")
        if saved_by != name and saved_by not in type(self).__dict__.get("_FORMER_NAMES", ()):
            raise ValueError(f"{name}.restore: the state was saved by {state.get('scheduler')!r}, not {name}")
        for p, saved in state["params"].items():
            if p in self._PARAMS and getattr(self, p) != saved:
                raise ValueError(
                    f"{name}.restore: {p}={getattr(self, p)!r} here but {saved!r} in the saved state; "
                    f"rebuild the scheduler with the arguments of the original experiment"
                )
        if state.get("metric") is not None:
            self.metric = state["metric"]
        if state.get("mode") is not None:
            self.mode = parse_mode(state["mode"], name)
        saved = {**self._STATE_DEFAULTS, **state["state"]}  # (a key added later has a default for older states)
        missing = sorted(set(self._state_keys()) - set(saved))
        if missing:  # e.g. HyperBand's state before it made Ray Tune 2.60's decisions (2026-12-03)
            raise ValueError(
                f"{name}.restore: the saved state has no {', '.join(missing)}: it was saved by an older audition "
                f"whose {name} kept its state differently; finish that experiment with the audition version "
                "that started it, or start it anew"
            )
        for s, value in copy.deepcopy(saved).items():
            setattr(self, s, value)


def _deep_copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """``copy.deepcopy(state)``, with a ``random.Random`` copied through its state tuple: deepcopy
    walks its 625 numbers one by one (and seeds a throwaway generator from the OS first)."""
    memo: dict[int, Any] = {}
    for value in state.values():
        if type(value) is random.Random:
            clone = random.Random.__new__(random.Random)
            clone.setstate(value.getstate())
            memo[id(value)] = clone
    return copy.deepcopy(state, memo)


__all__ = [
    "MetricScheduler",
    "MissingResultKeyError",
    "Mode",
    "check_number",
    "choose_pending_then_paused",
    "lookup",
    "parse_mode",
    "signed",
]
