"""The controller's trial state machine, driven by hypothesis with a model trial actor."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors._engine.lifecycle import Effect, EffectKind, Phase, TrialTable
from actors._engine.marks import MAX_MARKS, Mark, MarkKind
from actors._engine.reducer import Decision
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, CheckpointRef, EndReason, SaveKind, SchedulerAction

T = "t0"


class TrialMachine(RuleBasedStateMachine):
    """One trial; a model actor answers the table's effects like the real TrialActor would."""

    def __init__(self) -> None:
        super().__init__()
        self.table = TrialTable(max_failures=3)  # (retries: runs that start after one that held a save, a pause)
        self.table.add(T, {"x": 1})
        self.seq = 0
        self.unacked: list[int] = []  # batches waiting for a decision (window 1: at most one)
        self.saves = 0  # SAVE effects not yet answered
        self.stop_sent = False
        self.ended = True
        self.strongest = Decision.CONTINUE  # strongest decision merged during the current run
        self.iteration = 0
        self.marks_at_abort: int | None = None  # how many marks the trial had when the driver aborted

    @property
    def rec(self):
        return self.table.get(T)

    def _apply(self, effects) -> None:
        for e in effects:
            if e.kind is EffectKind.START:
                self.ended = False
                self.stop_sent = False
                self.saves = 0
                self.unacked = []
                self.strongest = Decision.CONTINUE
            elif e.kind is EffectKind.PROCEED:
                assert self.strongest is Decision.CONTINUE, "a trial proceeded past a PAUSE/STOP"
                assert self.rec.phase is Phase.STEPPING
            elif e.kind is EffectKind.SAVE:
                self.saves += 1
            elif e.kind is EffectKind.STOP:
                self.stop_sent = True

    def _note(self, d: Decision) -> None:
        if self.rec.status is TrialStatus.RUNNING:
            self.strongest = max(self.strongest, d)

    @precondition(lambda self: self.rec.status in (TrialStatus.PENDING, TrialStatus.PAUSED))
    @rule()
    def start(self) -> None:
        self._apply(self.table.start(T))

    @precondition(lambda self: not self.ended and not self.stop_sent and not self.unacked)
    @rule(with_ckpt=st.booleans())
    def report(self, with_ckpt: bool) -> None:
        self.seq += 1
        self.iteration += 1
        ck = CheckpointRef(f"c{self.seq}", self.seq, self.iteration) if with_ckpt else None
        if self.table.results(T, self.rec.run_id, self.seq, ({"training_iteration": self.iteration},), ck):
            self.unacked.append(self.seq)

    @precondition(lambda self: bool(self.unacked))
    @rule(d=st.sampled_from(list(Decision)))
    def scheduler_decides(self, d: Decision) -> None:
        seq = self.unacked.pop(0)
        self._note(d)
        self._apply(self.table.decided(T, self.rec.run_id, seq, d))

    @rule(kind=st.sampled_from(list(ActionKind)), ckpt=st.booleans())
    def scheduler_requests(self, kind: ActionKind, ckpt: bool) -> None:
        if kind is ActionKind.CLONE:
            return
        if kind in (ActionKind.PAUSE, ActionKind.STOP):
            self._note(Decision.PAUSE if kind is ActionKind.PAUSE else Decision.STOP)
        idle = self.rec.status in (TrialStatus.PENDING, TrialStatus.PAUSED)
        computing = self.rec.status is TrialStatus.RUNNING and self.rec.phase is Phase.STEPPING and not self.unacked
        before = len(self.rec.marks)
        if kind is ActionKind.RESOURCES:  # a new size is no decision: nothing else of the trial changes
            was = (self.rec.status, self.rec.phase, self.rec.pending, self.rec.resources)
            assert self.table.request(SchedulerAction(kind, T, ckpt, info={"resources": {"cpu": 2.0}})) == []
            now = (self.rec.status, self.rec.phase, self.rec.pending)
            assert now == was[:3] and self.rec.resources == (was[3] if was[0].is_finished else {"cpu": 2.0})
            return
        effects = self.table.request(SchedulerAction(kind, T, ckpt))
        self._apply(effects)
        stopped_idle = idle and kind is ActionKind.STOP
        assert [m.kind for m in self.rec.marks[before:]] == ([MarkKind.STOP] if stopped_idle else [])
        if computing and kind in (ActionKind.PAUSE, ActionKind.STOP):
            # asked while in its own code, no decision pending: the save or stop goes out now
            # (or it joins the checkpoint_trial save in flight), it never waits for another report()
            assert self.rec.phase is not Phase.STEPPING
            sent = [e.kind for e in effects]
            assert sent in ([EffectKind.SAVE], [EffectKind.STOP]) or (sent == [] and self.saves > 0)

    @precondition(lambda self: self.marks_at_abort is None)
    @rule()
    def driver_aborts(self) -> None:
        self.marks_at_abort = len(self.rec.marks)
        self._note(Decision.STOP)
        self._apply(self.table.abort_all())

    @precondition(lambda self: self.saves > 0 and not self.ended)
    @rule()
    def save_lands(self) -> None:
        self.saves -= 1
        self._apply(self.table.saved(T, self.rec.run_id, CheckpointRef("s", 99, self.iteration)))

    @precondition(lambda self: self.stop_sent and not self.ended)
    @rule()
    def stopped(self) -> None:
        strongest = self.strongest
        self.ended = True
        before = len(self.rec.marks)
        self._apply(self.table.ended(T, self.rec.run_id, EndReason.STOPPED))
        added = [m.kind for m in self.rec.marks[before:]]
        if strongest is Decision.STOP:
            assert self.rec.status is TrialStatus.TERMINATED
            assert added == ([] if self.marks_at_abort is not None else [MarkKind.STOP])
        else:
            assert strongest is Decision.PAUSE
            assert self.rec.status in (TrialStatus.PAUSED, TrialStatus.PENDING)
            assert added == [MarkKind.PAUSE]

    @precondition(lambda self: not self.ended and not self.stop_sent)
    @rule(failed=st.booleans())
    def trainable_ends(self, failed: bool) -> None:
        self.ended = True
        reason = EndReason.FAILED if failed else EndReason.COMPLETED
        before = len(self.rec.marks)
        stopping = self.rec.status is TrialStatus.RUNNING and self.rec.pending is Decision.STOP
        self._apply(self.table.ended(T, self.rec.run_id, reason, error="boom" if failed else None))
        # a failure while a stop is on its way ends the trial as the stop would (TERMINATED, a STOP mark)
        expected = ([MarkKind.STOP] if stopping else [MarkKind.FAIL]) if failed else []
        assert [m.kind for m in self.rec.marks[before:]] == expected

    @invariant()
    def slot_is_clear_outside_running(self) -> None:
        """Everything a run holds is cleared in the one place a status changes: a save that died with its run is
        never waited for by the next one, a pause or resume asked of it never taken by the next."""
        rec = self.rec
        if rec.status is not TrialStatus.RUNNING:
            assert rec.pending is Decision.CONTINUE
            assert rec.phase is Phase.IDLE
            assert (rec.saves_inflight, rec.inflight, rec.pause_checkpoint) == (0, [], False)
            assert rec.status is TrialStatus.PAUSED or not rec.resume_requested

    @invariant()
    def slot_never_below_what_was_merged(self) -> None:
        if self.rec.status is TrialStatus.RUNNING:
            assert self.rec.pending >= self.strongest or self.strongest is Decision.CONTINUE
            assert self.rec.pending == self.strongest

    @invariant()
    def a_stepping_trial_with_a_pause_or_stop_has_a_decision_on_its_way(self) -> None:
        """Else the slot would wait for a report() that may never come (the grace clock never starts)."""
        if self.rec.status is TrialStatus.RUNNING and self.rec.phase is Phase.STEPPING:
            assert self.rec.pending is Decision.CONTINUE or self.unacked

    @invariant()
    def saving_means_a_save_is_in_flight(self) -> None:
        if self.rec.phase is Phase.SAVING:
            assert self.saves > 0

    @invariant()
    def marks_are_bounded_and_none_follow_an_abort(self) -> None:
        assert len(self.rec.marks) <= MAX_MARKS
        if self.marks_at_abort is not None:
            assert len(self.rec.marks) == self.marks_at_abort


TrialMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_trial_state_machine = TrialMachine.TestCase


def _run_to_result(table: TrialTable, seq: int = 1):
    table.start(T)
    rec = table.get(T)
    assert table.results(T, rec.run_id, seq, ({"training_iteration": seq},), CheckpointRef("c", 0, seq))
    return rec


def test_pause_from_hook_then_noop_pauses_with_checkpoint() -> None:
    """The Ray Tune hang: pause_trial(should_checkpoint=True) inside on_trial_result, hook returns NOOP."""
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    effects = table.request(SchedulerAction(ActionKind.PAUSE, T, True))
    # the result's decision is in flight: a trial running ahead is held at its next result (HOLD)
    assert [e.kind for e in effects] == [EffectKind.HOLD]
    effects = table.decided(T, rec.run_id, 1, Decision.NOOP)
    assert [e.kind for e in effects] == [EffectKind.SAVE]
    assert rec.phase is Phase.SAVING
    # a CONTINUE/NOOP arriving while the save is in flight merges, never overwrites
    assert table.decided(T, rec.run_id, 1, Decision.CONTINUE) == []
    assert [e.kind for e in table.saved(T, rec.run_id, CheckpointRef("c2", 1, 1))] == [EffectKind.STOP]
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED and rec.checkpoint.path == "c2"


