"""``ExperimentCore`` constructed directly and driven event by event, with explicit ``now`` values.

The test plays the scheduler (``SchedulerReady``/``SchedulerReply``) and the trials
(``TrialProcess``/``TrialResults``/``TrialEnded``) and checks the commands the core gives back.
No actor system, no threads, no clock: see tests/_core_harness.py.
"""

from __future__ import annotations

import pytest

from actors._engine.core import ABORT_SAVE_TIMEOUT_S, SCHEDULER, STOP_ALL_GRACE_S, ExperimentPhase
from actors._engine.feed import OUTPUT_WAIT_S
from actors._engine.marks import MarkKind
from actors._engine.reducer import Decision
from actors._engine.signals import (
    DRIVER,
    ActorGone,
    ActorKind,
    Finish,
    KillProcess,
    MemberJoined,
    ProcessesChecked,
    Reply,
    Retire,
    Send,
    Spawn,
    Start,
    Tick,
    Wake,
    WakeAfter,
)
from actors._engine.trial import TrialStatus
from actors.messages import (
    AbortExperiment,
    ActionKind,
    CheckpointRef,
    ClusterStatusRequest,
    EndReason,
    ExperimentFinished,
    HookKind,
    MemberHeartbeat,
    RunTrial,
    SaveKind,
    SchedulerAction,
    SchedulerCall,
    SchedulerReady,
    SchedulerReply,
    SchedulerSetup,
    TrialEnded,
    TrialOutput,
    TrialOutputBatch,
    TrialProceed,
    TrialProcess,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)
from tests._core_harness import ALL_HOOKS, FIFO_HOOKS, Harness, make_spec, of_type, second_choice_out, sent

S, R, D, A, F = (ExperimentPhase.STARTING, ExperimentPhase.RUNNING, ExperimentPhase.DRAINING,
                 ExperimentPhase.ABORTING, ExperimentPhase.FINISHED)


def _result(trial_id: str, run_id: int, seq: int, loss: float = 0.5) -> TrialResults:
    return TrialResults(trial_id, run_id, seq, ({"training_iteration": seq, "loss": loss},), None)


def _running(h: Harness, hooks: frozenset[HookKind] = FIFO_HOOKS, pid0: int = 4001) -> dict[str, int]:
    """Start the experiment and every trial there is room for; their trial actors' handles."""
    h.handle(Start(), at=0.0)
    h.ready(hooks)
    out = h.answer_all()
    handles = {c.msg.trial_id: c.to for c in of_type(out, Send) if isinstance(c.msg, RunTrial)}
    for i, tid in enumerate(handles):
        h.handle(TrialProcess(tid, 1, pid0 + i))
    return handles


# ---------------------------------------------------------------------------------- a whole experiment
@pytest.mark.parametrize("store", ["fake", "memory"])
def test_a_two_trial_fifo_experiment_driven_by_hand(store: str) -> None:
    """STARTING -> RUNNING -> FINISHED; FIFO implements CHOOSE and SAVE only, so every other hook is
    answered in the core without a round trip; one trial at a time, the second reusing the first's actor."""
    spec = make_spec(num_samples=2, max_concurrent=1)
    h = Harness(spec, store)
    out = h.handle(Start(), at=0.0)
    assert out[0] == Spawn(SCHEDULER, ActorKind.SCHEDULER)
    assert [type(m) for m in sent(out, SchedulerSetup, to=SCHEDULER)] == [SchedulerSetup]
    assert WakeAfter(spec.progress_interval_s, Tick.PERIODIC) in out
    assert h.phase is S and not h.core.table.trials, "nothing is suggested before the scheduler is ready"

    h.ready(FIFO_HOOKS)
    assert h.phase is R
    tids = list(h.core.table.trials)
    assert len(tids) == 2
    assert [c.kind for c in h.open_calls()] == [HookKind.CHOOSE], "ADD is not FIFO's: answered locally"

    all_out = []
    actor = None
    out = h.answer_all()
    for tid in tids:
        runs = sent(out, RunTrial)
        assert [(r.trial_id, r.run_id) for r in runs] == [(tid, 1)]
        [handle] = [c.to for c in of_type(out, Send) if isinstance(c.msg, RunTrial)]
        if actor is None:
            assert of_type(out, Spawn) == [Spawn(handle, ActorKind.TRIAL, None)]
            actor = handle
        else:
            assert of_type(out, Spawn) == [] and handle == actor, "the idle actor is reused"
        h.handle(TrialProcess(tid, 1, 4242))
        out = h.handle(_result(tid, 1, 1, loss=1.0 if tid == tids[0] else 0.25))
        assert sent(out, TrialProceed, to=actor) == [TrialProceed(tid, 1, 1)]
        assert not sent(out, SchedulerCall), "RESULT is not FIFO's hook: decided without the scheduler"
        out = h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED)) + h.answer_all()  # the next trial starts
        all_out += out
        assert h.core.table.get(tid).status is TrialStatus.TERMINATED

    assert h.phases == [S, R, F]
    assert isinstance(all_out[-1], Finish) and all_out[-1].error is None
    [fin] = sent(all_out, ExperimentFinished, to=DRIVER)
    assert fin.error is None
    assert {t.trial_id: (t.status, t.last_result["loss"]) for t in fin.trials} == {
        tids[0]: (TrialStatus.TERMINATED, 1.0), tids[1]: (TrialStatus.TERMINATED, 0.25)}
    assert Retire(actor) in all_out, "the parked actor is retired at the end"
    assert h.handle(Wake(Tick.PERIODIC)) == []


