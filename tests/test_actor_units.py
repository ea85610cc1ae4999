"""Actor-level unit tests: one real actor on simpleSystemBase, scripted messages in, messages out."""

from __future__ import annotations

import os
import signal
import subprocess

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


def test_trial_actor_ignores_messages_for_other_runs(tmp_path) -> None:
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path)))
        kit.wait_for(TrialResults)
        kit.send(actor, TrialStop("t1", 99))  # a stale run id: must not stop this run
        kit.send(actor, TrialStop("other", 1))
        assert not [m for m in kit.received(0.3) if isinstance(m, TrialEnded)]


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
