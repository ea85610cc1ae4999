"""``ResultPath`` (actors/_engine/results.py) alone, driven through a fake ``CoreOps`` port that records what
the result path asks of the core: Ray Tune's order for a batch (the stop criteria before the scheduler,
logging when the decision is known, the hook's requests before the decision). No core."""

from __future__ import annotations

from typing import Any

import pytest

from actors._engine.clones import CloneWaits
from actors._engine.effects import EffectKind
from actors._engine.feed import DriverFeed
from actors._engine.lifecycle import Effect, TrialRecord, TrialTable
from actors._engine.link import SchedulerLink
from actors._engine.members import Membership
from actors._engine.orders import TrialOrders
from actors._engine.pool import ActorPool
from actors._engine.port import CoreOps, ExperimentPhase
from actors._engine.reducer import Decision
from actors._engine.results import ResultPath
from actors._engine.signals import Command, Handle
from actors._engine.suggest import TrialSource
from actors._engine.watch import Watchdog
from actors.messages import (
    ActionKind,
    CallbackAnswer,
    CheckpointRef,
    DecidedResults,
    DirectDecision,
    EndReason,
    EventType,
    HookKind,
    SaveKind,
    SchedulerAction,
    SchedulerReply,
    TrialResults,
    TrialSaved,
)
from actors.search import Searcher
from tests._core_harness import ALL_HOOKS, FakeStore, make_spec


class FakeOps:
    """A ``CoreOps`` that records each request as a tuple in ``log``, in call order."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.log: list[tuple[Any, ...]] = []
        self.asked: list[tuple[int, ...]] = []  # the iterations of each RESULT call's results
        self.phase = ExperimentPhase.RUNNING
        self.now = 0.0

    @property
    def finished(self) -> bool:
        return self.phase is ExperimentPhase.FINISHED

    @property
    def io(self) -> Any:
        return self.store

    def emit(self, commands: list[Command]) -> None:
        self.log.append(("emit", len(commands)))

    def put(self, command: Command) -> None:
        self.log.append(("put", command))

    def send(self, to: Handle, msg: Any) -> None:
        self.log.append(("send", to, msg))

    def run(self, effects: list[Effect]) -> None:
        if effects:
            self.log.append(("run", tuple(e.kind.name for e in effects)))

    def stop_every_trial(self) -> list[Effect]:
        self.log.append(("stop_every_trial",))
        return []

    def call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
             run_id: int = 0, batch_seq: int = 0) -> int | None:
        self.log.append(("call", kind, trial_id, batch_seq))
        self.asked.append(tuple(r["training_iteration"] for r in results))
        return 1

    def reply(self, kind: HookKind, trial_id: str | None, run_id: int, batch_seq: int, msg: SchedulerReply) -> None:
        self.log.append(("reply", kind, trial_id, batch_seq))

    def fill(self) -> None:
        self.log.append(("fill",))

    def ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: CheckpointRef | None = None,
              error: str | None = None, tb: str | None = None) -> None:
        self.log.append(("ended", trial_id))

    def host_lost(self, lost: Any) -> None:
        self.log.append(("host_lost", lost))

    def event(self, kind: EventType, rec: TrialRecord, result: dict[str, Any] | None = None,
              checkpoint: str | None = None) -> None:
        self.log.append(("event", kind, None if result is None else result["training_iteration"]))

    def searcher(self, hook: str, trial_id: str, result: dict[str, Any] | None, *rest: Any,
                 flat: dict[str, Any] | None = None) -> bool:
        self.log.append(("searcher", hook, None if result is None else result["training_iteration"]))
        return True

    def abort(self, reason: str) -> None:
        self.log.append(("abort", reason))

    def finish(self, error: str | None) -> None:
        self.log.append(("finish", error))

    def save_state(self) -> None:
        self.log.append(("save_state",))

    def drain(self) -> None:
        self.log.append(("drain",))

    def save_answered(self, seq: int) -> bool:
        return False


class StopBelow:
    """A stop criterion: a trial stops at its first loss under ``bound``."""

    def __init__(self, bound: float) -> None:
        self.bound = bound

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(result["loss"] < self.bound)

    def stop_all(self) -> bool:
        return False


class HearsResults(Searcher):
    """A search algorithm that listens to results (so the result path tells it of each)."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return None

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def _path(**over: Any) -> tuple[ResultPath, FakeOps, FakeStore]:
    spec = make_spec(num_samples=1, max_concurrent=1, searcher=HearsResults(), **over)
    table = TrialTable()
    pool = ActorPool(keep_idle=0)
    members = Membership(spec)
    watch = Watchdog(10.0)
    link = SchedulerLink()
    link.hooks = ALL_HOOKS  # the scheduler overrides on_trial_result: a result goes to it
    store = FakeStore(spec)
    ops = FakeOps(store)
    port: CoreOps = ops  # the fake is a CoreOps
    path = ResultPath(spec, table, link, TrialOrders(spec, table, pool, members, watch),
                      DriverFeed(False, False), TrialSource(spec), CloneWaits(table), port)
    table.add("a", {"x": 1})
    table.start("a")
    return path, ops, store


