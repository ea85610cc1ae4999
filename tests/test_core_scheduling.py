"""``Scheduling`` (actors/_engine/scheduling.py) through the core: what a hook's reply does besides its
decision, the loop that asks the plugin for a trial (and the two ways a run that can never go on ends
with an error naming the culprit), and what each hook call carries. Tests written after a mutation pass
over the module: each fails with one of the changes the core's other tests let through."""

from __future__ import annotations

from typing import Any

from actors._engine.core import ExperimentPhase
from actors._engine.signals import Finish, MemberJoined, Start, Tick, Wake
from actors._engine.trial import TrialStatus
from actors.messages import (
    AbortExperiment,
    ActionKind,
    CallbackAnswer,
    EndReason,
    HookKind,
    RunTrial,
    SchedulerAction,
    SchedulerCall,
    TrialEnded,
    TrialProceed,
    TrialProcess,
    TrialResults,
    TrialSave,
    TrialStop,
)
from actors.search import Searcher
from tests._core_harness import (
    ALL_HOOKS,
    FIFO_HOOKS,
    Harness,
    first_chosen,
    make_spec,
    of_type,
    second_choice_out,
    sent,
)


def test_requests_a_choice_reply_carries_take_effect() -> None:
    """A plugin may stop or pause trials from choose_trial_to_run (HyperBand stops a bracket's losers there):
    those requests run as the reply is applied, beside the trial it chose."""
    h, first, choose = second_choice_out()
    h.handle(TrialProcess(first, 1, 4001))
    second = next(t for t in h.core.table.trials if t != first)
    out = h.reply(choose.seq, chosen=second, actions=(SchedulerAction(ActionKind.STOP, first),))
    assert sent(out, TrialStop) and sent(out, TrialStop)[0].trial_id == first
    assert [r.trial_id for r in sent(out, RunTrial)] == [second]


def test_a_plugin_that_never_chooses_a_waiting_trial_ends_the_run_with_an_error_naming_it() -> None:
    h = Harness(make_spec(num_samples=1, max_concurrent=1))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    [choose] = h.open_calls(HookKind.CHOOSE)
    [waiting] = list(h.core.table.trials)
    h.reply(choose.seq, chosen=None)
    assert h.phase is ExperimentPhase.ABORTING
    assert h.core.error is not None and "the scheduler chose no trial to run although nothing is running and " \
        f"1 trial(s) wait ({waiting}); its choose_trial_to_run must return a PENDING or PAUSED trial" in h.core.error
    out = h.answer_all()  # the abort's scheduler state
    [fin] = of_type(out, Finish)
    assert fin.error == h.core.error


def test_a_choice_declined_while_every_slot_is_taken_is_no_error() -> None:
    """Nothing running is the condition: a plugin that declines while a trial runs is waiting for it."""
    h, first, choose = second_choice_out()
    h.handle(TrialProcess(first, 1, 4001))
    h.reply(choose.seq, chosen=None)
    assert h.phase is ExperimentPhase.RUNNING and h.core.error is None


class NeverSuggests(Searcher):
    """A search algorithm that never has a configuration and never says it is finished."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return None

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def test_a_search_algorithm_that_suggests_nothing_while_nothing_runs_ends_the_run_with_an_error() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2, searcher=NeverSuggests()))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    assert h.phase is ExperimentPhase.ABORTING and not h.core.table.trials
    assert h.core.error is not None and h.core.error.startswith(
        "the search algorithm suggested no configuration while no trial was running; it would wait forever")


class RaisesInSuggest(Searcher):
    """Suggests one configuration, then raises."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        self.asked += 1
        if self.asked > 1:
            raise RuntimeError("no more ideas")
        return {"x": 1}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def test_a_search_algorithm_raising_in_suggest_ends_the_run_with_its_error_before_any_choice() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2, searcher=RaisesInSuggest()))
    h.handle(Start(), at=0.0)
    out = h.ready(FIFO_HOOKS)
    assert h.phase is ExperimentPhase.ABORTING
    assert h.core.error is not None and "no more ideas" in h.core.error and "suggest" in h.core.error
    assert len(h.core.table.trials) == 1, "the first configuration was drawn"
    assert [c.kind for c in sent(out, SchedulerCall)] == [HookKind.SAVE], "no CHOOSE once the run is ending"


