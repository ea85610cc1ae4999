"""The plugin's own tests, written the way its author would, with audition's SchedulerTestKit.

Run from the plugin's directory (``pytest``), or as part of audition's test suite.
"""

from __future__ import annotations

import pytest
from audition_myplugin import MyScheduler

from actors.schedulers import Decision
from actors.testing import SchedulerTestKit


def test_stops_a_trial_that_trails_the_leader_at_the_checkpoint_iteration() -> None:
    with SchedulerTestKit(MyScheduler(at=2), metric="loss", mode="min") as kit:
        assert kit.ready.batching_allowed is False  # it overrides on_trial_result: decided per result
        kit.add_trial("a", {"lr": 0.1})
        kit.add_trial("b", {"lr": 0.2})
        assert kit.choose() == "a"
        assert kit.result("a", {"training_iteration": 1, "loss": 1.0}).decision is Decision.CONTINUE
        assert kit.result("a", {"training_iteration": 2, "loss": 0.5}).decision is Decision.CONTINUE
        assert kit.result("b", {"training_iteration": 1, "loss": 0.9}).decision is Decision.CONTINUE
        reply = kit.result("b", {"training_iteration": 2, "loss": 0.7})
        assert reply.decision is Decision.STOP
        assert reply.actions == ()  # a returned decision, no controller call


def test_tolerance_and_mode_max() -> None:
    with SchedulerTestKit(MyScheduler(at=1, tolerance=0.1, mode="max"), metric="acc") as kit:
        kit.add_trial("a", {})
        kit.add_trial("b", {})
        kit.add_trial("c", {})
        assert kit.result("a", {"training_iteration": 1, "acc": 0.80}).decision is Decision.CONTINUE
        assert kit.result("b", {"training_iteration": 1, "acc": 0.75}).decision is Decision.CONTINUE
        assert kit.result("c", {"training_iteration": 1, "acc": 0.65}).decision is Decision.STOP


def test_without_metric_the_hook_fails_with_a_clear_message() -> None:
    with SchedulerTestKit(MyScheduler(at=1)) as kit:
        kit.add_trial("a", {})
        with pytest.raises(AssertionError, match="MyScheduler needs metric= and mode="):
            kit.result("a", {"training_iteration": 1, "loss": 1.0})


def test_bad_arguments_are_refused_when_built() -> None:
    with pytest.raises(ValueError, match="at must be an iteration number"):
        MyScheduler(at=0)
    with pytest.raises(ValueError, match="tolerance must be >= 0"):
        MyScheduler(tolerance=-1)
