"""The scheduler actor's protocol as a pure object (what the actor and the simulator both run)."""

from __future__ import annotations

import base64
from typing import Any

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

    from actors._engine.scheduler_host import SchedulerHost
    from actors._engine.trial import TrialSnapshot, TrialStatus
    from actors.messages import HookKind, SchedulerCall
    from actors.schedulers import FIFOScheduler

    seen: list[Any] = []

    class Names(FIFOScheduler):
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            seen.append((trial.custom_trial_name, trial.custom_dirname, trial.num_failures,
                         trial.last_result.get("training_iteration")))
            return super().on_trial_result(controller, trial, result)

    host = SchedulerHost(Names(), "loss", "min")
    snap = TrialSnapshot("t", {}, TrialStatus.RUNNING, {}, 1, 2, custom_trial_name="nice", custom_dirname="d")
    host.handle(SchedulerCall(1, HookKind.ADD, "t", (), (snap,)))
    host.handle(SchedulerCall(2, HookKind.RESULT, "t", ({"training_iteration": 1},)))
    host.handle(SchedulerCall(3, HookKind.RESULT, "t", ({"training_iteration": 2},)))
    # as Ray's, trial.last_result is the trial's previous result while the hook runs
    assert seen == [("nice", "d", 1, None), ("nice", "d", 1, 1)]


def test_ray_tune_decision_constants_are_understood() -> None:
    """A plugin written for Ray Tune returns ``TrialScheduler.STOP`` ("STOP") or ``self.PAUSE``: both
    work; a value that is no decision fails the experiment with a message naming it."""

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


def test_decisions_compare_and_print_as_rays_strings() -> None:
    """Ray 2.60's ``TrialScheduler`` constants are the strings themselves (recorded, tests/data/ray_api_semantics.json:
    ``repr(TrialScheduler.STOP)`` is ``'STOP'``): a plugin ported from Ray that compares a decision with one, or prints
    it, does what it did there (but NOOP, which is CONTINUE here). Merging is still ``max`` over the ints."""
    from actors.schedulers import Decision, TrialScheduler
    from tests._ray_api import RAY_API

    for name in ("CONTINUE", "PAUSE", "STOP"):
        ray = RAY_API["constants"][name]
        assert (repr(getattr(TrialScheduler, name)), str(getattr(TrialScheduler, name))) == (ray["repr"], ray["str"])

    assert TrialScheduler.STOP == "STOP" and "PAUSE" == TrialScheduler.PAUSE and TrialScheduler.NOOP == "NOOP"
    assert not TrialScheduler.STOP != "STOP" and TrialScheduler.STOP != "PAUSE" and TrialScheduler.STOP != "stop"
    assert (str(Decision.STOP), f"{Decision.PAUSE}", repr([Decision.CONTINUE])) == ("STOP", "PAUSE", "['CONTINUE']")
    assert Decision.STOP == 2 and max(Decision.PAUSE, Decision.STOP) is Decision.STOP and hash(Decision.STOP) == hash(2)


def test_a_ray_plugin_that_compares_decisions_with_strings_decides_as_in_ray() -> None:
    from actors import TuneConfig, search
    from actors.schedulers import ASHAScheduler, TrialScheduler
    from actors.testing import simulate

    class NeverStops(ASHAScheduler):  # as written for Ray: ASHA's answer compared with Ray's string
        def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            decision = super().on_trial_result(controller, trial, result)
            return TrialScheduler.CONTINUE if decision == "STOP" else decision

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i}

    for scheduler, all_nine in ((NeverStops(max_t=9, grace_period=1), True),
                                (ASHAScheduler(max_t=9, grace_period=1), False)):
        with simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                      TuneConfig(metric="loss", mode="min", num_samples=8, scheduler=scheduler),
                      max_iterations=9, cpus=2, seed=0) as sim:
            ran = [r.metrics["training_iteration"] for r in sim.results]
        assert (ran == [9] * 8) is all_nine, ran


SEEN_ON_RESTORE: list[tuple[str, frozenset[str]]] = []


class _Watching(FIFOScheduler):
    """Records which trials the plugin's controller knows at every hook (module level: the
    restored run unpickles its own copy of the scheduler)."""

    def on_trial_add(self, controller, trial):
        SEEN_ON_RESTORE.append(("add", frozenset(t.trial_id for t in controller.get_trials())))

    def choose_trial_to_run(self, controller):
        SEEN_ON_RESTORE.append(("choose", frozenset(t.trial_id for t in controller.get_trials())))
        return super().choose_trial_to_run(controller)


def test_a_restored_plugin_sees_every_saved_trial_at_its_first_hook() -> None:
    """The scheduler's saved state no longer holds its mirror of the table (2026-12-04): a restore
    rebuilds the mirror from the core's first call, which carries every trial of the saved table, so
    the plugin's ``get_trials()`` is whole before any hook of the restored run runs."""
    from actors import RunConfig, TuneConfig
    from actors._legacy import loads
    from actors.testing import Faults, simulate
    from storage import ExperimentLayout, StorageContext
    from storage._state import read_experiment_state

    def curve(config: dict[str, float], i: int) -> dict[str, float]:
        return {"loss": config["x"] / i, "time_this_iter_s": 1.0}

    sim = simulate(curve, {"x": 1.0}, TuneConfig(metric="loss", mode="min", num_samples=6, scheduler=_Watching()),
                   RunConfig(), max_iterations=20, cpus=2, seed=5, faults=Faults(abort_at_s=4.0))
    assert sim.error and "simulated abort" in sim.error
    ctx = StorageContext(sim.storage_url)
    state = read_experiment_state(ctx, ExperimentLayout(ctx, sim.name))
    assert state is not None
    saved = {row["trial_id"] for row in state["trials"]}
    assert len(saved) == 6
    assert set(loads(base64.b64decode(state["scheduler"]))) == {"scheduler"}  # no mirror
    SEEN_ON_RESTORE.clear()
    again = simulate(curve, restore=sim.experiment_path, seed=5, max_iterations=20)
    assert not again.hung and again.error is None
    assert SEEN_ON_RESTORE and SEEN_ON_RESTORE[0][1] == saved, SEEN_ON_RESTORE[:2]
    sim.discard()
    again.discard()