@pytest.mark.parametrize("late_chunk_comes", [True, False])
def test_the_end_waits_for_printed_lines_its_trials_end_overtook(late_chunk_comes: bool) -> None:
    """The transport does not keep the order: a run's TrialOutput can arrive after its TrialEnded. The
    experiment's end waits for it (so the driver echoes it), for OUTPUT_WAIT_S at most (seen in CI: a reused
    actor's trial lost all its echoed lines because the end came first)."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1, log_to_driver=True))
    [tid] = _running(h)
    chunk = [TrialOutput(tid, 1, n, 4001, "", ((1, f"line {n}"),)) for n in (1, 2, 3)]
    out = h.handle(chunk[0]) + h.handle(_result(tid, 1, 1))
    out += h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED, output=chunk[2], outputs_sent=2)) + h.answer_all()
    assert h.phase is R and not sent(out, ExperimentFinished), "chunk 2 is on its way: the end waits"
    out += h.handle(Wake(Tick.PERIODIC), at=h.now + OUTPUT_WAIT_S / 2)
    assert h.phase is R and not sent(out, ExperimentFinished)
    if late_chunk_comes:
        out += h.handle(chunk[1])
    else:  # lost: the end waits no longer than OUTPUT_WAIT_S
        out += h.handle(Wake(Tick.PERIODIC), at=h.now + OUTPUT_WAIT_S / 2 + 0.01)
    assert h.phase is F
    to_driver = [c.msg for c in of_type(out, Send) if c.to == DRIVER]
    echoed = [c.seq for m in to_driver if isinstance(m, TrialOutputBatch) for c in m.chunks]
    assert sorted(echoed) == ([1, 2, 3] if late_chunk_comes else [1, 3])
    assert isinstance(to_driver[-1], ExperimentFinished), "every line is sent before the end"
    assert to_driver[-1].output_batches == sum(isinstance(m, TrialOutputBatch) for m in to_driver)


def test_replies_arriving_out_of_order_are_applied_in_call_order() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=1))
    h.handle(Start(), at=0.0)
    h.ready(ALL_HOOKS)
    add1, add2, choose = h.open_calls()
    assert (add1.kind, add2.kind, choose.kind) == (HookKind.ADD, HookKind.ADD, HookKind.CHOOSE)
    first = choose.seq
    assert h.reply(first, chosen=add1.trial_id) == [], "held until the ADD replies are in"
    assert h.reply(add2.seq) == []
    out = h.reply(add1.seq)
    assert [r.trial_id for r in sent(out, RunTrial)] == [add1.trial_id]


def test_a_trials_messages_are_put_back_in_send_order() -> None:
    """Bug A of issue 15: the TrialEnded overtakes the results it follows."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [tid] = _running(h)
    assert h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED)) == [], "waits for seq 1"
    assert h.core.table.get(tid).status is TrialStatus.RUNNING
    out = h.handle(_result(tid, 1, 1, loss=0.125))
    assert sent(out, TrialProceed)
    rec = h.core.table.get(tid)
    assert rec.status is TrialStatus.TERMINATED and rec.last_result["loss"] == 0.125
    assert [c.kind for c in h.open_calls()] == [HookKind.SAVE], "the end asks the scheduler for its state first"
    assert isinstance(h.answer_all()[-1], Finish)


