"""Decision horizons (issue 16): a trial runs ahead of its decisions up to the point where its scheduler
may decide anything but CONTINUE, and waits exactly there.

Three layers: the window the worker blocks on (``ResultWindow``); the promise each built-in scheduler
makes (property-tested over random experiments against ``SchedulerHost``: no result below the declared
horizon is ever decided other than CONTINUE); and whole runs, where ASHA's stops land exactly on its
rungs although the trials ran ahead between them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import RunConfig, TuneConfig, Tuner
from actors._driver.errors import TuneError
from actors._engine.horizon import ResultWindow, clean_horizon, reaches
from actors._engine.reducer import Decision
from actors._engine.scheduler_host import SchedulerHost
from actors._engine.signals import Start
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import (
    ActionKind,
    HookKind,
    RunTrial,
    SchedulerAction,
    SchedulerCall,
    SchedulerReady,
    SchedulerReply,
    TrialHold,
    TrialProceed,
    TrialResults,
    TrialSave,
)
from actors.schedulers import (
    ASHAScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    Scheduler,
)
from actors.stoppers import MaximumIterationStopper
from tests._core_harness import ALL_HOOKS, Harness, make_spec, sent

IT = "training_iteration"


# ---------------------------------------------------------------------------------- the worker's window
def test_below_the_horizon_the_worker_runs_ahead_and_at_it_waits_for_the_decision() -> None:
    w = ResultWindow(256, IT, 3.0)
    for i in (1, 2):
        w.reported({IT: i})
        assert not w.full, f"result {i} is below the horizon: no wait"
    w.reported({IT: 3})
    assert w.full, "the result at the horizon must be decided before the next step"
    w.acknowledged(2, 3.0)
    assert w.full, "results 1-2 decided, the horizon's result not yet"
    w.acknowledged(1, 9.0)
    assert not w.full and w.horizon == 9.0 and w.unacked == 0


def test_without_a_horizon_every_result_waits_and_without_an_attribute_the_window_counts() -> None:
    w = ResultWindow(256, IT, None)
    w.reported({IT: 1})
    assert w.full, "no horizon known yet: decided result by result"
    plain = ResultWindow(2)
    plain.reported({IT: 1})
    assert not plain.full
    plain.reported({IT: 2})
    assert plain.full, "a plain window of 2"


@pytest.mark.parametrize("value", [None, "7", float("nan"), True])
def test_a_result_without_a_usable_value_must_be_decided(value: Any) -> None:
    assert reaches({IT: value} if value is not None else {}, IT, 100.0)
    assert not reaches({IT: 5}, IT, 100.0) and reaches({IT: 100}, IT, 100.0)


@pytest.mark.parametrize("bad", ["soon", float("nan"), [3]])
def test_a_horizon_that_is_not_a_number_is_refused_with_the_contract(bad: Any) -> None:
    with pytest.raises(TypeError, match="decision_horizon"):
        clean_horizon(bad)
    assert clean_horizon(None) is None and clean_horizon(3) == 3.0 and clean_horizon(math.inf) == math.inf


# ---------------------------------------------------------------------------------- the core carries them
def _one_started(spec: Any) -> tuple[Harness, RunTrial]:
    """One trial started under a plugin whose ADD reply declares horizon 3."""
    h = Harness(spec)
    h.handle(Start(), at=0.0)
    h.handle(SchedulerReady(False, "ASHAScheduler", ALL_HOOKS, IT))
    [add] = h.open_calls(HookKind.ADD)
    h.calls.pop(add.seq)
    h.handle(SchedulerReply(add.seq, HookKind.ADD, add.trial_id, Decision.CONTINUE, (), horizon=3.0))
    [choose] = h.open_calls(HookKind.CHOOSE)
    [run] = sent(h.reply(choose.seq, chosen=add.trial_id), RunTrial)
    return h, run


def test_the_core_hands_the_horizon_to_the_trial_at_start_and_with_each_acknowledgement() -> None:
    h, run = _one_started(make_spec(num_samples=1, max_concurrent=1))
    assert (run.window, run.horizon_attr, run.horizon) == (h.core.spec.batch_window, IT, 3.0)
    tid = run.trial_id
    h.handle(TrialResults(tid, 1, 1, tuple({IT: i, "loss": 1.0} for i in (1, 2, 3)), None))
    [call] = h.open_calls(HookKind.RESULT)
    assert len(call.results) == 3, "the scheduler sees every result"
    h.calls.pop(call.seq)
    out = h.handle(SchedulerReply(call.seq, HookKind.RESULT, tid, Decision.CONTINUE, (), horizon=9.0))
    assert sent(out, TrialProceed) == [TrialProceed(tid, 1, 1, 9.0)]


def test_no_horizons_with_a_stopper_each_result_is_decided_where_it_is_reported() -> None:
    """Stop criteria are checked in the controller, result by result, as Ray Tune does: a trial may
    not run past them, so a stopper turns horizons off (as it turns batching off)."""
    spec = dataclasses.replace(make_spec(num_samples=1, max_concurrent=1), stopper=MaximumIterationStopper(100))
    _, run = _one_started(spec)
    assert (run.window, run.horizon_attr) == (1, "")


# ---------------------------------------------------------------------------------- the schedulers' promise
def _schedulers() -> dict[str, Any]:
    mutations = {"lr": [0.1, 0.01, 0.001]}
    return {
        "asha": lambda: ASHAScheduler(max_t=30, grace_period=1, reduction_factor=3, brackets=2),
        "asha-run-on": lambda: ASHAScheduler(max_t=30, grace_period=2, reduction_factor=2, stop_last_trials=False),
        "hyperband": lambda: HyperBandScheduler(max_t=27, reduction_factor=3),
        "median": lambda: MedianStoppingRule(time_attr=IT, grace_period=4, min_samples_required=1, min_time_slice=2),
        "median-soft": lambda: MedianStoppingRule(time_attr=IT, grace_period=3, min_samples_required=1,
                                                  hard_stop=False),
        "pbt": lambda: PopulationBasedTraining(time_attr=IT, perturbation_interval=4, burn_in_period=3,
                                               hyperparam_mutations=mutations, seed=1),
        "pbt-synch": lambda: PopulationBasedTraining(time_attr=IT, perturbation_interval=3, synch=True,
                                                     hyperparam_mutations=mutations, seed=1),
    }


class _World:
    """A tiny experiment around one SchedulerHost: trials, their statuses and iterations."""

    def __init__(self, sched: Scheduler) -> None:
        self.host = SchedulerHost(sched, "loss", "min")
        self.seq = 0
        self.snaps: dict[str, TrialSnapshot] = {}
        self.it: dict[str, int] = {}
        self.horizon: dict[str, float | None] = {}

    def call(self, kind: HookKind, tid: str | None, results: tuple[dict[str, Any], ...] = ()) -> SchedulerReply:
        self.seq += 1
        updates = tuple(self.snaps.values())
        reply = self.host.handle(SchedulerCall(self.seq, kind, tid, results, updates))
        if tid is not None and kind in (HookKind.ADD, HookKind.RESULT):
            self.horizon[tid] = reply.horizon
        for a in reply.actions:  # requests from the hook: applied as the controller would
            if a.kind in (ActionKind.STOP, ActionKind.PAUSE) and a.trial_id in self.snaps:
                self._set(a.trial_id, TrialStatus.TERMINATED if a.kind is ActionKind.STOP else TrialStatus.PAUSED)
            elif a.kind is ActionKind.RESUME and self.snaps.get(a.trial_id, None) is not None:
                if self.snaps[a.trial_id].status is TrialStatus.PAUSED:
                    self._set(a.trial_id, TrialStatus.PENDING)
            elif a.kind is ActionKind.CHECKPOINT and a.trial_id in self.snaps:  # saved: PBT may clone it
                self._set(a.trial_id, self.snaps[a.trial_id].status, checkpoint=self.it[a.trial_id])
        return reply

    def _set(self, tid: str, status: TrialStatus, checkpoint: int | None = None) -> None:
        s = self.snaps[tid]
        ckpt = s.checkpoint_iteration if checkpoint is None else checkpoint
        self.snaps[tid] = TrialSnapshot(tid, s.config, status, s.last_result, checkpoint_iteration=ckpt)


SCHEDULER_NAMES = sorted(_schedulers())


@pytest.mark.parametrize("name", SCHEDULER_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_result_below_a_declared_horizon_is_decided_other_than_continue(name: str, data: Any) -> None:
    """Random experiments (trials added, results with iterations that sometimes jump, pauses and
    resumes, completions): every RESULT below the trial's latest declared horizon is decided CONTINUE
    and its hook asks nothing of that trial; horizons never shrink while a trial runs on."""
    w = _World(_schedulers()[name]())
    n_trials = data.draw(st.integers(2, 5), label="trials")
    for i in range(n_trials):  # the last ones wait to be started (PBT pauses a trial when others wait)
        tid = f"t{i}"
        w.snaps[tid] = TrialSnapshot(tid, {"lr": 0.1}, TrialStatus.RUNNING if i < 3 else TrialStatus.PENDING)
        w.it[tid] = 0
        w.call(HookKind.ADD, tid)
    for _ in range(data.draw(st.integers(10, 120), label="steps")):
        live = [t for t, s in w.snaps.items() if not s.status.is_finished]
        if not live:
            break
        tid = data.draw(st.sampled_from(live), label="trial")
        status = w.snaps[tid].status
        if status is not TrialStatus.RUNNING:  # paused or pending: the engine starts it again
            w._set(tid, TrialStatus.RUNNING)
            continue
        if data.draw(st.integers(0, 30), label="complete?") == 0:
            w._set(tid, TrialStatus.TERMINATED)
            w.call(HookKind.COMPLETE, tid, ({IT: w.it[tid], "loss": 1.0},))
            continue
        before = w.horizon.get(tid)
        w.it[tid] += data.draw(st.sampled_from([1, 1, 1, 2, 5]), label="step")
        loss = data.draw(st.floats(0.0, 1.0), label="loss")
        result = {IT: w.it[tid], "loss": loss, "time_total_s": float(w.it[tid])}
        reply = w.call(HookKind.RESULT, tid, (result,))
        if before is not None and w.it[tid] < before:
            assert reply.decision is Decision.CONTINUE, f"{name}: {reply.decision} below horizon {before}"
            mine = [a for a in reply.actions if a.trial_id == tid and a.kind is not ActionKind.CHECKPOINT]
            assert not mine, f"{name}: asked {mine} of the trial below its horizon {before}"
            after = w.horizon.get(tid)
            assert after is not None and after >= before, f"{name}: horizon shrank {before} -> {after}"
        if reply.decision is Decision.STOP:
            w._set(tid, TrialStatus.TERMINATED)
            w.call(HookKind.COMPLETE, tid, (result,))
        elif reply.decision is Decision.PAUSE:
            w._set(tid, TrialStatus.PAUSED)


def test_horizons_need_a_declared_attribute_and_stay_off_for_batching_plugins() -> None:
    class Tolerant(ASHAScheduler):
        tolerates_batching = True

    assert SchedulerHost(ASHAScheduler(), "loss", "min").horizon_attr == IT
    assert SchedulerHost(Tolerant(), "loss", "min").horizon_attr is None, "it runs ahead anyway"
    assert SchedulerHost(FIFOScheduler(), "loss", "min").horizon_attr is None


# ---------------------------------------------------------------------------------- whole runs
def _curve(config: dict[str, Any]) -> None:
    from actors import report

    for i in range(1, 28):
        report({"loss": config["q"] + 1.0 / i})


class NoHorizonASHA(ASHAScheduler):
    """ASHA deciding result by result (the reference the horizon run must equal)."""

    def horizon_attr(self) -> str | None:
        return None


def _asha_run(tmp_path: Any, scheduler: Scheduler, system: str, name: str) -> dict[float, int]:
    grid = Tuner(_curve, param_space={"q": __import__("actors").search.grid_search([0.5, 0.1, 0.9, 0.2, 0.05, 0.7])},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler, max_concurrent_trials=1),
                 run_config=RunConfig(storage=str(tmp_path), name=name, system=system, verbose=0)).fit()
    return {r.config["q"]: int(r.metrics["training_iteration"]) for r in grid}


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_asha_stops_exactly_at_its_rungs_while_trials_run_ahead_between_them(tmp_path: Any, system: str,
                                                                            no_leaks: Any) -> None:
    """One trial at a time, so ASHA's decisions are fixed: with horizons every stop lands on the rung
    (1, 3, 9) or max_t exactly, and the iterations equal the result-by-result run's."""
    asha = ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3)
    got = _asha_run(tmp_path, asha, system, "horizons")
    assert set(got.values()) <= {1, 3, 9, 27}, got
    if system == "simple":
        want = _asha_run(tmp_path, NoHorizonASHA(max_t=27, grace_period=1, reduction_factor=3), system, "every")
        assert got == want


