"""``SchedulerHost`` alone: what a hook's controller calls record, and what the mirror of the trial table shows.

Written from a mutation pass over ``actors/_engine/scheduler_host.py`` (``docs/testing.md``): each test pins
down behaviour that the scheduler, simulator and end-to-end tests let change unnoticed.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from actors._engine.reducer import Decision
from actors._engine.scheduler_host import SchedulerHost
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind, HookKind, SaveKind, SchedulerAction, SchedulerCall, SchedulerReply
from actors.schedulers import FIFOScheduler


class Scripted(FIFOScheduler):
    """Runs ``script(controller, trial, result)`` in its result hook and returns what it returns."""

    def __init__(self, script: Any = None) -> None:
        super().__init__()
        self.script = script
        self.heard: list[tuple[str, str]] = []
        self.props: list[tuple[Any, Any]] = []
        self.state_n = 0

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        self.props.append((metric, mode))
        return True

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        self.state_n += 1
        return self.script(controller, trial, result) if self.script else "CONTINUE"

    def on_trial_remove(self, controller: Any, trial: Any) -> None:
        self.heard.append(("remove", trial.trial_id))

    def get_state(self) -> dict[str, Any]:
        return {"n": self.state_n}

    def set_state(self, state: dict[str, Any]) -> None:
        self.state_n = state["n"]


def _snap(tid: str, status: TrialStatus = TrialStatus.RUNNING, **kw: Any) -> TrialSnapshot:
    return TrialSnapshot(tid, {"x": 1}, status, **kw)


def _host(script: Any = None, **kw: Any) -> tuple[SchedulerHost, Scripted]:
    sched = Scripted(script)
    host = SchedulerHost(sched, "loss", "min", **kw)
    seq = 0
    for tid in ("a", "b"):
        seq += 1
        host.handle(SchedulerCall(seq, HookKind.ADD, tid, updates=(_snap(tid),)))
    return host, sched


def _result(host: SchedulerHost, tid: str = "a", seq: int = 10, **result: Any) -> SchedulerReply:
    return host.handle(SchedulerCall(seq, HookKind.RESULT, tid, ({"training_iteration": 1, "loss": 1.0, **result},)))


def test_a_checkpoint_the_pausing_hook_asked_for_its_own_trial_is_the_pauses_save() -> None:
    """Ray 2.60 pauses after the scheduler's save without another: that save is the pause's."""

    def script(ctl: Any, trial: Any, result: dict[str, Any]) -> str:
        ctl.checkpoint_trial(trial)
        ctl.checkpoint_trial(ctl.get_trials()[1])  # another trial's save stays a plain one
        return decision

    decision = "PAUSE"
    host, _ = _host(script)
    reply = _result(host)
    assert reply.decision is Decision.PAUSE
    assert [(a.kind, a.trial_id, a.save) for a in reply.actions] == [
        (ActionKind.CHECKPOINT, "a", SaveKind.PAUSE), (ActionKind.CHECKPOINT, "b", SaveKind.SCHEDULER)]
    decision = "CONTINUE"
    reply = _result(host, seq=11)
    assert {a.save for a in reply.actions} == {SaveKind.SCHEDULER}, "not pausing: its own save stays a plain one"


def test_each_controller_call_is_recorded_with_its_arguments() -> None:
    def script(ctl: Any, trial: Any, result: dict[str, Any]) -> str:
        other = ctl.get_trials()[1]
        ctl.resume_trial(other)
        ctl.clone_trial(trial, other, {"x": 2}, {"why": "exploit"})
        ctl.log_policy(trial, other, {"row": 1})
        ctl.pause_trial(other, should_checkpoint=False)
        ctl.stop_trial("b")
        return "CONTINUE"

    host, _ = _host(script)
    reply = _result(host)
    assert reply.actions == (
        SchedulerAction(ActionKind.RESUME, "b"),
        SchedulerAction(ActionKind.CLONE, "a", False, "b", {"x": 2}, {"why": "exploit"}, wait_for_source=False,
                        experiment_tag=None),
        SchedulerAction(ActionKind.LOG_POLICY, "a", False, "b", info={"row": 1}),
        SchedulerAction(ActionKind.PAUSE, "b", False),
        SchedulerAction(ActionKind.STOP, "b"),
    )


def test_calls_of_the_search_algorithm_are_recorded_by_method_and_trial() -> None:
    def script(ctl: Any, trial: Any, result: dict[str, Any]) -> str:
        ctl.search_alg.searcher.on_pause(trial.trial_id)
        ctl.search_alg.set_budget(3, "x")  # (a first argument that is no trial id names no trial)
        with pytest.raises(AttributeError):
            ctl.search_alg._private  # noqa: B018  (private names are not calls to record)
        return "CONTINUE"

    host, _ = _host(script)
    assert _result(host).actions == (
        SchedulerAction(ActionKind.SEARCHER, "a", False, method="on_pause", args=("a",)),
        SchedulerAction(ActionKind.SEARCHER, "", False, method="set_budget", args=(3, "x")),
    )


def test_a_hook_that_changes_its_result_sends_it_back_and_one_that_does_not_sends_nothing() -> None:
    def script(ctl: Any, trial: Any, result: dict[str, Any]) -> str:
        if result["training_iteration"] == 2:
            result["budget"] = 9  # (HyperBandForBOHB adds its hyperband_info)
        if result["training_iteration"] == 5:
            del result["loss"]
        return "CONTINUE"

    host, _ = _host(script)
    assert _result(host).notes == ()
    changed = _result(host, seq=11, training_iteration=2)
    assert len(changed.notes) == 1 and changed.notes[0] is not None and changed.notes[0]["budget"] == 9
    two = host.handle(SchedulerCall(12, HookKind.RESULT, "a", ({"training_iteration": 3, "loss": 1.0},
                                                               {"training_iteration": 2, "loss": 1.0})))
    assert [n is None for n in two.notes] == [True, False], "one note per result, None where unchanged"
    dropped = _result(host, seq=13, training_iteration=5)
    assert len(dropped.notes) == 1 and dropped.notes[0] is not None and "loss" not in dropped.notes[0]


def test_a_plugin_that_declares_it_leaves_results_alone_is_not_watched() -> None:
    class Leaves(Scripted):
        _leaves_results = True

    host = SchedulerHost(Leaves(lambda c, t, r: r.update(x=1) or "CONTINUE"), "loss", "min")
    host.handle(SchedulerCall(1, HookKind.ADD, "a", updates=(_snap("a"),)))
    assert _result(host).notes == ()
    assert host.watch_results is False and SchedulerHost(Scripted(), None, None).watch_results is True


def test_the_mirror_follows_the_tables_order_and_a_trial_added_again_goes_last() -> None:
    host, _ = _host()
    host.handle(SchedulerCall(3, HookKind.ADD, "c", updates=(_snap("c"),)))
    assert [t.trial_id for t in host.controller.get_trials()] == ["a", "b", "c"]
    host.handle(SchedulerCall(4, HookKind.ADD, "a"))  # a retry adds it again: Ray's _requeue_trial
    assert [t.trial_id for t in host.controller.get_trials()] == ["b", "c", "a"]
    host.handle(SchedulerCall(5, HookKind.CHOOSE, order=("c", "a", "b")))
    assert [t.trial_id for t in host.controller.get_trials()] == ["c", "a", "b"]


def test_remove_reaches_the_plugin() -> None:
    host, sched = _host()
    host.handle(SchedulerCall(3, HookKind.REMOVE, "b", updates=(_snap("b", TrialStatus.TERMINATED),)))
    assert sched.heard == [("remove", "b")]


def test_the_plugin_is_told_the_metric_once_and_restores_from_a_saved_state() -> None:
    host, sched = _host()
    assert sched.props == [("loss", "min")]
    _result(host)
    _result(host, seq=11)
    state = host.handle(SchedulerCall(12, HookKind.SAVE)).state
    assert state is not None
    told = Scripted()
    SchedulerHost(told, "loss", "min", search_properties=False)
    assert told.props == [], "not told again: the driver told the object this is a copy of"
    copy = Scripted()
    again = SchedulerHost(copy, "loss", "min", state=state)
    assert copy.state_n == 2, "restored"
    assert again.controller.get_trials() == [], "the mirror comes from the core's next call"
    legacy = pickle.dumps({"scheduler": pickle.loads(state)["scheduler"], "trials": {"a": _snap("a")}})
    assert [t.trial_id for t in SchedulerHost(Scripted(), None, None, state=legacy).controller.get_trials()] == ["a"]


def test_a_host_refuses_what_is_not_a_scheduler() -> None:
    with pytest.raises(TypeError, match=r"actors\.schedulers\.Scheduler instance, got dict"):
        SchedulerHost({}, "loss", "min")  # type: ignore[arg-type]


def test_the_mirrors_last_result_is_rays_trial_last_result() -> None:
    """Before a run's first result the mirror shows the trial's last one seen (a retried run keeps it), or the
    keys its run started with; a reported result ends with the experiment tag, except the snapshot of a run
    that is just starting (its checkpoint's result, untagged)."""
    host, _ = _host()
    _result(host)
    seen = host.controller.trials["a"].last_result
    host.handle(SchedulerCall(11, HookKind.CHOOSE, updates=(_snap("a", TrialStatus.PENDING),)))
    assert host.controller.trials["a"].last_result == seen, "a retried run keeps the failed run's result"
    host.handle(SchedulerCall(12, HookKind.CHOOSE, updates=(_snap("b", run_start={"pid": 7}),)))
    assert host.controller.trials["b"].last_result == {"pid": 7}, "no result yet: the keys the run started with"
    done = {"training_iteration": 4, "loss": 0.5}
    tagged_snap = _snap("b", TrialStatus.PAUSED, last_result=done, experiment_tag="1_x=1")
    host.handle(SchedulerCall(13, HookKind.CHOOSE, updates=(tagged_snap,)))
    assert host.controller.trials["b"].last_result == {**done, "experiment_tag": "1_x=1"}
    starting = _snap("b", TrialStatus.RUNNING, last_result=done, experiment_tag="1_x=1")
    host.handle(SchedulerCall(14, HookKind.CHOOSE, updates=(starting,)))
    assert host.controller.trials["b"].last_result == done, "a run starting from a checkpoint: untagged"
    host.handle(SchedulerCall(15, HookKind.CHOOSE, updates=(starting,)))
    assert host.controller.trials["b"].last_result == {**done, "experiment_tag": "1_x=1"}, "running on: tagged"