def test_messages_from_an_earlier_run_are_dropped() -> None:
    """Bug B of issue 15: a late result of a failed run must not count in the retry."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1, max_failures=1))
    [tid] = _running(h)
    h.handle(TrialEnded(tid, 1, 1, EndReason.FAILED, error="boom", traceback="tb"))
    out = h.answer_all()
    assert [(r.trial_id, r.run_id) for r in sent(out, RunTrial)] == [(tid, 2)]
    assert h.handle(_result(tid, 1, 2, loss=9.0)) == [], "run 1 is over"
    out = h.handle(_result(tid, 2, 1, loss=0.5))
    assert sent(out, TrialProceed) == [TrialProceed(tid, 2, 1)]
    assert h.core.table.get(tid).last_result["loss"] == 0.5


# ---------------------------------------------------------------------------------- choosing
def test_a_declined_choice_is_asked_again_only_once_another_event_came() -> None:
    """The plugin chooses no trial while a slot is free (HyperBand's paused trials wait for a slower one):
    the core asks again once another event came, never at once and never on a tick alone. It used to ask at
    once: the controller and the scheduler actor spun, 4,134 CHOOSE round trips in the 5 s of such a run."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    [choose] = h.open_calls(HookKind.CHOOSE)
    first, second = list(h.core.table.trials)
    out = h.reply(choose.seq, chosen=first)
    assert [r.trial_id for r in sent(out, RunTrial)] == [first]
    [again] = h.open_calls(HookKind.CHOOSE)  # (room for a second trial: asked at once, as before)
    assert sent(h.reply(again.seq), SchedulerCall) == [], "declined: not asked again at once"
    assert sent(h.handle(Wake(Tick.PERIODIC)), SchedulerCall) == [], "nor on a tick"
    out = h.handle(TrialProcess(first, 1, 4001))  # any other event may change the answer
    [asked] = [c for c in sent(out, SchedulerCall) if c.kind is HookKind.CHOOSE]
    assert [r.trial_id for r in sent(h.reply(asked.seq, chosen=second), RunTrial)] == [second]


def test_a_choice_declined_while_another_event_came_is_asked_again_at_once() -> None:
    """An event between the question and its answer may have changed the answer: asked again at once."""
    h, first, again = second_choice_out()
    h.handle(TrialProcess(first, 1, 4001))  # (while the CHOOSE is out)
    out = h.reply(again.seq)
    assert [c.kind for c in sent(out, SchedulerCall)] == [HookKind.CHOOSE]


def test_a_choice_declined_about_a_table_that_changed_since_is_asked_again_not_an_abort() -> None:
    """The run ends when the plugin declines while nothing runs and trials wait, but only if the table is as it
    was when the question was asked: a plugin answering about a trial that has since ended is asked again."""
    h, first, again = second_choice_out()
    h.handle(TrialEnded(first, 1, 1, EndReason.COMPLETED))  # (while the CHOOSE is out: nothing runs now)
    out = h.reply(again.seq)  # declined, about the table before that end
    assert h.phase is R
    assert [c.kind for c in sent(out, SchedulerCall)] == [HookKind.CHOOSE]


# ---------------------------------------------------------------------------------- clones
def _exploited(h: Harness) -> tuple[str, int]:
    """Trial a's result gets a CLONE of trial b (a PBT exploit): its run is paused for it."""
    handles = _running(h, ALL_HOOKS)
    a, b = list(handles)
    h.core.table.get(b).checkpoint = CheckpointRef("ckpt/b/0", 0, 1)  # (a source without one is not cloned)
    h.handle(_result(a, 1, 1))
    [call] = h.open_calls(HookKind.RESULT)
    h.reply(call.seq, Decision.CONTINUE, (SchedulerAction(ActionKind.CLONE, a, source_id=b, new_config={"lr": 2}),))
    return a, handles[a]


def test_a_clone_of_a_source_with_no_checkpoint_to_give_is_skipped() -> None:
    """PBT (in ``wait_for_checkpoint`` mode, for a class trainable) clones a top trial whose exploit save died with
    its run: it has no checkpoint and none is on its way. The exploit is skipped, as Ray's PBT skips one whose
    source has no checkpoint: the trial runs on with its config, no EXPLOIT mark, no policy line (seed 746 of a
    sweep with ``max_failures=1`` and silent deaths). Before, it restarted from its own checkpoint with the
    source's perturbed config."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2, max_failures=3))
    handles = _running(h, ALL_HOOKS)
    a, b = list(handles)
    h.handle(_result(a, 1, 1))
    [call] = h.open_calls(HookKind.RESULT)
    out = h.reply(call.seq, Decision.CONTINUE, (
        SchedulerAction(ActionKind.LOG_POLICY, a, source_id=b, info={"trial_tag": "0", "source_tag": "1"}),
        SchedulerAction(ActionKind.CLONE, a, source_id=b, new_config={"lr": 2}, wait_for_source=True)))
    rec = h.core.table.get(a)
    assert rec.config != {"lr": 2} and rec.clone is None and rec.marks == [] and h.store.policy == []
    assert rec.status is TrialStatus.RUNNING and sent(out, TrialProceed) == [TrialProceed(a, 1, 1)]


@pytest.mark.parametrize("notice", [True, False], ids=["its-end-notice", "its-process-died"])
def test_a_clone_abandons_what_its_run_committed_unseen_only_if_that_run_ended_without_notice(notice: bool) -> None:
    """A run's every message comes before its end notice, so after it nothing can be unseen; a run found dead
    may have committed a checkpoint the controller never heard of, of the lineage the clone leaves
    (``ExperimentIO.abandon_unseen`` lists the trial's checkpoints: only then)."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2, max_failures=3))
    a, handle = _exploited(h)
    if notice:
        h.handle(TrialSaved(a, 1, 2, CheckpointRef("ckpt/a/1", 1, 1), SaveKind.PAUSE))
        h.handle(TrialEnded(a, 1, 3, EndReason.STOPPED))
    else:
        h.handle(ActorGone(handle, -9))
    rec = h.core.table.get(a)
    assert rec.config == {"lr": 2} and [m.kind for m in rec.marks] == [MarkKind.EXPLOIT] and rec.num_failures == 0
    assert h.store.abandoned == ([] if notice else [a])


def test_a_clone_abandons_what_an_earlier_run_committed_unseen_though_the_last_ended_with_notice() -> None:
    """Seed 329 of an asynchronous PBT sweep: a pause ended without its notice (killed after its grace), its
    save committed unseen; the next run ended cleanly with the exploit's pause. The unseen save is still of
    the lineage the clone leaves (a restore resumed from it, dropping the clone's rows)."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2, max_failures=3))
    handles = _running(h, ALL_HOOKS)
    a, b = list(handles)
    h.handle(_result(a, 1, 1))
    [call] = h.open_calls(HookKind.RESULT)
    h.reply(call.seq, Decision.PAUSE)
    h.core.runs.ended(a, 1, EndReason.STOPPED)  # (as the watchdog ends a run it killed: no notice)
    assert h.core.table.get(a).status is TrialStatus.PAUSED and h.store.abandoned == []
    h.handle(Wake(Tick.PERIODIC))  # (hands over the commands that end made: its CHOOSE)
    h.answer_all()  # (the CHOOSE answers start it again)
    assert h.core.table.get(a).run_id == 2
    h.handle(TrialProcess(a, 2, 4100))
    h.handle(_result(a, 2, 1))
    [call] = h.open_calls(HookKind.RESULT)
    h.core.table.get(b).checkpoint = CheckpointRef("ckpt/b/0", 0, 1)  # (a source without one is not cloned)
    h.reply(call.seq, Decision.CONTINUE, (SchedulerAction(ActionKind.CLONE, a, source_id=b, new_config={"lr": 2}),))
    h.handle(TrialSaved(a, 2, 2, CheckpointRef("ckpt/a/1", 1, 2), SaveKind.PAUSE))
    h.handle(TrialEnded(a, 2, 3, EndReason.STOPPED))
    assert [m.kind for m in h.core.table.get(a).marks][-1] is MarkKind.EXPLOIT
    assert h.store.abandoned == [a]


# ---------------------------------------------------------------------------------- the Ray Tune hang
def test_pause_trial_recorded_in_a_result_reply_pauses_although_the_decision_is_continue() -> None:
    """The reply's recorded actions merge before its decision: pause_trial() + CONTINUE pauses."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [tid] = _running(h, ALL_HOOKS)
    h.handle(_result(tid, 1, 1))
    [call] = h.open_calls(HookKind.RESULT)
    out = h.reply(call.seq, Decision.CONTINUE, (SchedulerAction(ActionKind.PAUSE, tid),))
    assert sent(out, TrialProceed) == [], "the trial must not step on"
    assert sent(out, TrialSave) == [TrialSave(tid, 1, SaveKind.PAUSE)], "it pauses with a checkpoint"
    out = h.handle(TrialSaved(tid, 1, 2, CheckpointRef("ckpt/0", 0, 1), SaveKind.PAUSE))
    assert [s.trial_id for s in sent(out, TrialStop)] == [tid]
    h.handle(TrialEnded(tid, 1, 3, EndReason.STOPPED))
    rec = h.core.table.get(tid)
    assert rec.status is TrialStatus.PAUSED and rec.checkpoint == CheckpointRef("ckpt/0", 0, 1)
    assert h.phases == [S, R]


# ---------------------------------------------------------------------------------- aborting
def test_abort_while_running_finishes_when_the_scheduler_state_arrives() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2))
    handles = _running(h)
    assert len(handles) == 2
    out = h.handle(AbortExperiment("stopped by the user"), at=10.0)
    assert h.phase is A
    assert sorted(s.trial_id for s in sent(out, TrialStop)) == sorted(handles)
    [save] = h.open_calls(HookKind.SAVE)
    assert h.store.snapshots == [save.seq], "the table is frozen with the SAVE call's tag"
    assert not of_type(out, Finish)
    out = h.reply(save.seq, state=b"state", at=10.5)
    assert h.phases == [S, R, A, F]
    assert h.store.saved == [(b"state", save.seq)]
    assert not h.store.lost, "the abort's table goes with the scheduler's state of the same moment"
    [fin] = sent(out, ExperimentFinished, to=DRIVER)
    assert fin.error == "stopped by the user" and out[-1] == Finish("stopped by the user")
    assert all(Retire(x) in out for x in handles.values()), "every trial actor is asked to exit"