class BadHorizon(FIFOScheduler):
    def on_trial_result(self, controller: Any, trial: TrialSnapshot, result: dict[str, Any]) -> Decision:
        return Decision.CONTINUE

    def horizon_attr(self) -> str | None:
        return IT

    def decision_horizon(self, trial: TrialSnapshot) -> Any:
        return "soon"


def test_a_plugin_whose_horizon_is_not_a_number_fails_the_run_with_the_contract(tmp_path: Any) -> None:
    with pytest.raises(TuneError, match=r"BadHorizon raised in its result hook: TypeError\(.decision_horizon\(\) must"):
        Tuner(_curve, param_space={"q": 0.1},
              tune_config=TuneConfig(metric="loss", mode="min", scheduler=BadHorizon()),
              run_config=RunConfig(storage=str(tmp_path), name="bad", system="simple", verbose=0)).fit()


# ---------------------------------------------------------------------------------- simulated interleavings
def _fast_curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    # steps far shorter than the trial actor's batch delay: results really travel in batches
    # curves that cross: a trial behind at one rung may lead at the next
    return {"loss": config["lr"] * 0.2 + 1.0 / (1.0 + config["k"] * i), "time_this_iter_s": 0.004}


def _sim_scheduler(name: str, horizons: bool) -> Scheduler:
    from actors import search

    classes: dict[str, Any] = {"asha": ASHAScheduler, "hyperband": HyperBandScheduler,
                               "median": MedianStoppingRule, "pbt": PopulationBasedTraining}
    base = classes[name]
    cls = base if horizons else type(f"Every{base.__name__}", (base,), {"horizon_attr": lambda self: None})
    if name == "asha":
        return cls(max_t=16, grace_period=1, reduction_factor=2)  # type: ignore[no-any-return]
    if name == "hyperband":
        return cls(max_t=16, reduction_factor=2)  # type: ignore[no-any-return]
    if name == "median":
        return cls(time_attr=IT, grace_period=4, min_samples_required=2)  # type: ignore[no-any-return]
    return cls(time_attr=IT, perturbation_interval=4, seed=0,  # type: ignore[no-any-return]
               hyperparam_mutations={"lr": search.uniform(0.01, 1.0)})


