"""An exploit the controller could not apply (its source had no checkpoint to give) is told to the scheduler, and
PBT takes back what it recorded of it, as Ray's PBT, which decides the skip itself, never records one.

Ray 2.60's ``PopulationBasedTraining._exploit`` returns before it copies the source's ``last_perturbation_time``
and ``last_train_time`` or counts the perturbation when the source's checkpoint resolves to none (read from
Ray's source). audition's PBT asks for the clone before the controller knows whether the source's save will
give one, so the controller tells it afterwards (``SchedulerCall.skipped_clones``, ``on_clone_skipped``).
"""

from __future__ import annotations

from typing import Any

from actors._engine.clones import CloneWaits
from actors._engine.lifecycle import TrialTable
from actors._engine.reducer import Decision
from actors._engine.scheduler_host import RecordingController, SchedulerHost
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind, HookKind, SchedulerAction, SchedulerCall
from actors.schedulers import FIFOScheduler, PopulationBasedTraining, ResourceChangingScheduler
from tests._core_harness import ALL_HOOKS, Harness, make_spec


def test_pbt_takes_back_the_clocks_and_the_record_of_a_skipped_exploit() -> None:
    pbt = PopulationBasedTraining(time_attr="training_iteration", metric="loss", mode="min",
                                  perturbation_interval=2, hyperparam_mutations={"lr": [0.1, 0.2, 0.3]}, seed=0)
    ctl = RecordingController()
    a = TrialSnapshot("a", {"lr": 0.1}, TrialStatus.RUNNING)
    b = TrialSnapshot("b", {"lr": 0.2}, TrialStatus.RUNNING, checkpoint_iteration=4)
    ctl.trials = {"a": a, "b": b}
    pbt.on_trial_add(ctl, a)
    pbt.on_trial_add(ctl, b)
    pbt.on_trial_result(ctl, a, {"training_iteration": 2, "loss": 1.0})
    pbt.on_trial_result(ctl, b, {"training_iteration": 4, "loss": 0.1})  # top: checkpointed, others may clone it
    ctl.actions = []
    assert pbt.on_trial_result(ctl, a, {"training_iteration": 5, "loss": 1.0}) is Decision.CONTINUE
    assert [(x.kind, x.trial_id, x.source_id) for x in ctl.actions if x.kind is ActionKind.CLONE] == [
        (ActionKind.CLONE, "a", "b")]
    m = pbt._members["a"]
    assert (m.last_perturbation, m.last_train_time, len(pbt._exploits)) == (4, 4, 1)  # the source's clocks
    pbt.on_clone_skipped(ctl, "a", "b")
    assert (m.last_perturbation, m.last_train_time, len(pbt._exploits)) == (5, 5, 0)  # its own, as Ray's skip
    pbt.on_clone_skipped(ctl, "a", "b")  # (told twice: nothing more to take back)
    assert (m.last_perturbation, m.last_train_time, len(pbt._exploits)) == (5, 5, 0)


class _Heard(FIFOScheduler):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[tuple[str, str, str]] = []

    def on_clone_skipped(self, tune_controller: Any, trial_id: str, source_id: str) -> None:
        self.heard.append(("skipped", trial_id, source_id))

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self.heard.append(("add", trial.trial_id, ""))


def test_the_scheduler_hears_of_a_skipped_clone_before_the_calls_hook_and_through_a_wrapper() -> None:
    for sched in (_Heard(), ResourceChangingScheduler(_Heard())):
        host = SchedulerHost(sched, "loss", "min")
        host.handle(SchedulerCall(1, HookKind.ADD, "a", (), (TrialSnapshot("a", {}, TrialStatus.PENDING),), (),
                                  None, (("b", "c"),)))
        inner = sched._base_scheduler if isinstance(sched, ResourceChangingScheduler) else sched
        assert inner.heard == [("skipped", "b", "c"), ("add", "a", "")]


def test_the_controller_tells_the_next_call_of_an_exploit_it_skipped_once() -> None:
    """A source whose exploit save died with its run: the clone is skipped (tests/test_core_unit.py) and the
    scheduler's next call says so, once."""
    from tests.test_core_unit import _result, _running

    h = Harness(make_spec(num_samples=2, max_concurrent=2, max_failures=3))
    a, b = list(_running(h, ALL_HOOKS))
    h.handle(_result(a, 1, 1))
    [call] = h.open_calls(HookKind.RESULT)
    h.reply(call.seq, Decision.CONTINUE, (
        SchedulerAction(ActionKind.CLONE, a, source_id=b, new_config={"lr": 2}, wait_for_source=True),))
    h.handle(_result(a, 1, 2))
    [call] = h.open_calls(HookKind.RESULT)
    assert call.skipped_clones == ((a, b),)
    h.reply(call.seq, Decision.CONTINUE)
    h.handle(_result(a, 1, 3))
    [call] = h.open_calls(HookKind.RESULT)
    assert call.skipped_clones == ()


def test_a_waiting_clone_dropped_for_want_of_its_sources_checkpoint_is_told_too() -> None:
    table = TrialTable()
    for t in ("clone", "src"):
        table.add(t, {"lr": 1})
        table.start(t)
    table.get("src").saves_inflight = 1
    waits = CloneWaits(table)
    clone = SchedulerAction(ActionKind.CLONE, "clone", source_id="src", new_config={"lr": 2}, wait_for_source=True)
    table.request(clone, None, waiting=waits.would_wait(clone))
    waits.note(clone)
    waits.landed("src", None)
    assert waits.take_skipped() == (("clone", "src"),) and waits.take_skipped() == ()


def test_a_request_made_when_hearing_of_a_skipped_clone_travels_with_that_calls_reply() -> None:
    class PausesIt(FIFOScheduler):
        def on_clone_skipped(self, tune_controller: Any, trial_id: str, source_id: str) -> None:
            tune_controller.pause_trial(trial_id)

    host = SchedulerHost(PausesIt(), "loss", "min")
    reply = host.handle(SchedulerCall(1, HookKind.CHOOSE, None, (), (TrialSnapshot("b", {}, TrialStatus.RUNNING),),
                                      (), None, (("b", "c"),)))
    assert [(a.kind, a.trial_id) for a in reply.actions] == [(ActionKind.PAUSE, "b")]