def _batch(seq: int, loss: float) -> TrialResults:
    return TrialResults("a", 1, seq, ({"loss": loss, "training_iteration": seq},), None)


def _rows(seq: int, *iterations: int, done_at: int = 0) -> TrialResults:
    """A batch of results at ``iterations``; the one at ``done_at`` is reported with ``done=True``."""
    return TrialResults("a", 1, seq, tuple({"loss": 0.5, "training_iteration": i, "done": i == done_at}
                                           for i in iterations), None)


def _waiting(path: ResultPath) -> dict[str, list[TrialResults]]:
    return {t: [w.batch for w in entries] for t, entries in path.unlogged.items()}


def test_a_stop_criterion_decides_before_the_scheduler_sees_the_result() -> None:
    path, ops, store = _path(stopper=StopBelow(0.1))
    batch = _batch(1, loss=0.05)
    path.on_results(batch)
    assert not any(e[0] == "call" for e in ops.log), "a stopping result must never reach the scheduler"
    assert batch.results[-1]["done"] is True and path.table.get("a").stop_row == 1
    assert store.logged == [("a", batch.results)], "logged at once: no decision is awaited"
    assert ("searcher", "on_trial_result", 1) not in ops.log, "the searcher does not hear a stopping result"
    assert ops.log == [("event", EventType.RESULT, 1), ("run", ("STOP",))]
    assert path.unlogged == {}


def test_a_batch_is_logged_when_its_decision_arrives_after_the_hooks_requests() -> None:
    path, ops, store = _path(stopper=StopBelow(0.1))
    batch = _batch(1, loss=0.5)
    path.on_results(batch)
    assert ops.log == [("call", HookKind.RESULT, "a", 1)]
    assert store.logged == [] and _waiting(path) == {"a": [batch]}, "not logged before the decision"
    ops.log.clear()
    requested = [Effect(EffectKind.HOLD, "a")]  # what the hook asked for (e.g. pause_trial()), not run yet
    assert path.decided("a", 1, 1, Decision.STOP, requested) == []
    assert batch.results[-1]["done"] is True, "the row a scheduler stops at says done=True"
    assert store.logged == [("a", batch.results)] and path.unlogged == {}
    # logged (no searcher: a stopping result), then the hook's requests, then the decision
    assert ops.log == [("event", EventType.RESULT, 1), ("run", ("HOLD",)), ("run", ("STOP",))]


