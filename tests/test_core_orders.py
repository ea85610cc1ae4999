"""``TrialOrders`` (actors/_engine/orders.py) alone: the messages a table effect turns into, the pace chosen
when the scheduler is ready, and whether a freed actor is parked or retired. No core."""

from __future__ import annotations

from typing import Any

from actors._engine.effects import Effect, EffectKind
from actors._engine.lifecycle import TrialTable
from actors._engine.members import Membership
from actors._engine.orders import TrialOrders
from actors._engine.pool import ActorPool
from actors._engine.signals import ActorKind, Retire, Send, Spawn
from actors._engine.watch import Watchdog
from actors.messages import SchedulerReady, TrialHold, TrialProceed, TrialStop
from tests._core_harness import make_spec


def _orders(keep_idle: int = 1, **over: Any) -> TrialOrders:
    spec = make_spec(num_samples=2, max_concurrent=2, **over)
    return TrialOrders(spec, TrialTable(), ActorPool(keep_idle=keep_idle), Membership(spec), Watchdog(10.0))


def _started(o: TrialOrders, trial_id: str) -> int:
    o.table.add(trial_id, {"x": 1})
    o.table.start(trial_id)
    spawn, handle = o.place(o.table.get(trial_id), "local")
    assert spawn == Spawn(handle, ActorKind.TRIAL, None)
    return handle


def test_pace_batches_only_when_the_scheduler_allows_it_and_the_core_need_not_decide() -> None:
    o = _orders(batch_window=64)
    o.pace(SchedulerReady(name="s", batching_allowed=True))
    assert (o.window, o.horizon_attr, o.direct) == (64, "", "")
    o = _orders(batch_window=64, callback_gate=True)  # a callback may ask for a checkpoint: one at a time
    o.pace(SchedulerReady(name="s", batching_allowed=True, direct="endpoint"))
    assert (o.window, o.direct) == (1, "")
    o = _orders(batch_window=64)
    o.pace(SchedulerReady(name="s", batching_allowed=False, horizon_attr="training_iteration"))
    assert (o.window, o.horizon_attr) == (64, "training_iteration")


def test_effects_become_messages_carrying_the_newest_horizon_and_a_stop_arms_the_deadline() -> None:
    o = _orders()
    handle = _started(o, "a")
    run = o.table.get("a").run_id
    o.declare_horizon("a", 4.0)
    assert o.order(Effect(EffectKind.PROCEED, "a", seq=3), now=0.0) == Send(handle, TrialProceed("a", run, 3, 4.0))
    o.declare_horizon("a", None)
    assert o.order(Effect(EffectKind.PROCEED, "a", seq=4), now=0.0) == Send(handle, TrialProceed("a", run, 4, None))
    assert o.order(Effect(EffectKind.HOLD, "a"), now=0.0) is None  # a window of one waits anyway
    o.window = 8
    assert o.order(Effect(EffectKind.HOLD, "a"), now=0.0) == Send(handle, TrialHold("a", run))
    assert o.order(Effect(EffectKind.STOP, "a"), now=5.0) == Send(handle, TrialStop("a", run, False))
    assert o.watch.halt_by["a"] == (run, 15.0)


def test_a_freed_actor_is_parked_while_there_is_room_and_retired_after() -> None:
    o = _orders(keep_idle=1)
    ha, hb = _started(o, "a"), _started(o, "b")
    assert o.release("a", reusable=True) == [] and o.pool.idle == [(ha, "local")]
    assert o.release("b", reusable=True) == [Retire(hb)]  # no room left in the pool
    spawn, reused = o.place(o.table.get("a"), "local")
    assert spawn is None and reused == ha
    assert o.release("a", reusable=False) == [Retire(ha)]
    assert o.release("a", reusable=True) == []  # no actor any more
