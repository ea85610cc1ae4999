"""The controller's trial state machine, driven by hypothesis with a model trial actor."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actors._lifecycle import EffectKind, Phase, TrialTable
from actors._reducer import Decision
from actors._trial import TrialStatus
from actors.messages import ActionKind, CheckpointRef, EndReason, SchedulerAction

T = "t0"


class TrialMachine(RuleBasedStateMachine):
    """One trial; a model actor answers the table's effects like the real TrialActor would."""

    def __init__(self) -> None:
        super().__init__()
        self.table = TrialTable(max_failures=1)
        self.table.add(T, {"x": 1})
        self.seq = 0
        self.unacked: list[int] = []  # batches waiting for a decision (window 1: at most one)
        self.saves = 0  # SAVE effects not yet answered
        self.stop_sent = False
        self.ended = True
        self.strongest = Decision.CONTINUE  # strongest decision merged during the current run
        self.iteration = 0

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
        self._apply(self.table.request(SchedulerAction(kind, T, ckpt)))

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
        self._apply(self.table.ended(T, self.rec.run_id, EndReason.STOPPED))
        if strongest is Decision.STOP:
            assert self.rec.status is TrialStatus.TERMINATED
        else:
            assert strongest is Decision.PAUSE
            assert self.rec.status in (TrialStatus.PAUSED, TrialStatus.PENDING)

    @precondition(lambda self: not self.ended and not self.stop_sent)
    @rule(failed=st.booleans())
    def trainable_ends(self, failed: bool) -> None:
        self.ended = True
        reason = EndReason.FAILED if failed else EndReason.COMPLETED
        self._apply(self.table.ended(T, self.rec.run_id, reason, error="boom" if failed else None))

    @invariant()
    def slot_is_clear_outside_running(self) -> None:
        if self.rec.status is not TrialStatus.RUNNING:
            assert self.rec.pending is Decision.CONTINUE
            assert self.rec.phase is Phase.IDLE

    @invariant()
    def slot_never_below_what_was_merged(self) -> None:
        if self.rec.status is TrialStatus.RUNNING:
            assert self.rec.pending >= self.strongest or self.strongest is Decision.CONTINUE
            assert self.rec.pending == self.strongest

    @invariant()
    def saving_means_a_save_is_in_flight(self) -> None:
        if self.rec.phase is Phase.SAVING:
            assert self.saves > 0


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
    effects += table.decided(T, rec.run_id, 1, Decision.NOOP)
    assert [e.kind for e in effects] == [EffectKind.SAVE]
    assert rec.phase is Phase.SAVING
    # a CONTINUE/NOOP arriving while the save is in flight merges, never overwrites
    assert table.decided(T, rec.run_id, 1, Decision.CONTINUE) == []
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