def test_a_continued_batch_is_told_to_the_searcher_and_a_later_batch_waits_its_turn() -> None:
    path, ops, store = _path()
    first, second = _batch(1, 0.5), _batch(2, 0.4)
    path.on_results(first)
    path.on_results(second)
    ops.log.clear()
    # a decision for a batch that is not the oldest waiting one goes to the slot; nothing is logged
    assert [e.kind for e in path.decided("a", 1, 2, Decision.CONTINUE, [])] == [EffectKind.PROCEED]
    assert store.logged == [] and ops.log == []
    rest = path.decided("a", 1, 1, Decision.CONTINUE, [])
    assert rest == [] and store.logged == [("a", first.results)] and _waiting(path) == {"a": [second]}
    assert "done" not in first.results[-1]
    assert ops.log == [("searcher", "on_trial_result", 1), ("event", EventType.RESULT, 1), ("run", ("PROCEED",))]


# Ray 2.60 (TuneController._process_trial_result): `if stopper(...) or trial.should_stop(result)` decides
# STOP without calling the scheduler's on_trial_result, and the searcher's on_trial_result is called only
# when the decision is not STOP; should_stop is true for a result with done=True. Recorded with an
# ASHAScheduler subclass logging on_trial_result: trials reporting done at iterations 3 and 5 are asked
# about 1-2 and 1-4 (tests/test_decisions_vs_ray.py runs that through fit()).

def test_a_result_reported_done_is_logged_after_the_undecided_batches_before_it() -> None:
    path, ops, store = _path()
    first, last = _rows(1, 1), _rows(2, 2, done_at=2)
    path.on_results(first)
    path.on_results(last)
    assert ops.asked == [(1,)], "the scheduler is never asked about the done result"
    assert store.logged == [] and _waiting(path) == {"a": [first, last]}, "not logged ahead of iteration 1"
    ops.log.clear()
    assert path.decided("a", 1, 1, Decision.CONTINUE, []) == []
    assert store.logged == [("a", first.results), ("a", last.results)] and path.unlogged == {}
    assert ops.log == [("searcher", "on_trial_result", 1), ("event", EventType.RESULT, 1), ("run", ("PROCEED",)),
                       ("event", EventType.RESULT, 2), ("run", ("PROCEED",))], "no searcher for the done result"
    assert path.table.get("a").stop_row == 0, "no stop was decided: the trainable ends on its own"


def test_a_stop_criterion_hit_is_logged_and_applied_after_the_undecided_batches_before_it() -> None:
    path, ops, store = _path(stopper=StopBelow(0.1))
    first, hit = _batch(1, loss=0.5), _batch(2, loss=0.05)
    path.on_results(first)
    path.on_results(hit)
    assert ops.asked == [(1,)] and store.logged == [] and _waiting(path) == {"a": [first, hit]}
    ops.log.clear()
    assert path.decided("a", 1, 1, Decision.CONTINUE, []) == []
    assert store.logged == [("a", first.results), ("a", hit.results)] and path.unlogged == {}
    assert hit.results[-1]["done"] is True and path.table.get("a").stop_row == 2
    assert ops.log == [("searcher", "on_trial_result", 1), ("event", EventType.RESULT, 1), ("run", ("PROCEED",)),
                       ("event", EventType.RESULT, 2), ("run", ("STOP",))]


def test_a_batch_ending_in_a_done_result_asks_the_scheduler_about_the_results_before_it() -> None:
    path, ops, store = _path()
    batch = _rows(1, 1, 2, 3, done_at=3)
    path.on_results(batch)
    assert ops.asked == [(1, 2)]
    ops.log.clear()
    assert path.decided("a", 1, 1, Decision.CONTINUE, []) == [] and store.logged == [("a", batch.results)]
    assert [e for e in ops.log if e[0] == "searcher"] == [("searcher", "on_trial_result", 1),
                                                          ("searcher", "on_trial_result", 2)]


def test_without_a_deciding_scheduler_the_searcher_is_not_told_of_a_done_result() -> None:
    path, ops, store = _path()
    path.link.hooks = frozenset()  # the scheduler decides no result (FIFO)
    batch = _rows(1, 1, 2, done_at=2)
    path.on_results(batch)
    assert store.logged == [("a", batch.results)] and ops.asked == []
    assert [e for e in ops.log if e[0] == "searcher"] == [("searcher", "on_trial_result", 1)]