def _simulate(name: str, horizons: bool, seed: int, cpus: int, faults: Any = None) -> Any:
    from actors import FailureConfig, search
    from actors.testing import simulate

    return simulate(_fast_curve, {"lr": search.uniform(0.01, 1.0), "k": search.uniform(0.05, 2.0)},
                    TuneConfig(metric="loss", mode="min", num_samples=6, scheduler=_sim_scheduler(name, horizons)),
                    RunConfig(failure_config=FailureConfig(max_failures=-1)),
                    max_iterations=16, seed=seed, cpus=cpus, faults=faults)


def _table(sim: Any) -> dict[str, tuple[str, int]]:
    return {r.metrics["trial_id"]: (r.metrics.get("done"), int(r.metrics["training_iteration"]))
            for r in sim.results}


@pytest.mark.parametrize("name", ["asha", "hyperband", "median", "pbt"])
def test_one_trial_at_a_time_horizons_change_no_decision(name: str) -> None:
    """With one trial running at a time the decisions cannot depend on timing: the run with horizons
    (trials batching ahead) ends every trial where the result-by-result run does."""
    for seed in range(10):
        runs = [_simulate(name, h, seed, cpus=1) for h in (True, False)]
        try:
            assert not any(s.hung for s in runs)
            assert _table(runs[0]) == _table(runs[1]), f"{name} seed {seed}"
        finally:
            for s in runs:
                s.discard()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["asha", "hyperband", "median", "pbt"])
