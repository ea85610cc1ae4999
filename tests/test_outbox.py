"""``actors._engine.outbox.Outbox``: what a trial actor sends again, checked against a model over random
sequences of sends, acknowledgements and looks (the actor and the simulator's trial run this object)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors._engine.outbox import Outbox

EVERY_S = 5.0
RESENDS = 3


def test_a_message_is_sent_again_once_due_at_most_resends_times_in_number_order() -> None:
    box: Outbox[str] = Outbox(EVERY_S, RESENDS)
    box.sent(2, "b", 1.0)
    box.sent(1, "a", 2.0)  # (numbers, not send times, give the order)
    assert box.due(5.9) == []  # "b" waited 4.9 s
    assert box.due(7.0) == ["a", "b"]
    assert box.due(11.0) == []  # each was sent again at 7.0
    assert box.due(12.0) == ["a", "b"] and box.due(17.0) == ["a", "b"]
    assert not box.may_resend and box.due(100.0) == []
    assert box.numbers() == [1, 2]  # still unacknowledged, but sent as often as it may be


def test_a_proceed_acknowledges_its_batch_and_every_one_before_it() -> None:
    box: Outbox[int] = Outbox(EVERY_S, RESENDS)
    for seq in (1, 2, 3, 4):
        box.sent(seq, seq, 0.0)
    box.acknowledged(3)
    assert box.numbers() == [4] and box.due(5.0) == [4]
    box.acknowledged(9)
    assert len(box) == 0 and not box.may_resend


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="every_s > 0"):
        Outbox(0.0, 3)
    with pytest.raises(ValueError, match="resends >= 0"):
        Outbox(5.0, -1)


_ops = st.lists(st.one_of(
    st.tuples(st.just("send"), st.floats(0.0, 3.0)),  # a new numbered message, after this long
    st.tuples(st.just("ack"), st.integers(0, 40)),  # a proceed for this number
    st.tuples(st.just("look"), st.floats(0.0, 12.0)),  # the periodic look, after this long
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(_ops, st.integers(0, 4))
def test_the_outbox_matches_its_model(ops: list[tuple[str, float]], resends: int) -> None:
    """Every message is sent once and then again at most ``resends`` times; never after it was acknowledged
    (by its number or a later one); again exactly when it waited ``every_s`` since it was last sent; in
    number order."""
    box: Outbox[int] = Outbox(EVERY_S, resends)
    now, seq = 0.0, 0
    model: dict[int, tuple[float, int]] = {}  # seq -> (last sent, times sent again)
    sent_again: dict[int, int] = {}
    for op, arg in ops:
        if op == "send":
            now += arg
            seq += 1
            box.sent(seq, seq, now)
            model[seq] = (now, 0)
        elif op == "ack":
            box.acknowledged(int(arg))
            model = {n: v for n, v in model.items() if n > arg}
        else:
            now += arg
            expected = [n for n in sorted(model) if model[n][1] < resends and now - model[n][0] >= EVERY_S]
            got = box.due(now)
            assert got == expected
            for n in got:
                model[n] = (now, model[n][1] + 1)
                sent_again[n] = sent_again.get(n, 0) + 1
        assert box.numbers() == sorted(model)
        assert box.may_resend == any(again < resends for _, again in model.values())
    assert all(times <= resends for times in sent_again.values())