def test_pause_of_a_trial_computing_in_its_own_code_saves_then_stops_at_once() -> None:
    """pause_trial(other) from another trial's hook, as Ray's TuneController.pause_trial: the trial's
    result was decided (it went on computing), so no decision point is coming: SAVE now, then STOP."""
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    assert [e.kind for e in table.decided(T, rec.run_id, 1, Decision.CONTINUE)] == [EffectKind.PROCEED]
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.PAUSE, T, True))] == [EffectKind.SAVE]
    assert rec.phase is Phase.SAVING
    assert [e.kind for e in table.saved(T, rec.run_id, CheckpointRef("c2", 1, 1))] == [EffectKind.STOP]
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED and rec.checkpoint.path == "c2"
    # without a checkpoint: the stop goes out at once
    table.request(SchedulerAction(ActionKind.RESUME, T))
    table.start(T)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.PAUSE, T, False))] == [EffectKind.STOP]


def test_pause_joining_a_checkpoint_save_in_flight_stops_when_it_lands() -> None:
    """A PAUSE merged while a checkpoint_trial save is in flight does not save twice nor wait for
    a report(): the trial enters SAVING now and is stopped when that save lands."""
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    table.decided(T, rec.run_id, 1, Decision.CONTINUE)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.CHECKPOINT, T))] == [EffectKind.SAVE]
    assert table.request(SchedulerAction(ActionKind.PAUSE, T, True)) == []
    assert rec.phase is Phase.SAVING
    assert [e.kind for e in table.saved(T, rec.run_id, CheckpointRef("c2", 1, 1))] == [EffectKind.STOP]
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED and rec.checkpoint.path == "c2"