def test_the_plugin_is_asked_for_a_trial_only_while_the_concurrency_cap_leaves_room() -> None:
    """Across hosts the members' slots may outnumber max_concurrent_trials: the cap still holds."""
    h = Harness(make_spec(num_samples=3, max_concurrent=1, multi_host=True, leader_resources={}))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    h.handle(MemberJoined("w1", {"cpu": 4.0}, "addr-1"), at=0.1)
    first_chosen(h)
    assert h.core.members.free_slots() == 3 and h.core.table.count(TrialStatus.PENDING) >= 1
    assert h.open_calls(HookKind.CHOOSE) == [], "one trial runs and the cap is one"


def test_each_hook_call_carries_only_the_trials_changed_since_the_last() -> None:
    h = Harness(make_spec(num_samples=2, max_concurrent=2))
    h.handle(Start(), at=0.0)
    h.ready(ALL_HOOKS)
    assert {u.trial_id for c in h.open_calls() for u in c.updates} == set(h.core.table.trials)
    h.answer_all()
    first, second = list(h.core.table.trials)
    for t in (first, second):
        h.handle(TrialProcess(t, 1, 4001))
    h.handle(TrialResults(first, 1, 1, ({"training_iteration": 1, "loss": 0.5},), None))
    h.answer_all()
    out = h.handle(TrialResults(first, 1, 2, ({"training_iteration": 2, "loss": 0.4},), None))
    [call] = [c for c in sent(out, SchedulerCall) if c.kind is HookKind.RESULT]
    assert second not in {u.trial_id for u in call.updates}, "the other trial did not change since the last call"


def test_nothing_is_added_or_asked_for_while_the_run_aborts() -> None:
    """A trial ending while an abort waits for the scheduler's state frees a slot: no trial is drawn for it
    and the plugin is not asked for one (the run is ending)."""
    h = Harness(make_spec(num_samples=4, max_concurrent=1))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    first = first_chosen(h)
    h.handle(TrialProcess(first, 1, 4001))
    drawn = len(h.core.table.trials)
    h.handle(AbortExperiment("ctrl-c"))
    assert h.phase is ExperimentPhase.ABORTING
    out = h.handle(TrialEnded(first, 1, 1, EndReason.STOPPED)) + h.handle(Wake(Tick.PERIODIC))
    assert len(h.core.table.trials) == drawn and not sent(out, RunTrial)
    assert [c.kind for c in sent(out, SchedulerCall)] == []


def test_a_result_reply_whose_rows_cannot_be_written_ends_the_run_cleanly() -> None:
    """The decision's batch is logged as the reply is applied; a storage failure there aborts the run, and
    nothing of that reply (its requests, its decision) is applied after it."""
    h, [trial], call = _result_call()
    h.store.on_results = lambda rec, results: "storage: the rows could not be written"
    out = h.reply(call.seq, actions=(SchedulerAction(ActionKind.PAUSE, trial),))
    assert h.phase is ExperimentPhase.ABORTING and h.core.error == "storage: the rows could not be written"
    assert not sent(out, TrialProceed) and not [m for m in sent(out, TrialSave)], "nothing after the failure"


