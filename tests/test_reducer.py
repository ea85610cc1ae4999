"""The decision lattice: merging is max, whatever the order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actors._engine.reducer import Decision, merge, reduce_decisions

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