def test_seeded_interleavings_with_faults_keep_every_invariant_with_horizons(name: str) -> None:
    """Batched trials running ahead of their decisions, three at a time, with crashes (results still in
    flight), lost exits and message latency drawn per seed: every experiment ends, every history is
    contiguous, nothing is lost."""
    from actors.testing import Faults
    from actors.testing.invariants import violations

    for seed in range(100):
        faults = Faults(trial_fail_p=0.02, trial_die_p=0.02, lost_exit_p=0.5, latency_s=(0.0, 0.02))
        sim = _simulate(name, True, seed, cpus=3, faults=faults)
        try:
            assert violations(sim, num_samples=6, may_abort=False) == [], f"{name} seed {seed}"
        finally:
            sim.discard()


class EveryTenth(FIFOScheduler):
    """docs/schedulers.md's example of a plugin declaring horizons."""

    def on_trial_result(self, controller: Any, trial: TrialSnapshot, result: dict[str, Any]) -> Decision:
        it = result["training_iteration"]
        return Decision.STOP if it % 10 == 0 and result["loss"] > 1 else Decision.CONTINUE

    def horizon_attr(self) -> str | None:
        return "training_iteration"

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        it = trial.last_result.get("training_iteration", 0)
        return (it // 10 + 1) * 10


def _thirty(config: dict[str, Any]) -> None:
    from actors import report

    for _ in range(30):
        report({"loss": config["loss"]})


def test_the_documented_plugin_with_a_horizon_stops_exactly_where_it_decides(tmp_path: Any) -> None:
    assert SchedulerHost(EveryTenth(), "loss", "min").horizon_attr == IT
    grid = Tuner(_thirty, param_space={"loss": __import__("actors").search.grid_search([2.0, 0.5])},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=EveryTenth()),
                 run_config=RunConfig(storage=str(tmp_path), name="tenth", system="simple", verbose=0)).fit()
    assert sorted((r.config["loss"], r.metrics["training_iteration"]) for r in grid) == [(0.5, 30), (2.0, 10)]