def test_stop_during_save_wins() -> None:
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    table.decided(T, rec.run_id, 1, Decision.PAUSE)
    rec.pause_checkpoint = True
    table2 = TrialTable()
    table2.add(T, {})
    rec = _run_to_result(table2)
    table2.request(SchedulerAction(ActionKind.PAUSE, T, True))
    assert [e.kind for e in table2.decided(T, rec.run_id, 1, Decision.NOOP)] == [EffectKind.SAVE]
    table2.request(SchedulerAction(ActionKind.STOP, T))
    table2.request(SchedulerAction(ActionKind.PAUSE, T, True))  # never downgrades STOP
    assert rec.pending is Decision.STOP
    table2.saved(T, rec.run_id, None)
    table2.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.TERMINATED


def test_pause_of_paused_trial_is_harmless() -> None:
    table = TrialTable()
    table.add(T, {})
    table.request(SchedulerAction(ActionKind.PAUSE, T, True))
    assert table.get(T).status is TrialStatus.PAUSED
    assert table.request(SchedulerAction(ActionKind.PAUSE, T, True)) == []
    assert table.get(T).status is TrialStatus.PAUSED


def test_resume_during_pause_is_deferred_not_dropped() -> None:
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    table.request(SchedulerAction(ActionKind.PAUSE, T, True))
    table.decided(T, rec.run_id, 1, Decision.NOOP)
    table.request(SchedulerAction(ActionKind.RESUME, T))
    table.saved(T, rec.run_id, None)
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PENDING


def test_failure_retries_then_errors() -> None:
    table = TrialTable(max_failures=1)
    table.add(T, {})
    rec = _run_to_result(table)
    table.ended(T, rec.run_id, EndReason.FAILED, error="x")
    assert rec.status is TrialStatus.PENDING and rec.num_failures == 1
    table.start(T)
    assert rec.iteration == 1  # resumes from the checkpoint taken at iteration 1
    effects = table.ended(T, rec.run_id, EndReason.FAILED, error="y")
    assert rec.status is TrialStatus.ERROR
    assert EffectKind.ERROR in [e.kind for e in effects]


def test_a_retried_run_inherits_no_save_in_flight_from_the_run_that_failed() -> None:
    """The checkpoint save asked of a run that then failed died with it: the retry's pause saves anew (waiting for
    the dead save, it would never stop and the pause would be lost)."""
    table = TrialTable(max_failures=1)
    table.add(T, {})
    table.start(T)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.CHECKPOINT, T))] == [EffectKind.SAVE]
    table.ended(T, 1, EndReason.FAILED, error="boom")
    table.start(T)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.PAUSE, T))] == [EffectKind.SAVE]


def test_a_resume_asked_of_a_run_that_failed_while_pausing_does_not_cancel_the_retrys_pause() -> None:
    table = TrialTable(max_failures=1)
    table.add(T, {})
    rec = _run_to_result(table)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.PAUSE, T))] == [EffectKind.HOLD]
    table.request(SchedulerAction(ActionKind.RESUME, T))  # (deferred to the pause's end)
    table.ended(T, rec.run_id, EndReason.FAILED, error="boom")  # the run fails before its pause lands
    assert rec.status is TrialStatus.PENDING
    table.start(T)
    table.request(SchedulerAction(ActionKind.PAUSE, T))
    table.saved(T, rec.run_id, None)
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED  # (the earlier run's resume would have made it PENDING)


# ---------------------------------------------------------------------------------- marks
def _pause_cycle(table: TrialTable, iteration: int) -> None:
    """Start, report ``iteration``, PAUSE (with its checkpoint), land the save, end: PAUSED."""
    table.start(T)
    rec = table.get(T)
    assert table.results(T, rec.run_id, iteration, ({"training_iteration": iteration},), None)
    assert [e.kind for e in table.decided(T, rec.run_id, iteration, Decision.PAUSE)] == [EffectKind.SAVE]
    assert [e.kind for e in table.saved(T, rec.run_id, CheckpointRef("c", iteration, iteration))] == [
        EffectKind.STOP]
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED


def test_a_pause_that_took_effect_is_marked_at_its_iteration() -> None:
    table = TrialTable()
    table.add(T, {})
    _pause_cycle(table, 3)
    assert table.get(T).marks == [Mark(MarkKind.PAUSE, 3)]
    _pause_cycle(table, 5)  # resumed from 3, reported up to 5, paused again
    assert table.get(T).marks == [Mark(MarkKind.PAUSE, 3), Mark(MarkKind.PAUSE, 5)]


def test_scheduler_and_stopper_stops_are_marked() -> None:
    table = TrialTable()
    for tid in ("a", "b", "c", "d"):
        table.add(tid, {})
    for tid in ("a", "b"):
        table.start(tid)
        assert table.results(tid, 1, 1, ({"training_iteration": 1},), None)
        assert table.results(tid, 1, 2, ({"training_iteration": 2},), None)
    assert [e.kind for e in table.decided("a", 1, 2, Decision.STOP)] == [EffectKind.STOP]  # scheduler's answer
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.STOP, "b"))] == [EffectKind.STOP]  # stopper
    for tid in ("a", "b"):
        table.ended(tid, 1, EndReason.STOPPED)
        assert table.get(tid).status is TrialStatus.TERMINATED
        assert table.get(tid).marks == [Mark(MarkKind.STOP, 2)]
    table.request(SchedulerAction(ActionKind.PAUSE, "d"))
    for tid in ("c", "d"):  # PENDING and PAUSED trials stopped by a request
        assert [e.kind for e in table.request(SchedulerAction(ActionKind.STOP, tid))] == [EffectKind.REMOVE]
        assert table.get(tid).marks == [Mark(MarkKind.STOP, 0)]


def test_a_trial_that_finished_by_itself_has_no_marks() -> None:
    table = TrialTable()
    for tid in ("a", "b", "c"):
        table.add(tid, {})
        table.start(tid)
    table.results("a", 1, 1, ({"training_iteration": 1},), None)
    table.ended("a", 1, EndReason.COMPLETED)
    for tid, decision in (("b", Decision.STOP), ("c", Decision.PAUSE)):  # decided on its own last result
        table.results(tid, 1, 1, ({"training_iteration": 1, "done": True},), None)
        table.decided(tid, 1, 1, decision)
        table.ended(tid, 1, EndReason.STOPPED)
    for tid in ("a", "b", "c"):
        assert table.get(tid).status is TrialStatus.TERMINATED and table.get(tid).marks == []


def test_an_exploit_is_marked_with_its_source_and_not_as_a_pause() -> None:
    table = TrialTable()
    table.add(T, {"lr": 1})
    table.add("idle", {"lr": 1})
    rec = _run_to_result(table, seq=4)
    source = CheckpointRef("src", 0, 2)
    clone = SchedulerAction(ActionKind.CLONE, T, source_id="best", new_config={"lr": 2}, info={"source": "best"})
    table.request(clone, source)
    assert [e.kind for e in table.decided(T, rec.run_id, 4, Decision.NOOP)] == [EffectKind.STOP]
    ended = table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PENDING and rec.config == {"lr": 2}
    assert rec.marks == [Mark(MarkKind.EXPLOIT, 4, "best")]
    # (the store then abandons what the trial's runs committed unseen: of the lineage it leaves)
    assert Effect(EffectKind.CLONED, T) in ended
    cloned = table.request(SchedulerAction(ActionKind.CLONE, "idle", source_id="best", new_config={"lr": 3}), source)
    assert table.get("idle").marks == [Mark(MarkKind.EXPLOIT, 0, "best")]  # not running: cloned at once
    assert cloned == [Effect(EffectKind.CLONED, "idle")]


def test_a_failed_run_is_marked_and_retried() -> None:
    table = TrialTable(max_failures=1)
    table.add(T, {})
    rec = _run_to_result(table, seq=2)
    table.ended(T, rec.run_id, EndReason.FAILED, error="x")
    assert rec.status is TrialStatus.PENDING and rec.marks == [Mark(MarkKind.FAIL, 2)]


