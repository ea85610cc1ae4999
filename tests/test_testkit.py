"""The actor-level test kit, used the way plugin authors use it."""

from __future__ import annotations

from actors.messages import ActionKind
from actors.schedulers import Decision, FIFOScheduler
from actors.testing import SchedulerTestKit


class PauseAtTwo(FIFOScheduler):
    """Calls pause_trial from on_trial_result and returns NOOP (the Ray Tune hang pattern)."""

    def on_trial_result(self, controller, trial, result):
        if result["training_iteration"] == 2:
            controller.pause_trial(trial, should_checkpoint=True)
        return Decision.NOOP


def test_scheduler_reply_carries_decision_and_actions() -> None:
    with SchedulerTestKit(PauseAtTwo()) as kit:
        assert kit.ready.batching_allowed is False  # overrides on_trial_result without saying so
        kit.add_trial("a", {"x": 1})
        kit.add_trial("b", {"x": 2})
        assert kit.choose() == "a"
        r1 = kit.result("a", {"training_iteration": 1})
        assert r1.decision is Decision.CONTINUE and r1.actions == ()
        r2 = kit.result("a", {"training_iteration": 2})
        assert r2.decision is Decision.NOOP
        assert [(a.kind, a.trial_id, a.should_checkpoint) for a in r2.actions] == [
            (ActionKind.PAUSE, "a", True)]


def test_fifo_prefers_pending_over_paused() -> None:
    from actors._engine.trial import TrialStatus

    with SchedulerTestKit(FIFOScheduler()) as kit:
        assert kit.ready.batching_allowed is True
        kit.add_trial("p", {}, status=TrialStatus.PAUSED)
        kit.add_trial("n", {})
        assert kit.choose() == "n"