def test_abort_ends_without_the_scheduler_state_after_the_timeout() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    _running(h)
    h.handle(AbortExperiment("ctrl-c"), at=10.0)
    [save] = h.open_calls(HookKind.SAVE)
    out = h.handle(Wake(Tick.PERIODIC), at=10.0 + ABORT_SAVE_TIMEOUT_S)
    assert h.phase is A and out == [WakeAfter(h.core.spec.progress_interval_s, Tick.PERIODIC)]
    out = h.handle(Wake(Tick.PERIODIC), at=10.0 + ABORT_SAVE_TIMEOUT_S + 0.5)
    assert h.phases == [S, R, A, F] and out[-1] == Finish("ctrl-c")
    assert h.store.saved == []
    assert h.store.lost, "the frozen table must not be written beside an older scheduler state"
    assert h.reply(save.seq, state=b"late") == [], "the late answer finds the experiment over"


def test_an_abort_after_the_scheduler_died_writes_no_table_beside_its_older_state() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    _running(h)
    out = h.handle(ActorGone(SCHEDULER, -9), at=10.0)
    assert h.phase is F and isinstance(out[-1], Finish)
    assert h.store.lost and not h.open_calls(HookKind.SAVE)


def test_a_natural_end_writes_its_table_with_the_schedulers_last_state() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [tid] = _running(h)
    h.handle(TrialEnded(tid, 1, 1, EndReason.COMPLETED))
    assert isinstance(h.answer_all()[-1], Finish) and not h.store.lost


def test_a_second_abort_while_aborting_changes_nothing() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    _running(h)
    h.handle(AbortExperiment("first"), at=1.0)
    assert h.handle(AbortExperiment("second"), at=2.0) == []
    [save] = h.open_calls(HookKind.SAVE)
    assert h.reply(save.seq, state=b"s")[-1] == Finish("first")