def test_abort_all_records_no_marks() -> None:
    """A driver abort is not the scheduler's doing; a restore resumes these trials."""
    table = TrialTable()
    for tid in ("run", "saving", "pending", "paused"):
        table.add(tid, {})
    for tid in ("run", "saving"):
        table.start(tid)
        table.results(tid, 1, 1, ({"training_iteration": 1},), None)
    table.decided("saving", 1, 1, Decision.PAUSE)  # a pause's save in flight when the abort comes
    table.request(SchedulerAction(ActionKind.PAUSE, "paused"))
    effects = table.abort_all()
    assert sorted(e.trial_id for e in effects if e.kind is EffectKind.STOP) == ["run", "saving"]
    table.saved("saving", 1, None)
    table.ended("run", 1, EndReason.STOPPED)
    table.ended("saving", 1, EndReason.FAILED, error="killed")
    assert table.all_finished()
    assert all(rec.marks == [] for rec in table.trials.values())


def test_marks_are_bounded_oldest_dropped() -> None:
    table = TrialTable()
    table.add(T, {})
    for i in range(1, MAX_MARKS + 6):
        _pause_cycle(table, i)
    marks = table.get(T).marks
    assert len(marks) == MAX_MARKS and marks[0] == Mark(MarkKind.PAUSE, 6) and marks[-1].iteration == MAX_MARKS + 5


def test_a_snapshot_is_the_dataclass_built_from_the_record_and_a_copy() -> None:
    """``TrialRecord.snapshot`` fills the frozen dataclass's fields directly (no per-field
    ``object.__setattr__``): the same fields in the same order as the constructor, copies of the
    config and the last result, every other field at its default."""
    import dataclasses
    import pickle

    from actors._engine.lifecycle import TrialRecord
    from actors._engine.trial import TrialSnapshot

    for rec in (TrialRecord("t0", {"lr": 0.1}),
                TrialRecord("t1", {"lr": 0.2}, TrialStatus.RUNNING, checkpoint=CheckpointRef("p", 2, 7),
                            last_result={"loss": 0.5}, num_failures=1, name="n", dirname="d", dirname_custom=True),
                TrialRecord("t2", {"lr": 0.3}, dirname="train_t2_2_lr=0.3_2026-12-05_01-02-03")):
        snap = rec.snapshot()
        want = TrialSnapshot(rec.trial_id, {**rec.config}, rec.status, {**rec.last_result}, rec.num_failures,
                             rec.checkpoint.iteration if rec.checkpoint else None, rec.name,
                             rec.dirname if rec.dirname_custom else None, dirname=rec.dirname)
        assert list(vars(snap).items()) == list(vars(want).items())
        assert [f.name for f in dataclasses.fields(TrialSnapshot)] == list(vars(snap))
        assert pickle.dumps(snap) == pickle.dumps(want) and repr(snap) == repr(want)
        assert snap.config is not rec.config and snap.last_result is not rec.last_result
        try:
            snap.status = TrialStatus.ERROR  # type: ignore[misc]
        except dataclasses.FrozenInstanceError:
            pass
        else:
            raise AssertionError("a snapshot is frozen")


