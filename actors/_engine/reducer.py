"""The per-trial decision reducer.

Decisions from every source (a scheduler's return value, ``pause_trial`` /
``stop_trial`` calls made inside any scheduler hook, stop criteria) are merged
into one pending slot per trial.  Merging is ``max`` over an ordered lattice,
so the result does not depend on arrival order: a late NOOP can never erase an
earlier PAUSE (the Ray Tune hang), and STOP is never downgraded to PAUSE.

This module is pure: it imports nothing from the actor runtime.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class Decision(IntEnum):
    """What should happen to a trial after its latest result.

    Ordered so that merging is ``max``: STOP > PAUSE > CONTINUE (== NOOP).
    """

    CONTINUE = 0
    NOOP = 0  # alias of CONTINUE: "nothing to change"
    PAUSE = 1
    STOP = 2

    # Ray Tune's constants are the strings "CONTINUE", "PAUSE", "STOP", "NOOP": a plugin ported from Ray may compare
    # a decision with one (`if decision == "STOP"`) or print it, and must see what it saw there (NOOP is CONTINUE).
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return _RAY_NAMES.get(other) is self
        return int.__eq__(self, other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = int.__hash__

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return repr(self.name)


# Ray Tune's ``TrialScheduler`` constants are these strings: a plugin written for Ray may return them
_RAY_NAMES = {"CONTINUE": Decision.CONTINUE, "NOOP": Decision.NOOP, "PAUSE": Decision.PAUSE, "STOP": Decision.STOP}


def as_decision(value: object) -> Decision:
    """A hook's return value as a Decision: a ``Decision``, Ray Tune's ``"CONTINUE"``/``"PAUSE"``/
    ``"STOP"``/``"NOOP"``, or None (CONTINUE). Anything else is a plugin bug, named in the error."""
    if value is None:
        return Decision.CONTINUE
    if isinstance(value, Decision):
        return value
    if isinstance(value, str) and value in _RAY_NAMES:
        return _RAY_NAMES[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1, 2):
        return Decision(value)
    raise TypeError(f"on_trial_result must return Decision.CONTINUE, PAUSE, STOP or NOOP (or Ray Tune's "
                    f"TrialScheduler.CONTINUE, ... strings), got {value!r}")


def merge(a: Decision, b: Decision) -> Decision:
    """Merge two decisions: the stronger one wins (commutative, associative, idempotent)."""
    return a if a >= b else b


def reduce_decisions(decisions: Iterable[Decision], start: Decision = Decision.CONTINUE) -> Decision:
    """Fold any number of decisions into one, starting from ``start`` (the pending slot)."""
    out = start
    for d in decisions:
        out = merge(out, Decision(d))
    return out


__all__ = ["Decision", "as_decision", "merge", "reduce_decisions"]