# ---------------------------------------------------------------------------------- fail_fast
def test_fail_fast_drains_and_kills_the_stragglers_after_the_grace_period() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2, fail_fast=True, actor_processes=True))
    handles = _running(h, pid0=4001)
    bad, slow = list(handles)
    out = h.handle(TrialEnded(bad, 1, 1, EndReason.FAILED, error="boom", traceback="tb"), at=20.0)
    assert h.phase is D
    assert h.core.table.get(bad).status is TrialStatus.ERROR
    assert [s.trial_id for s in sent(out, TrialStop)] == [slow]
    out = h.handle(Wake(Tick.PERIODIC), at=20.0 + STOP_ALL_GRACE_S - 0.1)
    assert not of_type(out, KillProcess), "still within the grace period"
    out = h.handle(Wake(Tick.PERIODIC), at=20.0 + STOP_ALL_GRACE_S)
    assert of_type(out, KillProcess) == [KillProcess(4002)], "the local process of the trial still running"
    assert Retire(handles[slow]) in out
    assert h.core.table.get(slow).status is TrialStatus.TERMINATED
    out += h.answer_all()
    assert h.phases == [S, R, D, F]
    assert isinstance(out[-1], Finish) and out[-1].error is None, "fail_fast=True ends normally (Ray Tune)"
    assert h.handle(Wake(Tick.PERIODIC)) == []


def test_a_trial_that_never_lands_its_pause_save_is_killed_after_the_grace_period() -> None:
    """A pause with a checkpoint asked of a trial computing in its own code (another trial's hook paused it): its
    halt deadline starts with the save order, so a trial stuck in C that never reaches its next report() is killed
    ``trial_stop_grace_s`` later (its deadline armed only at the stop after the save, it was never killed)."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2, actor_processes=True, trial_stop_grace_s=5.0))
    stuck, other = list(_running(h, ALL_HOOKS, pid0=4001))
    h.answer_all()
    h.handle(_result(other, 1, 1), at=10.0)
    [call] = h.open_calls(HookKind.RESULT)
    out = h.reply(call.seq, Decision.CONTINUE, (SchedulerAction(ActionKind.PAUSE, stuck, True),), at=10.0)
    assert [m.trial_id for m in sent(out, TrialSave)] == [stuck]
    assert not of_type(h.handle(Wake(Tick.PERIODIC), at=14.9), KillProcess), "still within the grace period"
    assert of_type(h.handle(Wake(Tick.PERIODIC), at=15.0), KillProcess) == [KillProcess(4001)]


def test_fail_fast_kills_nothing_without_processes_of_its_own() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2, fail_fast=True, actor_processes=False))
    bad, slow = list(_running(h))
    h.handle(TrialEnded(bad, 1, 1, EndReason.FAILED, error="boom"), at=20.0)
    out = h.handle(Wake(Tick.PERIODIC), at=20.0 + STOP_ALL_GRACE_S)
    assert not of_type(out, KillProcess), "trial threads in this process cannot be killed"
    assert h.core.table.get(slow).status is TrialStatus.TERMINATED


# ---------------------------------------------------------------------------------- members (multi-host)
def _multi_host(**over: object) -> Harness:
    h = Harness(make_spec(num_samples=1, max_concurrent=1, multi_host=True, leader_resources={}, **over))
    h.handle(Start(), at=0.0)
    h.ready()
    return h


def test_a_silent_member_is_lost_and_its_trial_restarts_when_it_beats_again() -> None:
    h = _multi_host(max_failures=1, heartbeat_timeout_s=10.0)
    h.handle(MemberJoined("w1", {"cpu": 1.0}, "addr-1"), at=0.0)
    out = h.answer_all()
    [run] = sent(out, RunTrial)
    [trial] = [s for s in of_type(out, Spawn) if s.kind is ActorKind.TRIAL]
    h.handle(MemberHeartbeat("w1", 1), at=1.0)
    h.handle(Wake(Tick.PERIODIC), at=11.0)
    assert "w1" not in h.core.members.lost, "10 s since its last heartbeat: not yet"
    out = h.handle(Wake(Tick.PERIODIC), at=11.5)
    assert "w1" in h.core.members.lost and Retire(trial.handle) in out
    rec = h.core.table.get(run.trial_id)
    assert rec.status is TrialStatus.PENDING and "no heartbeat for 10s" in (rec.error or "")
    assert h.open_calls() == [], "nowhere to run it"
    h.handle(MemberHeartbeat("w1", 12), at=12.0)
    assert "w1" not in h.core.members.lost
    out = h.answer_all()
    assert [(r.trial_id, r.run_id) for r in sent(out, RunTrial)] == [(run.trial_id, 2)]


def test_a_trial_no_member_can_hold_aborts_after_the_placement_grace() -> None:
    h = _multi_host(resources_per_trial={"cpu": 4.0}, placement_grace_s=30.0)
    h.handle(MemberJoined("small", {"cpu": 2.0}, "addr-1"), at=1.0)
    h.handle(Wake(Tick.PERIODIC), at=5.0)
    h.handle(Wake(Tick.PERIODIC), at=35.0)
    assert h.phase is R, "30 s of waiting: the grace is not over"
    h.handle(Wake(Tick.PERIODIC), at=35.5)
    assert h.phase is A and "no member can ever run a trial needing {'cpu': 4.0}" in (h.core.error or "")


# ---------------------------------------------------------------------------------- the end
def test_nothing_happens_after_finished() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [tid] = _running(h)
    h.handle(_result(tid, 1, 1))
    out = h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED)) + h.answer_all()
    assert h.phase is F and isinstance(out[-1], Finish)
    late = [_result(tid, 1, 3), TrialEnded(tid, 1, 4, EndReason.FAILED), TrialEnded(tid, 2, 1, EndReason.FAILED),
            SchedulerReply(99, HookKind.RESULT, tid, Decision.STOP, ()), SchedulerReady(False, "x", ALL_HOOKS),
            Wake(Tick.PERIODIC), Wake(Tick.EVENTS), AbortExperiment("late"), ActorGone(2, -9), ActorGone(SCHEDULER),
            MemberHeartbeat("w1", 1), TrialProcess(tid, 1, 1), object(), "not a message"]
    for event in late:
        assert h.handle(event) == [], event
    assert h.phases == [S, R, F]
    # a status query alone is still answered (the CLI must not wait on a finished controller)
    [reply] = h.handle(ClusterStatusRequest())
    assert isinstance(reply, Reply) and reply.msg.trials == {"TERMINATED": 1}


def test_the_tick_sends_a_progress_report_unless_the_spec_turns_them_off() -> None:
    """fit()'s spec sends the live table every tick; the simulator's (nobody renders it) sends none,
    and the tick's other work (the next tick, the liveness check) is the same either way."""
    from actors.messages import ExperimentProgress

    outs = {}
    for reports in (True, False):
        h = Harness(make_spec(num_samples=1, max_concurrent=1, progress_reports=reports))
        _running(h)
        outs[reports] = h.handle(Wake(Tick.PERIODIC))
    [report] = sent(outs[True], ExperimentProgress, to=DRIVER)
    assert report.counts == {"RUNNING": 1}
    assert [c for c in outs[True] if c not in [Send(DRIVER, report)]] == outs[False]
    assert make_spec().progress_reports  # the driver's spec (fit()) has them on


