"""The decision lattice: merging is max, whatever the order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors._engine.reducer import Decision, as_decision, merge, reduce_decisions

decisions = st.sampled_from([Decision.CONTINUE, Decision.NOOP, Decision.PAUSE, Decision.STOP])


def test_order() -> None:
    assert Decision.STOP > Decision.PAUSE > Decision.CONTINUE
    assert Decision.NOOP == Decision.CONTINUE


@given(decisions, decisions)
def test_commutative(a: Decision, b: Decision) -> None:
    assert merge(a, b) == merge(b, a)


@given(decisions, decisions, decisions)
def test_associative(a: Decision, b: Decision, c: Decision) -> None:
    assert merge(merge(a, b), c) == merge(a, merge(b, c))


@given(decisions)
def test_idempotent(a: Decision) -> None:
    assert merge(a, a) == a


@given(st.lists(decisions))
def test_reduce_is_max_and_never_downgrades(seq: list[Decision]) -> None:
    slot = Decision.CONTINUE
    for d in seq:
        new = merge(slot, d)
        assert new >= slot  # a lower decision never replaces a higher one
        slot = new
    assert slot == max(seq, default=Decision.CONTINUE)
    assert reduce_decisions(seq) == slot


def test_the_ray_hang_sequence() -> None:
    """pause_trial() during on_trial_result, then the hook returns NOOP: PAUSE must survive."""
    assert reduce_decisions([Decision.PAUSE, Decision.NOOP]) is Decision.PAUSE
    assert reduce_decisions([Decision.STOP, Decision.PAUSE, Decision.NOOP]) is Decision.STOP


def test_a_hooks_return_value_is_a_decision_a_ray_name_or_none_and_nothing_else() -> None:
    """What a plugin's ``on_trial_result`` may return: a Decision, Ray's strings, None (CONTINUE), or the plain ints
    of the decisions (0, 1, 2); a bool or any other value is a plugin bug, named, never a silent PAUSE."""
    assert [as_decision(v) for v in (None, Decision.STOP, "PAUSE", "NOOP", 0, 1, 2)] == [
        Decision.CONTINUE, Decision.STOP, Decision.PAUSE, Decision.CONTINUE, Decision.CONTINUE, Decision.PAUSE,
        Decision.STOP]
    for bad in (True, False, 3, -1, "pause", 1.0):
        with pytest.raises(TypeError, match="on_trial_result must return"):
            as_decision(bad)