def test_a_direct_reply_is_awaited_only_for_the_results_before_a_done_one() -> None:
    path, ops, store = _path()
    path.orders.direct = "/tmp/scheduler.sock"  # the trial asks the scheduler itself, except for done
    batch = _rows(1, 1, 2, 3, done_at=3)
    path.on_results(batch)
    assert ops.asked == [] and store.logged == []
    ops.log.clear()
    replies = tuple(DirectDecision("a", 1, i, SchedulerReply(0, HookKind.RESULT, "a", Decision.CONTINUE, ()))
                    for i in (1, 2))
    path.decided_results(DecidedResults(replies))
    assert ops.log == [("reply", HookKind.RESULT, "a", 1)], "joined without a reply for the done result"
    ops.log.clear()
    assert path.decided("a", 1, 1, Decision.CONTINUE, []) == []
    assert store.logged == [("a", batch.results)] and path.unlogged == {}
    assert [e for e in ops.log if e[0] == "searcher"] == [("searcher", "on_trial_result", 1),
                                                          ("searcher", "on_trial_result", 2)]


def test_a_run_ending_before_its_decisions_logs_a_done_result_without_the_searcher() -> None:
    path, ops, store = _path()
    first, last = _rows(1, 1), _rows(2, 2, done_at=2)
    path.on_results(first)
    path.on_results(last)
    ops.log.clear()
    path.log_unlogged("a")
    assert store.logged == [("a", first.results), ("a", last.results)] and path.unlogged == {}
    assert first.results[-1]["done"] is False, "no stop was decided for the first batch"
    assert [e for e in ops.log if e[0] == "searcher"] == [("searcher", "on_trial_result", 1)]


class StopAllAfter(StopBelow):
    """A stopper whose ``stop_all`` turns true once the test says so (a global criterion met)."""

    def __init__(self) -> None:
        super().__init__(bound=0.0)
        self.all = False

    def stop_all(self) -> bool:
        return self.all


class StopsAll(FakeOps):
    """A ``FakeOps`` whose ``stop_every_trial`` hands back the stop of the one trial (its effect, not run yet)."""

    def stop_every_trial(self) -> list[Effect]:
        self.log.append(("stop_every_trial",))
        return [Effect(EffectKind.STOP, "a")]


def _stop_all_path(**over: Any) -> tuple[ResultPath, StopsAll, StopAllAfter]:
    stopper = StopAllAfter()
    path, ops, store = _path(stopper=stopper, **over)
    ops = StopsAll(store)
    path.ops = ops
    return path, ops, stopper


def test_stop_all_stops_every_trial_at_once_while_the_scheduler_decides_the_batch() -> None:
    # Ray 2.60 stops every unfinished trial once the stopper's stop_all() is true, without waiting for the
    # scheduler's decision on the result that made it so
    path, ops, stopper = _stop_all_path()
    stopper.all = True
    path.on_results(_batch(1, 0.5))
    assert ops.log == [("stop_every_trial",), ("call", HookKind.RESULT, "a", 1), ("run", ("STOP",))]


def test_stop_all_stops_every_trial_at_once_when_the_trial_asks_the_scheduler_itself() -> None:
    path, ops, stopper = _stop_all_path()
    path.orders.direct = "/tmp/scheduler.sock"
    stopper.all = True
    path.on_results(_batch(1, 0.5))
    assert ops.log == [("stop_every_trial",), ("run", ("STOP",))]


def test_stop_all_stops_every_trial_at_once_behind_a_batch_waiting_for_its_decision() -> None:
    path, ops, stopper = _stop_all_path()
    first = _batch(1, 0.5)
    path.on_results(first)
    stopper.all = True
    last = _rows(2, 2, done_at=2)  # decided without the scheduler, so it waits behind the first batch
    ops.log.clear()
    path.on_results(last)
    assert ops.log == [("stop_every_trial",), ("run", ("STOP",))], "not held until the first batch is decided"
    assert _waiting(path) == {"a": [first, last]}