class Pausable(Searcher):
    """A search algorithm with BOHB's on_pause, recording its calls and the results it hears, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[tuple[str, str]] = []

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return {"x": 1}

    def on_pause(self, trial_id: str) -> None:
        self.heard.append(("on_pause", trial_id))

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.heard.append(("on_trial_result", trial_id))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def _result_call(searcher: Searcher | None = None, trials: int = 1, reporter: int = 0
                 ) -> tuple[Harness, list[str], SchedulerCall]:
    """``trials`` trials running under a plugin with every hook; the RESULT call of the ``reporter``'s first
    result, still out."""
    over: dict[str, Any] = {} if searcher is None else {"searcher": searcher}
    h = Harness(make_spec(num_samples=trials, max_concurrent=trials, **over))
    h.handle(Start(), at=0.0)
    h.ready(ALL_HOOKS)
    h.answer_all()
    ids = list(h.core.table.trials)
    for i, t in enumerate(ids):
        h.handle(TrialProcess(t, 1, 4001 + i))
    out = h.handle(TrialResults(ids[reporter], 1, 1, ({"training_iteration": 1, "loss": 0.5},), None))
    [call] = [c for c in sent(out, SchedulerCall) if c.kind is HookKind.RESULT]
    return h, ids, call


def test_a_hooks_call_of_the_search_algorithm_is_made_before_the_searcher_hears_of_the_result() -> None:
    """HyperBandForBOHB calls ``search_alg.searcher.on_pause`` inside on_trial_result, as Ray's: the call is
    recorded with the hook's requests and made when its reply is applied, before the result is logged."""
    searcher = Pausable()
    h, [trial], call = _result_call(searcher)
    h.reply(call.seq, actions=(SchedulerAction(ActionKind.SEARCHER, trial, False, method="on_pause", args=(trial,)),))
    assert searcher.heard == [("on_pause", trial), ("on_trial_result", trial)]


class WithoutPause(Searcher):
    """A search algorithm without BOHB's on_pause (what HyperBandForBOHB without TuneBOHB meets)."""

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        return {"x": 1}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def test_a_hooks_call_of_a_method_the_search_algorithm_lacks_ends_the_run_naming_it() -> None:
    h, [trial], call = _result_call(WithoutPause())
    out = h.reply(call.seq, actions=(SchedulerAction(ActionKind.SEARCHER, trial, False, method="on_pause",
                                                     args=(trial,)),))
    assert h.phase is ExperimentPhase.ABORTING
    assert "the scheduler called the search algorithm's on_pause(), which WithoutPause does not have" in (
        h.core.error or "")
    assert not sent(out, TrialProceed), "nothing of the reply is applied after it"


def test_a_request_in_the_reply_to_a_result_of_a_run_that_ended_since_still_takes_effect() -> None:
    """Trial a's result is being decided when a's run ends (the trainable returned); the hook stopped trial b
    meanwhile (ASHA's rung, HyperBand's bracket): b is stopped though a's batch was logged at a's end."""
    h, [a, b], call = _result_call(trials=2)
    h.handle(TrialEnded(a, 1, 2, EndReason.COMPLETED))
    out = h.reply(call.seq, actions=(SchedulerAction(ActionKind.STOP, b),))
    assert [m.trial_id for m in sent(out, TrialStop)] == [b]


def test_an_exploits_policy_line_names_its_source_so_the_clone_inherits_the_sources_policy() -> None:
    """Ray's PBT log_config: the clone's pbt_policy file starts as its source's (storage/_pbt_policy.py)."""
    h, [a, b], call = _result_call(trials=2, reporter=1)
    h.reply(call.seq, actions=(SchedulerAction(ActionKind.LOG_POLICY, b, False, a, info={"new_config": {"x": 2}}),))
    assert [(t, s) for t, s, _ in h.store.policy] == [(b, a)]


def test_the_run_ends_only_after_the_drivers_callbacks_answered_for_the_last_result() -> None:
    """A driver callback's on_trial_result may set should_checkpoint on a trial's last result; Ray logs that
    row after the callbacks ran, so the experiment waits for their answer before it finishes."""
    h = Harness(make_spec(num_samples=1, max_concurrent=1, callback_gate=True, forward_events=True))
    h.handle(Start(), at=0.0)
    h.ready(FIFO_HOOKS)
    h.answer_all()
    [trial] = list(h.core.table.trials)
    h.handle(TrialProcess(trial, 1, 4001))
    h.handle(TrialResults(trial, 1, 1, ({"training_iteration": 1, "loss": 0.5, "done": True},), None))
    out = h.handle(TrialEnded(trial, 1, 2, EndReason.COMPLETED)) + h.answer_all()
    assert not of_type(out, Finish) and h.phase is ExperimentPhase.RUNNING, "the driver has not answered yet"
    out = h.handle(CallbackAnswer(trial, 1, 1, checkpoint=False))
    assert of_type(out, Finish) and h.phase is ExperimentPhase.FINISHED