def test_an_unknown_message_while_running_changes_nothing() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    _running(h)
    assert h.handle(object()) == [] and h.handle("junk") == []
    assert h.phase is R


def test_a_trial_process_dying_fails_the_trial() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [(tid, handle)] = _running(h).items()
    out = h.handle(ActorGone(handle, -9)) + h.answer_all()
    rec = h.core.table.get(tid)
    assert rec.status is TrialStatus.ERROR and "SIGKILL" in (rec.error or "")
    assert isinstance(out[-1], Finish)


# ---------------------------------------------------------------------------------- quiet seconds
def _saves(out: list) -> list[SchedulerCall]:
    return [c for c in sent(out, SchedulerCall, to=SCHEDULER) if c.kind is HookKind.SAVE]


def test_a_quiet_second_writes_no_state_and_any_change_writes_the_next() -> None:
    """The periodic write is skipped when nothing a state holds changed since the last snapshot
    (a trial in a long step: on S3 a PUT a second for nothing); a result, a liveness finding or a
    stopper (TimeoutStopper keeps time in its state) brings it back."""
    h = Harness(make_spec(num_samples=2, max_concurrent=1, actor_processes=True))
    [(tid, _)] = _running(h).items()
    h.store.due = True
    first = h.handle(Wake(Tick.PERIODIC), at=1.0)
    assert len(_saves(first)) == 1
    h.answer_all()  # the scheduler's state arrives: the write completes (no change)
    for t in (2.0, 3.0):
        quiet = h.handle(Wake(Tick.PERIODIC), at=t)
        assert _saves(quiet) == [], f"nothing changed, yet the tick at {t} saves"
        h.handle(ProcessesChecked(()), at=t)
        h.handle(MemberHeartbeat("w", 1), at=t)
        h.handle(ClusterStatusRequest(), at=t)
    h.handle(_result(tid, 1, 1), at=3.5)
    h.answer_all()
    assert len(_saves(h.handle(Wake(Tick.PERIODIC), at=4.0))) == 1, "a result came: the state is written"
    h.answer_all()
    assert _saves(h.handle(Wake(Tick.PERIODIC), at=5.0)) == []
    # the liveness check finds the trial's process gone: the table changed
    h.handle(Wake(Tick.PERIODIC), at=5.5)
    h.handle(ProcessesChecked(((tid, 1, -9),)), at=5.6)
    h.handle(ProcessesChecked(((tid, 1, -9),)), at=5.7)
    h.answer_all()
    assert h.core.table.get(tid).status is TrialStatus.ERROR and h.phase is R
    assert len(_saves(h.handle(Wake(Tick.PERIODIC), at=6.0))) == 1


def test_with_a_stopper_every_due_second_writes() -> None:
    from actors.stoppers import TimeoutStopper

    h = Harness(make_spec(num_samples=1, max_concurrent=1, stopper=TimeoutStopper(3600)))
    _running(h)
    h.store.due = True
    for t in (1.0, 2.0, 3.0):
        assert len(_saves(h.handle(Wake(Tick.PERIODIC), at=t))) == 1, t
        h.answer_all()