def _three(loss_at_3: float = 0.5, done_at: int = 0) -> TrialResults:
    """A batch of results at iterations 1-3 (the trial ran ahead of its decisions)."""
    return TrialResults("a", 1, 1, tuple({"loss": loss_at_3 if i == 3 else 0.5, "training_iteration": i,
                                          "done": i == done_at} for i in (1, 2, 3)), None)


def test_a_stop_marks_the_last_result_the_scheduler_decided_done_not_the_batchs_last() -> None:
    path, ops, _store = _path()
    batch = _three(done_at=3)
    path.on_results(batch)
    assert ops.asked == [(1, 2)]
    path.decided("a", 1, 1, Decision.STOP, [])
    assert [r["done"] for r in batch.results] == [False, True, True]
    assert path.table.get("a").stop_row == 2, "the trial stops at the result the scheduler stopped"


def test_a_stop_criterion_met_inside_a_batch_marks_the_batchs_last_row_done() -> None:
    path, ops, _store = _path(stopper=StopBelow(0.1))
    batch = _three(loss_at_3=0.05)
    path.on_results(batch)
    assert ops.asked == [(1, 2)]
    path.decided("a", 1, 1, Decision.CONTINUE, [])
    assert [r["done"] for r in batch.results] == [False, False, True]
    assert path.table.get("a").stop_row == 3
    assert ("run", ("STOP",)) in ops.log


class FailingStore(FakeStore):
    """A store whose result rows cannot be written (the storage went away)."""

    def on_results(self, rec: TrialRecord, results: tuple[dict[str, Any], ...]) -> str | None:
        return "storage: result.json could not be written"


class Aborts(FakeOps):
    """A ``FakeOps`` whose ``abort`` moves the experiment to ABORTING, as the core's does."""

    def abort(self, reason: str) -> None:
        super().abort(reason)
        self.phase = ExperimentPhase.ABORTING


def test_a_batch_that_cannot_be_written_aborts_and_its_decision_takes_no_effect() -> None:
    path, ops, store = _path()
    failing = FailingStore(store.spec)
    path.ops = ops = Aborts(failing)
    first, second = _batch(1, 0.5), _batch(2, 0.4)
    path.on_results(first)
    path.on_results(second)
    ops.log.clear()
    assert path.decided("a", 1, 1, Decision.CONTINUE, [Effect(EffectKind.HOLD, "a")]) is None, "the run is ending"
    assert ops.log == [("abort", "storage: result.json could not be written")], \
        "neither the searcher, the callbacks, the hook's requests nor the decision after a failed write"
    assert path.unwritten == {"a"}
    ops.log.clear()
    path.log_unlogged("a")  # the end logs what is left: nothing of a trial whose history has a gap
    assert ops.log == [] and path.unlogged == {}


def test_a_direct_reply_for_an_ended_run_is_not_kept() -> None:
    path, ops, _store = _path()
    path.orders.direct = "/tmp/scheduler.sock"
    reply = SchedulerReply(0, HookKind.RESULT, "a", Decision.CONTINUE, ())
    path.decided_results(DecidedResults((DirectDecision("a", 0, 1, reply),)))  # run 0 is not the running one
    assert len(path.joined) == 0 and ops.log == []


class RaisingStore(FakeStore):
    """A store that raises writing result rows (the core ends the experiment with the exception)."""

    def on_results(self, rec: TrialRecord, results: tuple[dict[str, Any], ...]) -> str | None:
        raise OSError("disk full")


def test_a_batch_whose_write_raised_leaves_no_later_row_written() -> None:
    path, _ops, store = _path()
    path.ops = FakeOps(RaisingStore(store.spec))
    path.link.hooks = frozenset()  # logged at once
    with pytest.raises(OSError):
        path.on_results(_batch(1, 0.5))
    assert path.unwritten == {"a"}
    path.on_results(_batch(2, 0.4))  # a later row would leave a gap in the history: none is written


