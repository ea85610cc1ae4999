"""Actor-level unit tests: one real actor on simpleSystemBase, scripted messages in, messages out."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time

import cloudpickle

from actors import Checkpoint, report
from actors._cluster.probe import MemberProbe
from actors._shell.trial_actor import TrialActor
from actors.messages import (
    EndReason,
    ProbeCheck,
    ProbeChecked,
    ProbeStart,
    RunTrial,
    SaveKind,
    TrialEnded,
    TrialOutput,
    TrialProceed,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)
from actors.testing import ActorTestKit


def counting(config):
    for i in range(100):
        report({"loss": float(i)}, checkpoint=Checkpoint.from_dict({"i": i}) if i % 2 else None)


def _run_trial(storage: str, window: int = 1) -> RunTrial:
    return RunTrial("t1", 1, {"a": 1}, cloudpickle.dumps(counting), None, 0, 0.0, window, storage, {}, "exp", 0)


def test_trial_actor_waits_for_each_decision_then_saves_and_stops(tmp_path) -> None:
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path)))
        first, _ = kit.wait_for(TrialResults)
        assert first.seq == 1 and [r["training_iteration"] for r in first.results] == [1]
        # window 1: nothing more arrives until the decision for result 1 is sent
        assert not [m for m in kit.received(0.3) if isinstance(m, TrialResults)]
        kit.send(actor, TrialProceed("t1", 1, 1))
        second, _ = kit.wait_for(TrialResults)
        assert second.seq == 2 and second.results[0]["training_iteration"] == 2
        assert second.checkpoint is not None and second.checkpoint.iteration == 2
        kit.send(actor, TrialSave("t1", 1, SaveKind.PAUSE))
        saved, _ = kit.wait_for(TrialSaved)
        assert saved.seq == 3 and saved.checkpoint == second.checkpoint  # function trainable: latest
        kit.send(actor, TrialStop("t1", 1))
        ended, _ = kit.wait_for(TrialEnded)
        assert ended.reason is EndReason.STOPPED and ended.seq == 4


def printing(config):
    for i in range(3):
        print(f"line {i}")
        time.sleep(0.2)  # (the trainable's own pace: TrialActor.output_every_s sends a chunk per 0.3 s at most)
    print("line 3")  # held for the next 0.3 s: the end carries it (TrialEnded.output)


def test_trial_actor_tells_how_many_printed_chunks_went_before_its_end(tmp_path) -> None:
    """TrialEnded.outputs_sent lets the controller wait for chunks that the end overtook (DriverFeed.output_due)."""
    msg = dataclasses.replace(_run_trial(str(tmp_path)), trainable=cloudpickle.dumps(printing), echo_output=True)
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, msg)
        ended, seen = kit.wait_for(TrialEnded, timeout_s=30)
    before = [m for m in seen if isinstance(m, TrialOutput)]  # (in-process: in send order)
    assert ended.reason is EndReason.COMPLETED and ended.outputs_sent >= 1
    assert len(before) == ended.outputs_sent, (before, ended)
    assert [c.seq for c in before] == list(range(1, ended.outputs_sent + 1))
    last = [ended.output] if ended.output is not None else []  # (None if a chunk went out after line 3)
    assert ended.output is None or ended.output.seq == ended.outputs_sent + 1
    assert [x for c in [*before, *last] for _, x in c.lines] == [f"line {i}" for i in range(4)]


def test_trial_actor_ignores_messages_for_other_runs(tmp_path) -> None:
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path)))
        kit.wait_for(TrialResults)
        kit.send(actor, TrialStop("t1", 99))  # another run's (one not started here yet): must not stop this run
        kit.send(actor, TrialStop("other", 1))
        assert not [m for m in kit.received(0.3) if isinstance(m, TrialEnded)]


def test_trial_actor_carries_out_a_stop_that_overtook_its_run(tmp_path) -> None:
    """Thespian's TCP transport may hand the actor a run's ``TrialStop`` before the ``RunTrial`` sent just
    before it (a time budget running out right after a start). The stop is kept and carried out when the run
    starts: the run ends at its first report. Dropped, as before, the run waited for a decision that never
    came until the controller killed it ``trial_stop_grace_s`` later."""
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, TrialStop("t1", 1))  # (simpleSystemBase delivers in the order sent)
        kit.send(actor, _run_trial(str(tmp_path)))
        ended, seen = kit.wait_for(TrialEnded, timeout_s=10)
        assert ended.reason is EndReason.STOPPED
        # (at most the first result: the stop reaches the trainable at its first or second report)
        assert [r["training_iteration"] for m in seen if isinstance(m, TrialResults) for r in m.results] in ([], [1])


def test_trial_actor_drops_an_order_for_a_run_that_started_before(tmp_path) -> None:
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path)))
        kit.wait_for(TrialResults)
        kit.send(actor, TrialStop("t1", 1))
        kit.wait_for(TrialEnded)
        second = RunTrial("t1", 2, {"a": 1}, cloudpickle.dumps(counting), None, 0, 0.0, 1, str(tmp_path), {}, "exp", 0)
        kit.send(actor, second)
        kit.wait_for(TrialResults)
        kit.send(actor, TrialStop("t1", 1))  # run 1's, late: run 2 goes on
        assert not [m for m in kit.received(0.3) if isinstance(m, TrialEnded)]
        kit.send(actor, TrialProceed("t1", 2, 1))
        more, _ = kit.wait_for(TrialResults)
        assert more.run_id == 2 and more.results[0]["training_iteration"] == 2


def test_trial_actor_batches_when_allowed(tmp_path) -> None:
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path), window=256))
        ended, seen = kit.wait_for(TrialEnded, timeout_s=10)
        batches = [m for m in seen if isinstance(m, TrialResults)]
        its = [r["training_iteration"] for b in batches for r in b.results]
        assert its == list(range(1, 101))  # every result, in order, with no decision needed
        assert len(batches) < 100  # several results per message
        assert ended.reason is EndReason.COMPLETED


def test_member_probe_answers_which_trial_processes_on_its_machine_are_gone() -> None:
    """``ProbeCheck`` (the controller's liveness check of another member's trial processes): a process that
    is gone (reaped) or dead (a zombie, with its exit status) is reported; a live one is not; an empty answer
    is sent too."""
    alive = subprocess.Popen(["sleep", "60"])
    reaped = subprocess.Popen(["sleep", "60"])
    reaped.kill()
    reaped.wait()
    zombie = subprocess.Popen(["sleep", "60"])
    zombie.send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, zombie.pid, os.WEXITED | os.WNOWAIT)  # it has exited and is not reaped: a zombie
    try:
        with ActorTestKit() as kit:
            probe = kit.create(MemberProbe)
            kit.send(probe, ProbeStart("m1", 60.0))
            kit.send(probe, ProbeCheck((("a", 1, alive.pid), ("b", 1, reaped.pid), ("c", 2, zombie.pid))))
            checked, _ = kit.wait_for(ProbeChecked)
            assert checked == ProbeChecked("m1", (("b", 1, None), ("c", 2, -signal.SIGKILL)))
            kit.send(probe, ProbeCheck((("a", 1, alive.pid),)))
            checked, _ = kit.wait_for(ProbeChecked)
            assert checked == ProbeChecked("m1", ())
    finally:
        alive.kill()
        alive.wait()
        zombie.wait()
