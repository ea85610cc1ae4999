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


def merge(a: Decision, b: Decision) -> Decision:
    """Merge two decisions: the stronger one wins (commutative, associative, idempotent)."""
    return a if a >= b else b


def reduce_decisions(decisions: Iterable[Decision], start: Decision = Decision.CONTINUE) -> Decision:
    """Fold any number of decisions into one, starting from ``start`` (the pending slot)."""
    out = start
    for d in decisions:
        out = merge(out, Decision(d))
    return out


__all__ = ["Decision", "merge", "reduce_decisions"]