def test_a_clone_source_gives_the_checkpoint_its_schedulers_last_save_gave() -> None:
    """Ray 2.60's PBT clones a source's ``last_checkpoint`` (ray/tune/schedulers/pbt.py
    ``_checkpoint_or_exploit``): the save it asked for at the source's perturbation, a paused source's
    latest checkpoint; not a checkpoint the source committed after (recorded end to end in
    tests/test_pbt_clone_iteration.py)."""
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    assert table.exploit_source(T).path == "c"  # no save asked for yet: the latest
    table.decided(T, rec.run_id, 1, Decision.CONTINUE)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.CHECKPOINT, T))] == [EffectKind.SAVE]
    assert table.exploit_source(T).path == "c"  # in flight: the latest that landed
    table.saved(T, rec.run_id, CheckpointRef("s2", 1, 1))
    assert table.results(T, rec.run_id, 2, ({"training_iteration": 2},), CheckpointRef("c3", 2, 2))
    assert table.exploit_source(T).path == "s2"  # not c3, committed after it
    # a callback's save is not the scheduler's
    table.decided(T, rec.run_id, 2, Decision.CONTINUE)
    table.request(SchedulerAction(ActionKind.CHECKPOINT, T, save=SaveKind.CALLBACK))
    table.saved(T, rec.run_id, CheckpointRef("cb", 3, 2))
    assert table.exploit_source(T).path == "s2"
    # a paused source: its latest checkpoint, at the time the scheduler asked
    table.request(SchedulerAction(ActionKind.PAUSE, T, False))
    table.ended(T, rec.run_id, EndReason.STOPPED)
    assert rec.status is TrialStatus.PAUSED
    assert table.request(SchedulerAction(ActionKind.CHECKPOINT, T)) == []
    assert table.exploit_source(T).path == "cb"


def test_a_sources_checkpoint_asked_while_its_pause_saves_is_that_pauses_save() -> None:
    """The scheduler's save asked while the source's pause is saving joins that save: its clones take what it
    commits, not the checkpoint the scheduler's save before gave."""
    table = TrialTable()
    table.add(T, {})
    rec = _run_to_result(table)
    table.decided(T, rec.run_id, 1, Decision.CONTINUE)
    table.request(SchedulerAction(ActionKind.CHECKPOINT, T))
    table.saved(T, rec.run_id, CheckpointRef("s1", 1, 1))
    assert table.results(T, rec.run_id, 2, ({"training_iteration": 2},), None)
    assert [e.kind for e in table.request(SchedulerAction(ActionKind.PAUSE, T, True))] == [EffectKind.HOLD]
    assert [e.kind for e in table.decided(T, rec.run_id, 2, Decision.NOOP)] == [EffectKind.SAVE]
    assert table.request(SchedulerAction(ActionKind.CHECKPOINT, T)) == []  # joins the pause's save
    assert [e.kind for e in table.saved(T, rec.run_id, CheckpointRef("p", 2, 2))] == [EffectKind.STOP]
    assert table.exploit_source(T).path == "p"


def test_a_retry_rewinds_the_last_result_to_where_it_restarts() -> None:
    """The rows after the checkpoint a retry restarts from are redone and dropped from the history, and so is the
    last result: the checkpoint's (none: empty), until the new run reports (a run that fails before it does ends
    with the result its history ends at)."""
    for ckpt in (CheckpointRef("c1", 1, 1, 1.0, {"training_iteration": 1, "loss": 0.5}), None):
        table = TrialTable(max_failures=1)
        table.add(T, {})
        table.start(T)
        rec = table.get(T)
        assert table.results(T, 1, 1, ({"training_iteration": 1, "loss": 0.5},), ckpt)
        assert table.results(T, 1, 2, ({"training_iteration": 2, "loss": 0.4},), None)
        table.ended(T, 1, EndReason.FAILED, error="boom")
        table.start(T)
        assert rec.last_result == ({"training_iteration": 1, "loss": 0.5} if ckpt else {})


def test_messages_of_an_earlier_run_change_nothing() -> None:
    """Results, saves, ends and process notices of a run that was replaced (a retry started) are ignored by the
    table itself, whatever let them through."""
    table = TrialTable(max_failures=-1)
    table.add(T, {})
    rec = _run_to_result(table)
    table.ended(T, rec.run_id, EndReason.FAILED, error="x")
    table.start(T)
    assert rec.run_id == 2 and rec.status is TrialStatus.RUNNING
    assert not table.results(T, 1, 5, ({"training_iteration": 5},), CheckpointRef("old", 9, 5))
    assert table.saved(T, 1, CheckpointRef("old2", 9, 5)) == []
    assert table.ended(T, 1, EndReason.COMPLETED) == []
    table.process_started(T, 1, {"pid": 1})
    assert (rec.status, rec.checkpoint.path, rec.iteration, rec.inflight, rec.started) == (
        TrialStatus.RUNNING, "c", 1, [], {})


