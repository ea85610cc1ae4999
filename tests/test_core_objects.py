"""The objects the experiment core owns, each alone, on a fake clock (times are plain numbers).

SchedulerLink (hook calls out, replies back in call order), Membership (members, liveness,
placement), ActorPool (trial actors, reuse, each run's inbox), DriverFeed and progress_report
(what the driver hears), ResultGate (batches held for callbacks), Watchdog (halt deadlines,
time limits, lost processes) and TrialSource (the search algorithm's trials). The core itself is
tested in tests/test_core_unit.py.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from actors._engine.feed import EVENTS_DELAY_S, OUTPUT_WAIT_S, DriverFeed, progress_report
from actors._engine.gate import ResultGate
from actors._engine.lifecycle import Phase, TrialTable
from actors._engine.link import PendingCall, SchedulerLink
from actors._engine.members import Membership
from actors._engine.placement import LOCAL
from actors._engine.pool import ActorPool
from actors._engine.signals import DRIVER, Send, Tick, WakeAfter
from actors._engine.store import SearchProgress
from actors._engine.suggest import TrialSource
from actors._engine.trial import TrialStatus
from actors._engine.watch import Watchdog, death_message, describe_exit
from actors.messages import (
    ActionKind,
    CallbackAnswer,
    EndReason,
    EventType,
    HookKind,
    SchedulerAction,
    SchedulerReady,
    SchedulerReply,
    TrialEvents,
    TrialOutput,
    TrialOutputBatch,
    TrialResults,
)
from actors.schedulers import Decision
from tests._core_harness import make_spec


# ---------------------------------------------------------------------------------- SchedulerLink
def _reply(seq: int, kind: HookKind, trial_id: str | None = None, decision: Decision = Decision.CONTINUE,
           chosen: str | None = None) -> SchedulerReply:
    return SchedulerReply(seq, kind, trial_id, decision, (), chosen)


def test_link_applies_replies_in_call_order_whatever_order_they_arrive_in() -> None:
    link = SchedulerLink()
    c1 = link.call(HookKind.ADD, "a", (), 0, 0, ())
    c2 = link.call(HookKind.RESULT, "a", ({"x": 1},), 3, 7, ())
    c3 = link.call(HookKind.CHOOSE, None, (), 0, 0, ())
    assert [c1.seq, c2.seq, c3.seq] == [1, 2, 3]
    assert link.answered(_reply(3, HookKind.CHOOSE, chosen="a")) == []  # held: 1 and 2 still missing
    assert link.answered(_reply(2, HookKind.RESULT, "a", Decision.PAUSE)) == []
    got = link.answered(_reply(1, HookKind.ADD, "a"))
    assert [(call.kind, reply.seq) for call, reply in got] == [
        (HookKind.ADD, 1), (HookKind.RESULT, 2), (HookKind.CHOOSE, 3)]
    assert got[1][0] == PendingCall(HookKind.RESULT, "a", 3, 7), "the reply is applied to the call it answers"
    assert not link.pending()
    assert link.answered(_reply(2, HookKind.RESULT, "a")) == [], "a duplicate reply is dropped"


def test_link_busy_counts_only_calls_that_can_change_the_table() -> None:
    link = SchedulerLink()
    link.call(HookKind.CHOOSE, None, (), 0, 0, ())
    assert link.pending() and not link.busy()
    link.call(HookKind.COMPLETE, "a", (), 0, 0, ())
    assert link.busy()
    link.answered(_reply(1, HookKind.CHOOSE))
    link.answered(_reply(2, HookKind.COMPLETE, "a"))
    assert not link.pending() and not link.busy()


def test_link_knows_which_hooks_the_plugin_implements() -> None:
    link = SchedulerLink()
    assert all(link.implements(k) for k in HookKind), "before Ready: assume every hook"
    link.ready(SchedulerReady(True, "Mine", frozenset({HookKind.CHOOSE, HookKind.SAVE})))
    assert link.batching_allowed
    assert link.implements(HookKind.CHOOSE) and link.implements(HookKind.SAVE)
    assert not link.implements(HookKind.RESULT) and not link.implements(HookKind.ADD)


# ---------------------------------------------------------------------------------- Membership
def _members(**over: Any) -> Membership:
    return Membership(make_spec(**{"multi_host": True, "leader_resources": {}, **over}))


def test_local_membership_is_one_member_sized_for_max_concurrent() -> None:
    m = Membership(make_spec(max_concurrent=3, resources_per_trial={"cpu": 2}))
    assert m.leader_id == LOCAL and m.free_slots() == 3
    assert m.choose() == LOCAL
    assert m.silent(1e9, 1.0) == [], "the local member has no heartbeats to miss"
    # a zero amount asks for nothing; no resources at all is one CPU a trial
    m = Membership(make_spec(max_concurrent=3, resources_per_trial={"cpu": 1, "gpu": 0}))
    assert m.need == {"cpu": 1.0} and [r["resources"] for r in m.rows()] == [{"cpu": 3}]
    m = Membership(make_spec(max_concurrent=3, resources_per_trial={}))
    assert m.need == {"cpu": 1.0} and [r["resources"] for r in m.rows()] == [{"cpu": 3}] and m.free_slots() == 3
    m = Membership(make_spec(max_concurrent=3, resources_per_trial={"cpu": 0.5}))
    assert [r["resources"] for r in m.rows()] == [{"cpu": 1.5}] and m.free_slots() == 3


def test_the_leader_is_a_member_only_with_resources_to_run_trials() -> None:
    m = _members(leader_resources={"cpu": 1.0})
    assert m.leader_id == "leader" and m.free_slots() == 1 and m.choose() == "leader"
    assert m.silent(1e9, 1.0) == [], "the leader has no heartbeats to miss"
    m.joined("w1", {"cpu": 1}, "a1", now=0.0)
    assert m.free_slots() == 2
    for none in ({}, {"cpu": 0.0}):  # (leader_runs_trials=False)
        m = _members(leader_resources=none)
        assert m.rows() == [] and m.choose() is None and m.free_slots() == 0


def test_member_restarted_under_the_same_id_is_replaced_and_its_old_registration_expiring_keeps_the_new() -> None:
    m = _members()
    m.joined("w1", {"cpu": 1}, "addr-1", now=0.0)
    m.place("t1", "w1")
    assert not m.replaced("w1", "addr-1"), "the same registration again is not a restart"
    assert m.replaced("w1", "addr-2"), "a known, live member registering from a new address restarted"
    assert m.lose("w1") == ["t1"], "its trials died with it"
    m.release("t1")
    m.joined("w1", {"cpu": 1}, "addr-2", now=1.0)
    assert "w1" not in m.lost and m.choose() == "w1"
    assert not m.is_current("w1", "addr-1"), "the old registration's expiry is not about the member we hold"
    assert m.is_current("w1", "addr-2")
    assert not m.replaced("w1", "addr-2")


def test_a_lost_member_registering_again_is_not_a_replacement() -> None:
    m = _members()
    m.joined("w1", {"cpu": 1}, "addr-1", now=0.0)
    assert m.lose("w1") == []
    assert m.lose("w1") is None, "lost once: not again"
    assert not m.replaced("w1", "addr-2")


def test_members_fall_silent_after_the_heartbeat_timeout() -> None:
    m = _members()
    m.joined("w1", {"cpu": 1}, "a1", now=0.0)
    m.joined("w2", {"cpu": 1}, "a2", now=0.0)
    assert not m.heartbeat("w1", 5.0)
    assert m.silent(10.0, 10.0) == []
    assert m.silent(10.5, 10.0) == ["w2"], "w2 has not beaten since it joined"
    assert m.silent(15.5, 10.0) == ["w1", "w2"]
    m.lose("w2")
    assert m.silent(15.5, 10.0) == ["w1"], "a lost member is not lost again"


def test_a_lost_member_comes_back_on_its_next_heartbeat() -> None:
    m = _members()
    m.joined("w1", {"cpu": 2}, "a1", now=0.0)
    m.lose("w1")
    assert m.free_slots() == 0 and m.choose() is None, "a lost member holds nothing"
    assert m.heartbeat("w1", 20.0), "reachable again"
    assert not m.heartbeat("w1", 21.0), "only the first heartbeat brings it back"
    assert m.free_slots() == 2 and m.choose() == "w1"
    assert m.silent(30.0, 10.0) == [] and m.silent(31.5, 10.0) == ["w1"]


def test_unplaceable_trials_count_their_waiting_time_until_a_member_can_hold_them() -> None:
    m = _members(resources_per_trial={"cpu": 4})
    m.joined("small", {"cpu": 2}, "a1", now=0.0)
    assert m.unplaceable_for(False, 5.0) is None, "nothing waits"
    assert m.unplaceable_for(True, 10.0) == 0.0
    assert m.unplaceable_for(True, 25.0) == 15.0
    assert m.unplaceable_for(False, 26.0) is None
    assert m.unplaceable_for(True, 30.0) == 0.0, "the count restarts once nothing waited"
    m.joined("big", {"cpu": 8}, "a2", now=31.0)
    assert m.unplaceable_for(True, 40.0) is None, "a big enough member joined"
    m.lose("big")
    assert m.unplaceable_for(True, 50.0) == 0.0, "a lost member is no place a trial could ever fit"


def test_placement_books_are_kept_per_member() -> None:
    m = _members()
    m.joined("w1", {"cpu": 2}, "a1", now=0.0)
    assert m.free_slots() == 2
    m.place("t1", "w1")
    assert m.where("t1") == "w1" and m.free_slots() == 1
    m.release("t1")
    assert m.where("t1") is None and m.free_slots() == 2
    assert m.rows() == [{"member": "w1", "resources": {"cpu": 2}, "free": {"cpu": 2.0}, "trials": [],
                         "lost": False}]


# ---------------------------------------------------------------------------------- ActorPool
def test_pool_hands_out_new_handles_after_the_driver() -> None:
    pool = ActorPool(keep_idle=2)
    assert [pool.new_handle() for _ in range(3)] == [DRIVER + 1, DRIVER + 2, DRIVER + 3]


def test_pool_reuses_idle_actors_only_on_their_own_member() -> None:
    pool = ActorPool(keep_idle=4)
    assert pool.park(5, "a") and pool.park(6, "b") and pool.park(7, "b")
    assert pool.reuse("c") is None
    assert pool.reuse("b") == 6 and pool.reuse("b") == 7 and pool.reuse("b") is None
    assert pool.reuse("a") == 5 and pool.idle == []


def test_pool_parks_at_most_keep_idle_actors() -> None:
    pool = ActorPool(keep_idle=1)
    assert pool.park(5, "a")
    assert not pool.park(6, "a"), "over the limit: the caller retires it"
    assert pool.all_handles() == [5]
    assert not ActorPool(keep_idle=0).park(5, "a"), "reuse_actors=False keeps none"


def test_pool_assign_unassign_and_gone() -> None:
    pool = ActorPool(keep_idle=2)
    pool.assign("t1", 3, run_id=1)
    pool.park(4, "a")
    assert pool.actor_of == {"t1": 3} and pool.trial_of == {3: "t1"}
    assert sorted(pool.all_handles()) == [3, 4]
    assert pool.gone(4) is None and pool.idle == [], "an idle actor exited: dropped from the pool"
    assert pool.gone(3) == "t1" and pool.actor_of == {}
    assert pool.unassign("t1") is None


def test_pool_drops_messages_of_an_earlier_run() -> None:
    pool = ActorPool(keep_idle=0)
    pool.assign("t1", 3, run_id=2)
    assert pool.in_order("t1", 1, 1, "old") == [], "run 1 is over"
    assert pool.in_order("t1", 2, 1, "new") == ["new"]
    assert pool.in_order("nobody", 1, 1, "x") == []
    pool.close_inbox("t1")
    assert pool.in_order("t1", 2, 2, "late") == [], "the run ended: nothing more is expected"


def test_pool_puts_a_runs_messages_back_in_send_order() -> None:
    pool = ActorPool(keep_idle=0)
    pool.assign("t1", 3, run_id=1)
    assert pool.in_order("t1", 1, 3, "ended") == []
    assert pool.in_order("t1", 1, 2, "results-2") == []
    assert pool.in_order("t1", 1, 1, "results-1") == ["results-1", "results-2", "ended"]
    assert pool.in_order("t1", 1, 2, "results-2") == [], "a duplicate is dropped"
    pool.assign("t1", 3, run_id=2)
    assert pool.in_order("t1", 2, 1, "run-2") == ["run-2"], "a new run numbers from 1 again"


# ---------------------------------------------------------------------------------- DriverFeed
def _snap(trial_id: str) -> Any:
    table = TrialTable()
    return table.add(trial_id, {}).snapshot()


def test_feed_batches_events_behind_one_wake_up() -> None:
    feed = DriverFeed(forward_events=True, log_to_driver=True)
    assert feed.event(EventType.START, _snap("a")) == [WakeAfter(EVENTS_DELAY_S, Tick.EVENTS)]
    assert feed.event(EventType.RESULT, _snap("a"), {"x": 1}) == [], "a wake-up is already pending"
    out = TrialOutput("a", 1, 1, 99, "", ((1, "hello"),))
    assert feed.output(out) == []
    sent = feed.tick()
    assert len(sent) == 2 and all(isinstance(c, Send) and c.to == DRIVER for c in sent)
    events = sent[0].msg  # type: ignore[union-attr]
    assert isinstance(events, TrialEvents) and events.seq == 1
    assert [e.kind for e in events.events] == [EventType.START, EventType.RESULT]
    assert sent[1].msg == TrialOutputBatch((out,))  # type: ignore[union-attr]
    assert feed.tick() == [], "nothing left"
    assert feed.event(EventType.COMPLETE, _snap("a")) == [WakeAfter(EVENTS_DELAY_S, Tick.EVENTS)], "armed again"
    assert (feed.event_seq, feed.output_batches) == (1, 1)


def test_feed_sends_a_full_batch_between_messages_not_inside_one() -> None:
    feed = DriverFeed(forward_events=True, log_to_driver=False)
    for i in range(499):
        assert all(isinstance(c, WakeAfter) for c in feed.event(EventType.RESULT, _snap("a"), {"i": i}))
        assert feed.flush_full() == []
    # the 500th event stays (a decision held later in the same message marks it: ask_answer) ...
    assert feed.event(EventType.RESULT, _snap("a"), {"i": 499}) == []
    assert feed.ask_answer("a", 1, 7) and feed.events[-1].answer_batch == 7
    out = feed.flush_full()  # ... and the core sends the full batch once that message is handled
    assert len(out) == 1 and isinstance(out[0], Send)
    assert len(out[0].msg.events) == 500 and feed.events == []


def test_feed_sends_nothing_once_the_driver_is_gone() -> None:
    feed = DriverFeed(forward_events=True, log_to_driver=True)
    feed.event(EventType.START, _snap("a"))
    feed.output(TrialOutput("a", 1, 1, 99, "", ((1, "x"),)))
    feed.driver_present = False
    assert feed.flush() == [] and feed.tick() == []
    assert feed.events == [] and feed.console_out == [], "dropped, not kept for nobody"
    assert (feed.event_seq, feed.output_batches) == (0, 0)


def test_feed_forwards_only_what_was_asked_for() -> None:
    feed = DriverFeed(forward_events=False, log_to_driver=False)
    assert feed.event(EventType.START, _snap("a")) == []
    assert feed.output(TrialOutput("a", 1, 1, 99, "", ((1, "x"),))) == []
    assert feed.flush() == []


def test_feed_counts_a_runs_printed_lines_and_waits_a_bounded_time_for_those_its_end_overtook() -> None:
    feed = DriverFeed(forward_events=False, log_to_driver=True)
    chunk = [TrialOutput("a", 1, n, 99, "", ((1, f"line {n}"),)) for n in (1, 2, 3, 4, 5)]
    feed.output(chunk[0])
    # the end says the run sent 4 chunks before its last one: chunks 2, 3 and 4 are still on the way
    feed.run_ended("a", 1, chunk[4], sent=4)
    assert feed.awaiting_output and feed.output_due(10.0)
    assert feed.output_due(10.0 + OUTPUT_WAIT_S - 0.01), "waits from when the end first would have come"
    for late in (chunk[3], chunk[2]):
        feed.output(late)
        assert feed.awaiting_output
    feed.output(chunk[1])
    assert not feed.awaiting_output and not feed.output_due(11.0), "all came: the end goes on"
    assert feed.console_out == [chunk[0], chunk[4], chunk[3], chunk[2], chunk[1]], "each sent on (the driver orders)"
    # another run's chunk never comes: the end waits OUTPUT_WAIT_S, no longer
    feed.run_ended("b", 1, None, sent=1)
    assert feed.output_due(20.0) and not feed.output_due(20.0 + OUTPUT_WAIT_S)
    # a run whose chunks all came before its end, and one that printed nothing, are not waited for
    feed2 = DriverFeed(forward_events=False, log_to_driver=True)
    feed2.output(chunk[0])
    feed2.run_ended("a", 1, None, sent=1)
    feed2.run_ended("c", 1, None, sent=0)
    assert not feed2.awaiting_output and not feed2.output_due(0.0)
    # a run whose process died sent no end: its count is no later run's (one entry a trial, replaced)
    died = DriverFeed(forward_events=False, log_to_driver=True)
    died.output(chunk[0])  # run 1 of "a"
    died.run_ended("a", 2, None, sent=1)
    assert died.awaiting_output, "run 2's chunk has not come; run 1's does not count for it"
    died.output(TrialOutput("a", 2, 1, 99, "", ((1, "x"),)))
    assert not died.awaiting_output
    # ... and a later run counts its own chunks from one: two came, the third is on the way
    again = DriverFeed(forward_events=False, log_to_driver=True)
    again.output(chunk[0])  # run 1 of "a", whose process died
    for n in (1, 2):
        again.output(TrialOutput("a", 2, n, 99, "", ((1, f"run 2 line {n}"),)))
    again.run_ended("a", 2, None, sent=3)
    assert again.awaiting_output, "run 2 sent three chunks before its end and two came"
    again.output(TrialOutput("a", 2, 3, 99, "", ((1, "run 2 line 3"),)))
    assert not again.awaiting_output
    # nobody to print for: nothing is waited for
    feed3 = DriverFeed(forward_events=False, log_to_driver=True)
    feed3.run_ended("a", 1, None, sent=2)
    feed3.driver_present = False
    assert not feed3.output_due(0.0)
    feed4 = DriverFeed(forward_events=False, log_to_driver=False)
    assert feed4.run_ended("a", 1, chunk[3], sent=2) == [] and not feed4.awaiting_output


def test_ask_answer_marks_the_trials_latest_result_event() -> None:
    feed = DriverFeed(forward_events=True, log_to_driver=False)
    feed.event(EventType.RESULT, _snap("a"), {"i": 1})
    feed.event(EventType.RESULT, _snap("b"), {"i": 1})
    feed.event(EventType.RESULT, _snap("a"), {"i": 2})
    feed.event(EventType.CHECKPOINT, _snap("a"), checkpoint="mem://c")
    assert feed.ask_answer("a", 3, 7)
    marked = [(e.trial.trial_id, (e.result or {}).get("i"), e.answer_run, e.answer_batch) for e in feed.events]
    assert marked == [("a", 1, 0, 0), ("b", 1, 0, 0), ("a", 2, 3, 7), ("a", None, 0, 0)]
    assert not feed.ask_answer("c", 1, 1), "no result event of that trial is waiting"


def test_progress_report_counts_and_best() -> None:
    spec = make_spec(metric="loss", mode="min")
    table = TrialTable()
    for tid, loss in (("a", 3.0), ("b", 1.0), ("c", None)):
        rec = table.add(tid, {"lr": 0.1})
        if loss is not None:
            rec.last_result = {"loss": loss}
    table.start("a")
    report = progress_report(spec, table, {"a": "local"}, elapsed_s=12.0)
    assert report.counts == {"PENDING": 2, "RUNNING": 1}
    assert (report.best, report.best_trial, report.elapsed_s) == (1.0, "b", 12.0)
    assert report.rows[0].trial_id == "a" and report.rows[0].member == "local"
    table.get("c").last_result = {"loss": 1.0}  # a tie: the first trial to reach the best value keeps it
    assert progress_report(spec, table, {}, 0.0).best_trial == "b"
    assert progress_report(make_spec(metric="loss", mode="max"), table, {}, 0.0).best_trial == "a"
    table.get("a").last_result = {"loss": 1.0}
    assert progress_report(make_spec(metric="loss", mode="max"), table, {}, 0.0).best_trial == "a"


def test_progress_rows_show_the_first_six_scalar_config_values() -> None:
    table = TrialTable()
    table.add("a", {f"k{i}": i for i in range(8)})
    table.add("b", {f"k{i}": i for i in range(7)})
    table.add("c", {"lr": 0.1, "layers": [1, 2], "name": "x"})
    rows = progress_report(make_spec(metric="loss", mode="min"), table, {}, 0.0).rows
    first_six = {f"k{i}": i for i in range(6)}
    assert [r.config for r in rows] == [first_six, first_six, {"lr": 0.1, "name": "x"}]


# ---------------------------------------------------------------------------------- ResultGate
def _batch(trial_id: str, run_id: int, seq: int) -> TrialResults:
    return TrialResults(trial_id, run_id, seq, ({"training_iteration": seq},), None)


def test_gate_matches_answers_to_the_held_batch_only() -> None:
    gate = ResultGate(on=True)
    gate.hold(_batch("a", 2, 5), Decision.PAUSE)
    assert gate.answer_for(CallbackAnswer("a", 2, 4, False)) is None, "an older batch"
    assert gate.answer_for(CallbackAnswer("a", 1, 5, False)) is None, "an older run"
    assert gate.answer_for(CallbackAnswer("b", 2, 5, False)) is None
    entry = gate.answer_for(CallbackAnswer("a", 2, 5, True))
    assert entry is not None and entry.batch == _batch("a", 2, 5)
    held = gate.release("a")
    assert (held.batch, held.decision) == (_batch("a", 2, 5), Decision.PAUSE), "the decision waits with it"
    assert gate.held == {}


def test_gate_releases_on_a_save_only_when_the_batch_waits_for_one() -> None:
    gate = ResultGate(on=True)
    gate.hold(_batch("a", 1, 1), Decision.CONTINUE)
    assert gate.saved("a") is None, "a save the batch does not wait for (e.g. a scheduler's)"
    assert "a" in gate.held
    gate.held["a"].awaiting_save = True
    held = gate.saved("a")
    assert held is not None and held.batch == _batch("a", 1, 1) and gate.held == {}
    gate.hold(_batch("a", 2, 1), Decision.STOP)
    gate.drop("a")
    assert gate.held == {} and gate.saved("a") is None
    gate.drop("a")  # dropping nothing is fine


# ---------------------------------------------------------------------------------- Watchdog
def _running(*trial_ids: str) -> TrialTable:
    table = TrialTable()
    for tid in trial_ids:
        table.add(tid, {})
        table.start(tid)  # run 1, STEPPING
    return table


def test_halt_deadline_is_given_once_and_not_extended_by_a_second_stop() -> None:
    table = _running("a")
    dog = Watchdog(grace_s=10.0)
    dog.arm("a", 1, now=0.0)
    dog.arm("a", 1, now=5.0)  # asked again: the first deadline holds
    assert dog.overdue(table, 9.9) == []
    assert dog.overdue(table, 10.0) == [("a", 1)]
    assert dog.overdue(table, 11.0) == [], "overdue once"


def test_halt_deadline_is_void_when_the_run_is_over() -> None:
    table = _running("a", "b")
    dog = Watchdog(grace_s=10.0)
    dog.arm("a", 1, now=0.0)
    dog.arm("b", 1, now=0.0)
    dog.started("a", 2, now=1.0, time_total_s=0.0)  # a new run: the old deadline is void
    table.ended("b", 1, EndReason.COMPLETED)
    assert dog.overdue(table, 20.0) == [] and dog.halt_by == {}


def test_saving_or_stopping_trials_get_a_deadline_without_an_arm() -> None:
    table = _running("a")
    table.request(SchedulerAction(ActionKind.STOP, "a"))
    assert table.get("a").phase is Phase.STOPPING
    dog = Watchdog(grace_s=10.0)
    assert dog.overdue(table, 100.0) == [], "armed now"
    assert dog.overdue(table, 110.0) == [("a", 1)]


def test_time_limits_count_this_run_on_top_of_the_trials_earlier_time() -> None:
    table = _running("a", "b")
    dog = Watchdog(grace_s=10.0)
    dog.started("a", 1, now=100.0, time_total_s=5.0)
    dog.started("b", 1, now=100.0, time_total_s=0.0)
    assert dog.over_time(table, 114.9, limit=20.0) == []
    assert dog.over_time(table, 115.0, limit=20.0) == ["a"]
    assert dog.over_time(table, 120.0, limit=20.0) == ["a", "b"]
    table.request(SchedulerAction(ActionKind.STOP, "a"))  # already stopping: not asked again
    assert dog.over_time(table, 130.0, limit=20.0) == ["b"]
    dog.started("b", 2, now=130.0, time_total_s=0.0)  # a clock of another run of b
    assert dog.over_time(table, 200.0, limit=20.0) == []


def test_a_process_is_lost_only_when_two_checks_in_a_row_find_it_gone() -> None:
    dog = Watchdog(grace_s=10.0)
    gone = (("a", 1, -9),)
    assert dog.seen_gone(gone) == [], "once may be an exit notice still on its way"
    assert dog.seen_gone(gone) == [("a", 1, -9)]
    assert dog.seen_gone(()) == []
    assert dog.seen_gone(gone) == [] and dog.seen_gone(()) == [], "a check without it starts over"
    assert dog.seen_gone(gone) == []
    assert dog.seen_gone((("a", 2, None),)) == [], "another run of the trial: a first sighting"
    assert dog.seen_gone((("a", 2, None),)) == [("a", 2, None)]


def test_watchdog_knows_each_runs_process() -> None:
    dog = Watchdog(grace_s=1.0)
    dog.process("a", 2, 4242)
    assert dog.pid("a", 2) == 4242 and dog.pid("a", 1) is None and dog.pid("b", 2) is None
    assert dog.forget("a") == 4242 and dog.pid("a", 2) is None and dog.forget("a") is None


def test_exit_descriptions() -> None:
    assert describe_exit(-9) == "killed by SIGKILL" and describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "exited (how is unknown)" and describe_exit(-1000) == "killed by signal 1000"
    assert "out-of-memory" in death_message(-9) and "exited unexpectedly" in death_message(None)



# ---------------------------------------------------------------------------------- TrialSource
class _Searcher:
    """Gives ``configs`` in turn (a non-dict, such as Ray's ``Searcher.FINISHED``, ends the search)."""

    def __init__(self, *configs: Any) -> None:
        self.configs = list(configs)
        self.asked: list[str] = []

    def suggest(self, trial_id: str) -> Any:
        self.asked.append(trial_id)
        return self.configs.pop(0)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        raise KeyError("loss")


def _source(searcher: Any, num_samples: int = sys.maxsize, restored: int = 0, closed: bool = False,
            **over: Any) -> tuple[TrialSource, TrialTable]:
    """``num_samples=sys.maxsize``: as the driver passes ``num_samples=-1``, when the searcher alone decides."""
    source = TrialSource(dataclasses.replace(make_spec(searcher=searcher, **over), num_samples=num_samples))
    source.restored(SearchProgress(restored, closed), ())
    return source, TrialTable(0)


def test_source_adds_trials_while_ray_wants_more_pending_and_numbers_them() -> None:
    source, table = _source(_Searcher({"x": 1}, {"x": 2}, {"x": 3}), num_samples=3)
    drawn = source.draw(table, 1, "t")
    assert drawn is not None and drawn.record is not None and drawn.record.trial_id == "t_00000"
    assert table.get("t_00000").config == {"x": 1} and table.get("t_00000").status is TrialStatus.PENDING
    assert source.draw(table, 1, "t") is None, "one pending trial is enough for one free slot"
    assert source.suggested == 1 and not source.done


def test_source_is_done_at_num_samples_or_when_the_searcher_says_so() -> None:
    source, table = _source(_Searcher({"x": 1}, {"x": 2}), num_samples=1)
    assert source.draw(table, 8, "t") is not None and source.draw(table, 8, "t") is None and source.done
    source, table = _source(_Searcher({"x": 1}, "FINISHED"))  # num_samples -1: the searcher decides
    assert source.draw(table, 8, "t") is not None and source.draw(table, 8, "t") is None and source.done
    assert source.suggested == 1 and list(table.trials) == ["t_00000"]


def test_source_saves_whether_the_search_ended_for_good() -> None:
    """Ray's ``set_finished``: ``stop_all``/``fail_fast`` (``close(for_good=True)``) and the searcher's
    FINISHED end the search for good, and a restored source draws nothing; an abort's ``close()`` and
    ``num_samples`` reached are not saved as such (the count says it)."""
    source, table = _source(_Searcher({"x": 1}, {"x": 2}), num_samples=4)
    source.close()
    assert source.done and source.progress == SearchProgress(0, False)
    source.close(for_good=True)
    assert source.progress == SearchProgress(0, True)
    source, table = _source(_Searcher({"x": 1}, "FINISHED"))
    source.draw(table, 8, "t")
    source.draw(table, 8, "t")
    assert source.progress == SearchProgress(1, True)
    source, table = _source(_Searcher({"x": 1}), num_samples=1)
    source.draw(table, 8, "t")
    source.draw(table, 8, "t")
    assert source.done and source.progress == SearchProgress(1, False)
    searcher = _Searcher({"x": 1})
    source, table = _source(searcher, num_samples=9, restored=2, closed=True)
    assert source.done and source.draw(table, 8, "t") is None and not searcher.asked
    assert source.progress == SearchProgress(2, True)


def test_source_waits_while_the_searcher_has_nothing_yet() -> None:
    searcher = _Searcher(None, {"x": 1})
    source, table = _source(searcher, num_samples=4)
    assert source.draw(table, 8, "t") is None and not source.done and not table.trials
    drawn = source.draw(table, 8, "t")
    assert drawn is not None and drawn.record is not None and drawn.record.trial_id == "t_00000"
    assert searcher.asked == ["t_00000", "t_00000"], "the id is not used up by an empty answer"


def test_source_names_the_searcher_and_hook_that_raised() -> None:
    source, table = _source(_Searcher(), num_samples=4)
    drawn = source.draw(table, 8, "t")  # suggest() pops from an empty list: IndexError
    assert drawn is not None and drawn.record is None and "suggest" in (drawn.problem or "")
    assert "_Searcher" in (drawn.problem or "") and not table.trials and source.suggested == 0
    value, problem = source.ask("on_trial_result", "t_00000", {})
    assert value is None and problem is not None and "on_trial_result" in problem and "KeyError" in problem


def test_source_continues_numbering_after_a_restore_and_reports_a_naming_problem() -> None:
    source, table = _source(_Searcher({"x": 1}, {"x": 2}), num_samples=9, restored=5,
                            trial_dirname_creator=lambda trial: "")
    drawn = source.draw(table, 8, "t")
    assert drawn is not None and drawn.record is None and "trial_dirname_creator" in (drawn.problem or "")
    assert "t_00005" in (drawn.problem or "") and source.suggested == 6