@pytest.mark.parametrize(("event", "commands", "quiet"), [
    (Wake(Tick.PERIODIC), [WakeAfter(1.0, Tick.PERIODIC)], True),
    (Wake(Tick.PERIODIC), [WakeAfter(1.0, Tick.PERIODIC), Send(SCHEDULER, SchedulerCall(3, HookKind.SAVE))], True),
    (Wake(Tick.PERIODIC), [Send(DRIVER, "progress"), WakeAfter(1.0, Tick.PERIODIC)], True),
    (Wake(Tick.PERIODIC), [KillProcess(4001), WakeAfter(1.0, Tick.PERIODIC)], False),
    (Wake(Tick.PERIODIC), [Send(7, TrialStop("t", 1))], False),
    (Wake(Tick.PERIODIC), [Send(SCHEDULER, SchedulerCall(3, HookKind.COMPLETE, "t"))], False),
    (ProcessesChecked(()), [], True),
    (MemberHeartbeat("w", 2), [], True),
    (ClusterStatusRequest(), [Reply("status")], True),
    (SchedulerReply(3, HookKind.SAVE, None, Decision.CONTINUE, (), None, b"s"), [], True),
    (SchedulerReply(3, HookKind.RESULT, "t", Decision.CONTINUE, ()), [], False),
    (SchedulerReply(3, HookKind.CHOOSE, None, Decision.CONTINUE, ()), [], False),
    (_result("t", 1, 1), [], False),
    (TrialEnded("t", 1, 1, EndReason.STOPPED), [], False),
    (AbortExperiment("x"), [], False),
])
def test_which_events_change_nothing_a_state_holds(event: object, commands: list, quiet: bool) -> None:
    from actors._engine.quiet import changes_nothing

    assert changes_nothing(event, commands) is quiet


def test_the_liveness_check_wants_an_empty_answer_only_after_a_finding() -> None:
    """An empty ProcessesChecked changes nothing unless a process was found gone at the check
    before (it may be a slow exit notice): only then must the shell answer 'none gone'."""
    from actors._engine.signals import CheckProcesses

    h = Harness(make_spec(num_samples=2, max_concurrent=2, actor_processes=True))
    tids = list(_running(h))
    [check] = of_type(h.handle(Wake(Tick.PERIODIC), at=1.0), CheckProcesses)
    assert not check.always_answer and {t for t, _, _ in check.procs} == set(tids)
    h.handle(ProcessesChecked(((tids[0], 1, -9),)), at=1.0)  # gone once: not yet failed
    assert h.core.table.get(tids[0]).status is TrialStatus.RUNNING
    [check] = of_type(h.handle(Wake(Tick.PERIODIC), at=2.0), CheckProcesses)
    assert check.always_answer, "the core must hear whether that process is still gone"
    h.handle(ProcessesChecked(()), at=2.0)  # it was only slow: forgotten
    [check] = of_type(h.handle(Wake(Tick.PERIODIC), at=3.0), CheckProcesses)
    assert not check.always_answer


def test_an_earlier_runs_late_process_notice_does_not_hide_the_running_ones() -> None:
    """A run dies and is retried; the dead run's ``TrialProcess`` then arrives late (Thespian's TCP transport
    keeps no order; a dying process's last words): the liveness check still asks after the new run's process,
    so its death is found though its exit notice is lost. (Found by a seeded simulation, seed 202 of
    ``tests/_sim_scenarios`` with stragglers, lost exit notices and lost messages: the experiment hung.)"""
    from actors._engine.signals import CheckProcesses

    h = Harness(make_spec(num_samples=1, max_concurrent=1, actor_processes=True, max_failures=-1))
    [(tid, handle)] = _running(h).items()
    out = h.handle(ActorGone(handle, -11), at=0.5) + h.answer_all()  # run 1 died; run 2 starts in a new actor
    [run2] = sent(out, RunTrial)
    assert run2.run_id == 2
    h.handle(TrialProcess(tid, 2, 4002), at=0.6)
    h.handle(TrialProcess(tid, 1, 4001), at=0.7)  # run 1's, late
    [check] = of_type(h.handle(Wake(Tick.PERIODIC), at=1.0), CheckProcesses)
    assert check.procs == ((tid, 2, 4002),)
    for at in (1.0, 2.0):  # run 2's process is gone, its exit notice lost: found at two checks in a row
        h.handle(ProcessesChecked(((tid, 2, -11),)), at=at)
        of_type(h.handle(Wake(Tick.PERIODIC), at=at + 1.0), CheckProcesses)
    h.answer_all()
    assert h.core.table.get(tid).run_id == 3, "run 2 was found dead and the trial retried"