def test_a_restart_from_a_pbt_sources_checkpoint_never_takes_the_sources_result_as_the_trials() -> None:
    """A retry (or a restored run) from the checkpoint a PBT clone copied: the rows after it that the restart
    drops are the clone's, and the last result goes back to the trial's own, never the checkpoint's (the
    source trial's result, its id and config: what ``Result.metrics`` showed, found by the sweep, seed 17224)."""
    source = CheckpointRef("t0/checkpoint_000002", 2, 3, 3.0, {"training_iteration": 3, "trial_id": "t0"})
    own = {"training_iteration": 5, "trial_id": "t1", "loss": 0.5}
    table = TrialTable(max_failures=-1)
    rec = table.add("t1", {"lr": 0.1})
    rec.checkpoint, rec.last_result = source, dict(own)  # after a Tuner.restore: no clone seen in this run
    table.start("t1")
    assert rec.last_result == own and rec.iteration == 3
    table2 = TrialTable(max_failures=-1)
    rec2 = table2.add("t1", {"lr": 0.1})
    rec2.checkpoint, rec2.last_result = source, {"training_iteration": 4, "trial_id": "t1", "loss": 0.4}
    rec2.before_clone = dict(own)  # the clone's run reported 4 and failed: its retry drops that row
    table2.start("t1")
    assert rec2.last_result == own


def test_a_clone_without_any_checkpoint_restarting_keeps_its_own_rows_before_the_clone_as_its_last_result() -> None:
    """PBT cloned a trial whose source had no checkpoint (function trainables that never checkpoint), the
    clone's run reported and failed, and its retry starts from scratch: the clone's rows are dropped, the
    trial's own rows from before the clone stay (as Ray appends a clone's), so its last result is the
    last of those, not an empty one (found by the simulations without checkpoints, seed 193)."""
    own = {"training_iteration": 2, "trial_id": "t1", "loss": 0.5}
    table = TrialTable(max_failures=-1)
    rec = table.add("t1", {"lr": 0.1})
    rec.last_result = {"training_iteration": 3, "trial_id": "t1", "loss": 0.4}
    rec.before_clone = dict(own)
    table.start("t1")
    assert rec.last_result == own and rec.iteration == 0
    never_cloned = TrialTable(max_failures=-1)
    rec2 = never_cloned.add("t2", {"lr": 0.1})
    rec2.last_result = {"training_iteration": 3, "trial_id": "t2"}
    never_cloned.start("t2")
    assert rec2.last_result == {}


def test_a_snapshot_has_rays_status_constants() -> None:
    """A plugin ported from Ray compares ``trial.status == Trial.PAUSED`` or ``trial.PAUSED``."""
    from actors._engine.trial import TrialSnapshot

    snap = TrialTable().add("t1", {}).snapshot()
    assert snap.status == snap.PENDING == TrialSnapshot.PENDING == "PENDING"
    assert [TrialSnapshot.RUNNING, snap.PAUSED, snap.TERMINATED, snap.ERROR] == ["RUNNING", "PAUSED", "TERMINATED",
                                                                                 "ERROR"]


def test_rays_trial_class_for_plugins_is_the_snapshot() -> None:
    """``from ray.tune.experiment import Trial`` becomes ``actors.experiment.Trial`` (audition migrate):
    isinstance and the status constants work on what hooks are given."""
    from actors.experiment import Trial

    snap = TrialTable().add("t1", {}).snapshot()
    assert isinstance(snap, Trial) and snap.status == Trial.PENDING