def test_a_run_ending_before_its_decisions_marks_a_stop_criterion_hit_done() -> None:
    path, _ops, store = _path(stopper=StopBelow(0.1))
    first, hit = _batch(1, loss=0.5), _batch(2, loss=0.05)
    path.on_results(first)
    path.on_results(hit)
    path.log_unlogged("a")
    assert store.logged == [("a", first.results), ("a", hit.results)]
    assert "done" not in first.results[-1] and hit.results[-1]["done"] is True
    assert path.table.get("a").stop_row == 2


def test_a_runs_end_forgets_the_direct_replies_kept_for_it() -> None:
    path, _ops, _store = _path()
    path.orders.direct = "/tmp/scheduler.sock"
    reply = SchedulerReply(0, HookKind.RESULT, "a", Decision.CONTINUE, ())
    path.decided_results(DecidedResults((DirectDecision("a", 1, 1, reply),)))  # its batch is not here yet
    assert len(path.joined) == 1
    path.forget("a")
    assert len(path.joined) == 0


def test_a_runs_end_keeps_the_batch_held_for_the_drivers_answer_until_it_comes() -> None:
    # Ray logs a stopping result after the callbacks changed it: the experiment waits for the driver's answer
    path, _ops, _store = _path()
    batch = _batch(1, 0.5)
    path.gate.on = True
    path.gate.hold(batch, Decision.STOP)
    path.drop_held("a")
    assert path.answers_due() and path.gate.held == {}


def test_a_run_ending_before_its_decision_marks_the_last_row_of_a_batch_with_a_hit_done() -> None:
    path, _ops, _store = _path(stopper=StopBelow(0.1))
    batch = _three(loss_at_3=0.05)
    path.on_results(batch)
    path.log_unlogged("a")
    assert [r["done"] for r in batch.results] == [False, False, True]


class Feeds(FakeOps):
    """A ``FakeOps`` whose trial events go to the driver's feed, as the core's do."""

    def __init__(self, store: FakeStore, feed: DriverFeed) -> None:
        super().__init__(store)
        self.feed = feed

    def event(self, kind: EventType, rec: TrialRecord, result: dict[str, Any] | None = None,
              checkpoint: str | None = None) -> None:
        super().event(kind, rec, result, checkpoint)
        self.feed.event(kind, rec.snapshot(), result, checkpoint)


def test_a_decision_held_for_the_drivers_callbacks_sends_them_the_result_at_once() -> None:
    # the trial waits in report() for that answer: the result must not wait for the next tick's batch
    path, ops, store = _path()
    path.link.hooks = frozenset()  # decided at once
    path.feed = DriverFeed(True, False)
    path.ops = ops = Feeds(store, path.feed)
    path.gate.on = True
    path.on_results(_batch(1, 0.5))
    assert list(path.gate.held) == ["a"] and ("emit", 1) in ops.log and path.feed.events == []
    assert not any(e[0] == "run" for e in ops.log), "the decision waits for the driver's answer"


def test_a_sources_save_landing_applies_the_clone_waiting_for_it_and_fills_its_slot() -> None:
    path, ops, _store = _path()
    table, waits = path.table, path.clone_waits
    table.add("b", {"x": 2})
    table.start("b")
    assert table.results("b", 1, 1, ({"loss": 0.9, "training_iteration": 1},), None)
    table.get("a").saves_inflight = 1  # PBT asked the source to save
    clone = SchedulerAction(ActionKind.CLONE, "b", source_id="a", new_config={"x": 1}, wait_for_source=True)
    table.request(clone, None, waiting=waits.would_wait(clone))
    waits.note(clone)
    table.decided("b", 1, 1, Decision.CONTINUE)
    table.ended("b", 1, EndReason.STOPPED)  # the exploit's pause lands before the source's save
    assert "b" in waits
    ops.log.clear()
    saved = CheckpointRef("mem://a/checkpoint_000000", 0, 1)
    path.on_saved(TrialSaved("a", 1, 2, saved, SaveKind.SCHEDULER))
    assert ("run", ("CLONED",)) in ops.log and ops.log[-1] == ("fill",), "the clone may start now"
    assert "b" not in waits and table.get("b").checkpoint == saved