def test_ticks_are_idle_only_when_nothing_is_due() -> None:
    """tick_idle (the simulator skips idle ticks): not before the run starts, not until a change is
    written, not while a trial must halt by a deadline, never with a stopper."""
    from actors.stoppers import TimeoutStopper

    h = Harness(make_spec(num_samples=2, max_concurrent=2, actor_processes=True, progress_reports=False))
    assert not h.core.tick_idle()  # STARTING
    [a, _] = list(_running(h))
    h.store.due = True
    assert not h.core.tick_idle()  # started trials: not written yet
    h.handle(Wake(Tick.PERIODIC), at=1.0)
    h.answer_all()
    assert h.core.tick_idle()
    h.handle(_result(a, 1, 1), at=1.5)
    assert not h.core.tick_idle()
    h.answer_all()
    h.handle(Wake(Tick.PERIODIC), at=2.0)
    h.answer_all()
    assert h.core.tick_idle()
    h.handle(AbortExperiment("x"), at=2.5)
    assert not h.core.tick_idle()  # ABORTING
    timed = Harness(make_spec(num_samples=1, max_concurrent=1, progress_reports=False,
                              stopper=TimeoutStopper(3600)))
    _running(timed)
    timed.store.due = True
    timed.handle(Wake(Tick.PERIODIC), at=1.0)
    timed.answer_all()
    assert not timed.core.tick_idle()
    reports = Harness(make_spec(num_samples=1, max_concurrent=1))  # fit()'s spec: a report every tick
    _running(reports)
    reports.store.due = True
    reports.handle(Wake(Tick.PERIODIC), at=1.0)
    reports.answer_all()
    assert not reports.core.tick_idle()


def test_a_full_event_batch_goes_to_the_driver_when_the_message_that_filled_it_is_handled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not inside it (a held decision marks its result event later in the same message), and not only at
    the events' wake-up: the batch's size still bounds how many events wait."""
    from actors._engine import feed
    from actors.messages import TrialEvents

    monkeypatch.setattr(feed, "EVENTS_BATCH", 2)
    h = Harness(make_spec(num_samples=1, max_concurrent=1, forward_events=True))
    [tid] = _running(h)
    h.handle(Wake(Tick.EVENTS))  # the events so far (the trial's start) go out on their wake-up
    assert h.core.feed.events == []
    out = h.handle(_result(tid, 1, 1)) + h.handle(_result(tid, 1, 2))
    batches = sent(out, TrialEvents, to=DRIVER)
    assert batches and all(len(b.events) >= 2 for b in batches), "a full batch waits for no wake-up"
    assert isinstance(out[-1], Send) and isinstance(out[-1].msg, TrialEvents), "sent last, once handled"


def test_a_natural_end_saves_the_schedulers_state_after_its_last_hook() -> None:
    """The final state holds what the plugin learned to the end (the script's scheduler object takes it
    after fit(), as Ray's, which ran in the driver)."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1))  # (no state write is due: FakeStore.due)
    [tid] = _running(h, ALL_HOOKS)
    h.handle(_result(tid, 1, 1))
    h.answer_all()
    out = h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED))
    kinds: list[HookKind] = []
    while h.calls:  # answered one at a time, each SAVE with a state of its own
        call = h.open_calls()[0]
        kinds.append(call.kind)
        assert h.phase is R
        out = h.reply(call.seq, state=f"s{len(kinds)}".encode() if call.kind is HookKind.SAVE else None)
    assert kinds[-1] is HookKind.SAVE and kinds[-2] is HookKind.COMPLETE, kinds
    assert isinstance(out[-1], Finish) and h.phase is F
    assert h.core.io.saved[-1][0] == f"s{len(kinds)}".encode(), "the state kept last is the one after COMPLETE"


def test_no_final_save_when_the_scheduler_answered_nothing_since_its_last() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    [tid] = _running(h)  # FIFO: CHOOSE answered
    h.core.io.due = True  # a periodic state write: its SAVE comes after the CHOOSE
    h.handle(Wake(Tick.PERIODIC), at=2.0)
    assert [c.kind for c in h.open_calls()] == [HookKind.SAVE]
    h.answer_all()
    h.core.io.due = False
    out = h.handle(_result(tid, 1, 1)) + h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED))
    assert isinstance(out[-1], Finish) and not h.open_calls()


def test_a_state_written_at_a_trials_end_holds_the_searchers_state_after_it_heard_of_that_end() -> None:
    """A trial's end writes a state soon (``state_due``); the searcher must hear ``on_trial_complete`` first, as
    Ray's does before its next experiment checkpoint. Written before, the state held the trial TERMINATED beside a
    generator that still counted it running: with ``max_concurrent_trials=1``, an abort before the next state
    restored into a search that suggested nothing ("the search algorithm suggested no configuration while no
    trial was running"; seen in a seeded simulation)."""
    from actors.search import BasicVariantGenerator

    spec = make_spec(num_samples=2, max_concurrent=1, searcher=BasicVariantGenerator(max_concurrent=1))
    h = Harness(spec)
    live_at_snapshot: list[list[str]] = []
    h.handle(Start(), at=0.0)
    snapshot = h.store.snapshot_table

    def recording(table: object, searcher: object, progress: object, tag: int | None = None) -> None:
        live_at_snapshot.append(sorted(searcher.save()["live"]))  # type: ignore[attr-defined]
        snapshot(table, searcher, progress, tag)

    h.store.snapshot_table = recording
    h.ready(FIFO_HOOKS)
    h.answer_all()
    [tid] = list(h.core.table.trials)  # (the generator gives one trial at a time)
    h.handle(TrialProcess(tid, 1, 4242))
    h.handle(_result(tid, 1, 1))
    h.store.due = True
    h.handle(TrialEnded(tid, 1, 2, EndReason.COMPLETED))
    assert h.core.table.get(tid).status is TrialStatus.TERMINATED
    assert live_at_snapshot and live_at_snapshot[0] == [], live_at_snapshot