def test_the_scheduler_test_kit_shows_a_plugins_horizons() -> None:
    from actors.testing import SchedulerTestKit

    with SchedulerTestKit(ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3), "loss", "min") as kit:
        assert kit.ready.horizon_attr == IT
        assert kit.add_trial("a", {}).horizon == 1.0
        assert kit.result("a", {IT: 1, "loss": 0.5}).horizon == 3.0
        assert kit.result("a", {IT: 2, "loss": 0.4}, {IT: 3, "loss": 0.3}).horizon == 9.0


def test_a_hold_makes_the_worker_wait_for_every_result_it_sent() -> None:
    w = ResultWindow(256, IT, 100.0)
    w.reported({IT: 1})
    w.reported({IT: 2})
    assert not w.full
    w.hold()
    assert w.full, "a pause is pending: the results in flight must be decided first"
    w.acknowledged(2, 100.0)
    assert not w.full
    idle = ResultWindow(256, IT, 100.0)
    idle.hold()
    assert not idle.full, "nothing in flight: nothing to wait for"


def _two_running() -> tuple[Harness, str, str]:
    """Two trials running under a plugin that declares horizons (never deciding: ``inf``)."""
    h = Harness(make_spec(num_samples=2, max_concurrent=2))
    h.handle(Start(), at=0.0)
    h.handle(SchedulerReady(False, "Plugin", ALL_HOOKS, IT))
    runs: list[RunTrial] = []
    while h.calls:
        call = h.calls.pop(min(h.calls))
        waiting = h.core.table.with_status(TrialStatus.PENDING, TrialStatus.PAUSED)
        chosen = waiting[0].trial_id if waiting and call.kind is HookKind.CHOOSE else None
        runs += sent(h.handle(SchedulerReply(call.seq, call.kind, call.trial_id, Decision.CONTINUE, (), chosen,
                                             horizon=math.inf)), RunTrial)
    a, b = sorted(r.trial_id for r in runs)
    return h, a, b


def _answer(h: Harness, call: SchedulerCall, actions: tuple[SchedulerAction, ...] = ()) -> list[Any]:
    h.calls.pop(call.seq)
    return h.handle(SchedulerReply(call.seq, call.kind, call.trial_id, Decision.CONTINUE, actions, horizon=math.inf))


@pytest.mark.parametrize("a_first", [True, False])
def test_a_pause_asked_by_another_trials_hook_holds_a_trial_running_ahead(a_first: bool) -> None:
    """B's hook pauses A. If a batch of A's still waits for its decision, A is told to hold at its next
    result (TrialHold) instead of running on until that decision is back; then it pauses there."""
    h, a, b = _two_running()
    for t in (a, b) if a_first else (b, a):
        h.handle(TrialResults(t, 1, 1, ({IT: 1, "loss": 1.0},), None))
    first, second = h.open_calls(HookKind.RESULT)
    pause_a = (SchedulerAction(ActionKind.PAUSE, a, True),)
    if a_first:  # A's batch decided before the pause: nothing in flight, the pause saves at once
        _answer(h, first)
        out = _answer(h, second, pause_a)
        assert not sent(out, TrialHold) and [m.trial_id for m in sent(out, TrialSave)] == [a]
        return
    out = _answer(h, first, pause_a)
    assert sent(out, TrialHold) == [TrialHold(a, 1)]
    out = _answer(h, second)
    assert not sent(out, TrialProceed) and [m.trial_id for m in sent(out, TrialSave)] == [a], "A pauses there"
