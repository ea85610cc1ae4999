"""``ResultPath`` (actors/_engine/results.py) alone, driven through a fake ``CoreOps`` port that records what
the result path asks of the core: Ray Tune's order for a batch (the stop criteria before the scheduler,
logging when the decision is known, the hook's requests before the decision). No core."""

from __future__ import annotations

from typing import Any

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
    CheckpointRef,
    DecidedResults,
    DirectDecision,
    EndReason,
    EventType,
    HookKind,
    SchedulerReply,
    TrialResults,
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
    assert [e for e in ops.log if e[0] == "searcher"] == [("searcher", "on_trial_result", 1)]
