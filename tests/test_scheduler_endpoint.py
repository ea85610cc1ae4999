"""The scheduler actor's protocol as a pure object (what the actor and the simulator both run)."""

from __future__ import annotations

import cloudpickle

from actors._engine.scheduler_endpoint import SchedulerEndpoint
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import HookKind, SchedulerCall, SchedulerFailed, SchedulerReady, SchedulerReply, SchedulerSetup
from actors.schedulers import FIFOScheduler


class Boom(FIFOScheduler):
    def on_trial_result(self, controller, trial, result):
        raise ValueError("boom")


def _ready(sched: object) -> SchedulerEndpoint:
    ep = SchedulerEndpoint()
    assert isinstance(ep.setup(SchedulerSetup(cloudpickle.dumps(sched), "loss", "min")), SchedulerReady)
    return ep


def test_calls_answered_in_send_order() -> None:
    ep = _ready(FIFOScheduler())
    snap = TrialSnapshot("a", {}, TrialStatus.PENDING)
    assert ep.call(SchedulerCall(2, HookKind.CHOOSE)) == []  # early: held until call 1 arrives
    out = ep.call(SchedulerCall(1, HookKind.ADD, "a", updates=(snap,)))
    assert [(type(m), m.seq, m.kind) for m in out] == [
        (SchedulerReply, 1, HookKind.ADD), (SchedulerReply, 2, HookKind.CHOOSE)]
    assert out[1].chosen == "a"  # the mirror had the trial before CHOOSE ran
    assert ep.call(SchedulerCall(1, HookKind.CHOOSE)) == []  # a duplicate is dropped


def test_raising_hook_and_bad_plugin_are_reported() -> None:
    ep = _ready(Boom())
    snap = TrialSnapshot("a", {}, TrialStatus.RUNNING)
    ep.call(SchedulerCall(1, HookKind.ADD, "a", updates=(snap,)))
    (failed,) = ep.call(SchedulerCall(2, HookKind.RESULT, "a", ({"loss": 1.0},)))
    assert isinstance(failed, SchedulerFailed) and failed.seq == 2
    assert "Boom raised in its result hook" in failed.error and "ValueError('boom')" in failed.error
    bad = SchedulerEndpoint().setup(SchedulerSetup(b"not a pickle", None, None))
    assert isinstance(bad, SchedulerFailed) and "loading the scheduler failed" in bad.error
    (unset,) = SchedulerEndpoint().call(SchedulerCall(1, HookKind.CHOOSE))
    assert isinstance(unset, SchedulerFailed) and "not set up" in unset.error


def test_a_trials_name_survives_its_results_in_the_schedulers_mirror() -> None:
    """The mirror's snapshot takes each result without losing what else it knew (the trial's
    trial_name_creator / trial_dirname_creator names, its failures, its checkpoint)."""
    from typing import Any

    from actors._engine.scheduler_host import SchedulerHost
    from actors._engine.trial import TrialSnapshot, TrialStatus
    from actors.messages import HookKind, SchedulerCall
    from actors.schedulers import FIFOScheduler

    seen: list[Any] = []

    class Names(FIFOScheduler):
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            seen.append((trial.custom_trial_name, trial.custom_dirname, trial.num_failures,
                         trial.last_result["training_iteration"]))
            return super().on_trial_result(controller, trial, result)

    host = SchedulerHost(Names(), "loss", "min")
    snap = TrialSnapshot("t", {}, TrialStatus.RUNNING, {}, 1, 2, custom_trial_name="nice", custom_dirname="d")
    host.handle(SchedulerCall(1, HookKind.ADD, "t", (), (snap,)))
    host.handle(SchedulerCall(2, HookKind.RESULT, "t", ({"training_iteration": 1},)))
    host.handle(SchedulerCall(3, HookKind.RESULT, "t", ({"training_iteration": 2},)))
    assert seen == [("nice", "d", 1, 1), ("nice", "d", 1, 2)]


def test_ray_tune_decision_constants_are_understood() -> None:
    """A plugin written for Ray Tune returns ``TrialScheduler.STOP`` ("STOP") or ``self.PAUSE``: both
    work; a value that is no decision fails the experiment with a message naming it."""
    from typing import Any

    import cloudpickle

    from actors._engine.reducer import Decision
    from actors._engine.scheduler_endpoint import SchedulerEndpoint
    from actors._engine.trial import TrialSnapshot, TrialStatus
    from actors.messages import HookKind, SchedulerCall, SchedulerFailed, SchedulerReply, SchedulerSetup
    from actors.schedulers import FIFOScheduler

    class RayStyle(FIFOScheduler):
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            return result["answer"]

    ep = SchedulerEndpoint()
    ep.setup(SchedulerSetup(cloudpickle.dumps(RayStyle()), "loss", "min", None))
    ep.call(SchedulerCall(1, HookKind.ADD, "t", (), (TrialSnapshot("t", {}, TrialStatus.RUNNING),)))
    for seq, (answer, want) in enumerate([("STOP", Decision.STOP), ("PAUSE", Decision.PAUSE), ("NOOP", Decision.NOOP),
                                          ("CONTINUE", Decision.CONTINUE), (RayStyle.STOP, Decision.STOP),
                                          (None, Decision.CONTINUE)], start=2):
        (reply,) = ep.call(SchedulerCall(seq, HookKind.RESULT, "t", ({"answer": answer},)))
        assert isinstance(reply, SchedulerReply) and reply.decision is want, (answer, reply)
    (failed,) = ep.call(SchedulerCall(8, HookKind.RESULT, "t", ({"answer": "stop please"},)))
    assert isinstance(failed, SchedulerFailed)
    assert "must return Decision.CONTINUE, PAUSE, STOP or NOOP" in failed.error and "'stop please'" in failed.error
