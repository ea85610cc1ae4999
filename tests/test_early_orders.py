"""``EarlyOrders``: a trial actor's orders that overtook the ``RunTrial`` of their run (Thespian's TCP transport
does not keep the order of two messages between the same actors) are carried out when that run starts; orders
of a run that started before are dropped. The pure object, an actor model over random arrival orders, and the
simulator's trial."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors._engine.early import EarlyOrders
from actors.messages import EndReason, RunTrial, TrialEnded, TrialResults, TrialStop
from actors.testing import SimTrial


@dataclass(frozen=True)
class Order:
    trial_id: str
    run_id: int
    n: int  # which order of its run (the controller sends them in this order)


def test_an_order_for_a_run_not_started_waits_for_it_and_a_stale_one_is_dropped() -> None:
    early: EarlyOrders[Order] = EarlyOrders()
    assert early.keep(Order("a", 1, 0)) and early.keep(Order("b", 1, 0)) and early.waiting == 2
    assert early.started("a", 1) == [Order("a", 1, 0)] and early.waiting == 1
    assert not early.keep(Order("a", 1, 1))  # run 1 of "a" started here: late, dropped
    assert early.keep(Order("a", 3, 0))
    assert early.started("a", 2) == [] and early.waiting == 2  # (run 3's still waits)
    assert early.started("b", 1) == [Order("b", 1, 0)]
    assert early.started("a", 3) == [Order("a", 3, 0)] and early.waiting == 0


def test_orders_kept_for_a_run_that_never_starts_here_go_when_a_later_one_does() -> None:
    early: EarlyOrders[Order] = EarlyOrders()
    early.keep(Order("a", 1, 0))
    assert early.started("a", 2) == [] and early.waiting == 0


@st.composite
def _arrivals(draw: Any) -> tuple[list[tuple[str, int]], list[Any]]:
    """Runs started one after another on one actor (each trial's runs numbered up), and what the actor
    receives: each run's RunTrial and its orders, an order maybe before its RunTrial but never before the
    previous run's start (the controller starts a run only after hearing the previous one end), and late
    copies of the previous run's orders after anything."""
    n_runs = draw(st.integers(1, 6))
    runs: list[tuple[str, int]] = []
    last: dict[str, int] = {}
    for _ in range(n_runs):
        t = draw(st.sampled_from(["a", "b", "c"]))
        last[t] = last.get(t, 0) + draw(st.integers(1, 2))
        runs.append((t, last[t]))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    arrivals: list[Any] = []
    for i, (t, r) in enumerate(runs):
        orders = [Order(t, r, k) for k in range(draw(st.integers(0, 3)))]
        batch: list[Any] = [("run", t, r), *orders]
        rng.shuffle(batch)  # the transport reorders the run's messages among themselves
        if i > 0:
            pt, pr = runs[i - 1]
            batch.insert(rng.randint(0, len(batch)), Order(pt, pr, 99))  # a straggler of the previous run
        arrivals += batch
    return runs, arrivals


@settings(max_examples=300, deadline=None)
@given(_arrivals())
def test_every_order_is_carried_out_once_in_its_run_in_arrival_order(case: Any) -> None:
    runs, arrivals = case
    early: EarlyOrders[Order] = EarlyOrders()
    current: tuple[str, int] | None = None
    done: list[tuple[tuple[str, int], Order]] = []  # (the run going on, the order carried out in it)
    for msg in arrivals:
        if isinstance(msg, tuple):  # RunTrial
            current = (msg[1], msg[2])
            done += [(current, o) for o in early.started(*current)]
        elif current == (msg.trial_id, msg.run_id):
            done.append((current, msg))
        else:
            early.keep(msg)
    for run in runs:
        got = [o for r, o in done if (o.trial_id, o.run_id) == run]
        sent = [o for o in arrivals if isinstance(o, Order) and (o.trial_id, o.run_id) == run and o.n != 99]
        assert got == sent or got == [*sent, Order(*run, 99)], (run, got, sent)  # in arrival order, once each
        assert all(r == run for r, o in done if (o.trial_id, o.run_id) == run)  # only while its run is on
    stragglers = [(r, o) for r, o in done if o.n == 99]  # carried out only if they came while their run was on
    assert all(r == (o.trial_id, o.run_id) for r, o in stragglers)
    assert early.waiting == 0  # nothing kept for ever


def test_the_simulated_trial_carries_out_a_stop_that_overtook_its_run() -> None:
    trial = SimTrial(lambda config, i: {"loss": 1.0 / i, "time_this_iter_s": 1.0}, pid=10, max_iterations=50)
    run = RunTrial("t1", 1, {"a": 1}, b"", None, 0, 0.0, 1, "memory://early-orders", {}, "exp", 0)
    assert trial.receive(TrialStop("t1", 1), 0.0) == []
    trial.receive(run, 0.0)
    sent: list[Any] = []
    now = 0.0
    while trial.step_at is not None and not any(isinstance(m, TrialEnded) for m in sent):
        now = trial.step_at
        sent += trial.step_done(now)
    ended = [m for m in sent if isinstance(m, TrialEnded)]
    assert ended and ended[0].reason is EndReason.STOPPED and now <= 1.0, sent
    # (the stop came before the first report, which unwinds without recording anything: Command.STOP)
    assert not [m for m in sent if isinstance(m, TrialResults)]