def test_a_save_no_clone_waits_for_asks_for_no_fill() -> None:
    path, ops, _store = _path()
    path.table.get("a").saves_inflight = 1
    path.on_saved(TrialSaved("a", 1, 1, CheckpointRef("mem://a/checkpoint_000000", 0, 1), SaveKind.SCHEDULER))
    assert ("fill",) not in ops.log


def test_the_drivers_answer_for_a_run_that_ended_lets_the_experiment_end() -> None:
    path, ops, _store = _path()
    batch = _batch(1, 0.5)
    path.gate.on = True
    path.gate.hold(batch, Decision.STOP)
    path.drop_held("a")  # the run ended (a stopping result) before the driver answered
    ops.log.clear()
    path.callback_answer(CallbackAnswer("a", 1, 9, checkpoint=False))  # another batch's: stale
    assert ops.log == [] and path.answers_due()
    path.callback_answer(CallbackAnswer("a", 1, 1, checkpoint=False))
    assert ops.log == [("fill",)] and not path.answers_due(), "the experiment was waiting only for this answer"


def test_a_callbacks_checkpoint_that_cannot_be_saved_does_not_hold_the_decision() -> None:
    # the trial is being stopped (a stopper's stop_all meanwhile): no save can be asked of it, so the decision
    # held for the driver's answer is released at once, never left waiting for a save that will not land
    path, ops, store = _path()
    path.link.hooks = frozenset()
    path.feed = DriverFeed(True, False)
    path.ops = ops = Feeds(store, path.feed)
    path.gate.on = True
    path.on_results(_batch(1, 0.5))
    assert list(path.gate.held) == ["a"]
    ops.run(path.table.request(SchedulerAction(ActionKind.STOP, "a")))
    ops.log.clear()
    path.callback_answer(CallbackAnswer("a", 1, 1, checkpoint=True))
    assert path.gate.held == {} and ops.log == []
    assert store.amended == [("a", {"loss": 0.5, "training_iteration": 1, "should_checkpoint": True})], \
        "the logged row carries what the callback set (Ray 2.60 logs after the callbacks)"
    assert path.table.get("a").last_result.get("should_checkpoint") is True


def test_a_row_that_says_should_checkpoint_already_is_not_written_again() -> None:
    path, _ops, store = _path()
    path.link.hooks = frozenset()
    path.feed = DriverFeed(True, False)
    path.ops = Feeds(store, path.feed)
    path.gate.on = True
    path.on_results(TrialResults("a", 1, 1, ({"loss": 0.5, "training_iteration": 1, "should_checkpoint": True},),
                                 None))
    path.callback_answer(CallbackAnswer("a", 1, 1, checkpoint=True))
    assert store.amended == []


class AmendFails(FakeStore):
    def amend_result(self, rec: TrialRecord, result: dict[str, Any]) -> str | None:
        return "storage: result.json could not be rewritten"


def test_the_answer_for_a_retried_runs_row_marks_that_row_not_the_new_runs_result() -> None:
    path, ops, store = _path()
    path.ops = ops = FakeOps(AmendFails(store.spec))
    path.table.max_failures = 1
    batch = _batch(1, 0.5)
    path.gate.on = True
    path.gate.hold(batch, Decision.CONTINUE)
    assert path.table.results("a", 1, 1, batch.results, None)
    path.drop_held("a")
    path.table.ended("a", 1, EndReason.FAILED, None, "boom", "")  # retried from scratch: last result rewound
    path.table.start("a")
    assert path.table.get("a").last_result == {}
    path.callback_answer(CallbackAnswer("a", 1, 1, checkpoint=True))
    assert path.table.get("a").last_result == {}
    assert ops.log == [("abort", "storage: result.json could not be rewritten"), ("fill",)]
