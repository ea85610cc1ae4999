"""Ray's ``ResourceChangingScheduler``: its allocation arithmetic, its hooks, the engine's side (a trial's new size
from its next start, saved with the experiment), and whole runs, against what Ray 2.60 gave.

Recorded with Ray 2.60 (``/tmp/rayvenv``), never imported here:

* ``tests/data/ray_distribute_resources.json``: ``DistributeResources(**kw)`` and
  ``DistributeResourcesToTopJob(metric="loss", mode="min", **kw)`` called with a stand-in ``tune_controller``
  (``_resource_updater.get_num_cpus/gpus``, ``get_live_trials()`` in list order), trials with
  ``placement_group_factory`` and ``last_result = {"loss": 1 / (i + 1), "training_iteration": 1}``, and
  ``scheduler.base_trial_resources``; every case ``_cases()`` lists, in that order, for every trial; the
  answer's bundles (None when it gave none).
* A whole run on ``ray.init(num_cpus=2)``: one trial of 4 iterations under
  ``ResourceChangingScheduler(FIFOScheduler())`` reports 1 CPU at iteration 1, then is paused, restored from its
  checkpoint of iteration 1 and reports 2 CPUs at iterations 2-4 (a function's ``get_trial_resources()`` and a
  class's ``self.trial_resources`` alike).
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import tempfile
from typing import Any

import pytest

import actors as tune
from actors._engine.errors import ConfigError
from actors._engine.resource_request import PlacementGroupFactory
from actors._engine.scheduler_host import SchedulerHost
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind, HookKind, SchedulerCall
from actors.schedulers import ASHAScheduler, Decision, FIFOScheduler, ResourceChangingScheduler, create_scheduler
from actors.schedulers.resource_changing_scheduler import DistributeResources, DistributeResourcesToTopJob

DATA = os.path.join(os.path.dirname(__file__), "data", "ray_distribute_resources.json")


# ------------------------------------------------------------------------------------- the arithmetic
class _Counts:
    def __init__(self, cpus: float, gpus: float) -> None:
        self.cpus, self.gpus = cpus, gpus

    def get_num_cpus(self) -> float:
        return self.cpus

    def get_num_gpus(self) -> float:
        return self.gpus


class _Controller:
    """Ray's ``tune_controller`` as the recording's stand-in had it: live trials in list order."""

    def __init__(self, cpus: float, gpus: float, trials: list[TrialSnapshot]) -> None:
        self._resource_updater = _Counts(cpus, gpus)
        self.trials = trials

    def get_live_trials(self) -> list[TrialSnapshot]:
        return list(self.trials)


class _Base:
    def __init__(self, base: PlacementGroupFactory) -> None:
        self.base_trial_resources = base


def _trial(i: int, bundle: dict[str, float], **kw: Any) -> TrialSnapshot:
    res = {("cpu" if k == "CPU" else "gpu" if k == "GPU" else k): v for k, v in bundle.items()}
    return TrialSnapshot(f"t{i}", {}, TrialStatus.RUNNING, {"loss": 1.0 / (i + 1), "training_iteration": 1},
                         resources=res, **kw)


def _cases() -> list[tuple[Any, ...]]:
    """The recording's cases, in its order: (function, base bundles, (cpus, gpus), the trials' bundles, who)."""
    fns = [{}, {"increase_by": {"CPU": 2}}, {"increase_by": {"CPU": 1}, "increase_by_times": 2},
           {"reserve_resources": {"CPU": 1}}, {"increase_by": {"GPU": 1}}]
    bases = [[{"CPU": 1}], [{"CPU": 2}], [{"CPU": 1, "GPU": 1}]]
    currents = [[1], [2], [3], [1, 1], [3, 1], [2, 2], [1, 1, 1], [4, 1, 1]]
    out = []
    for kw, base, total, cur, top in itertools.product(fns, bases, [(4, 0), (8, 2)], currents, [False, True]):
        gpu = base[0].get("GPU", 0)
        bundles = [dict({"CPU": max(c, base[0]["CPU"])}, **({"GPU": gpu} if gpu else {})) for c in cur]
        fn: DistributeResources = (DistributeResourcesToTopJob(metric="loss", mode="min", **kw) if top
                                   else DistributeResources(**kw))
        for who in range(len(bundles)):
            out.append((fn, base, total, bundles, who))
    return out


def test_distribute_resources_gives_what_rays_gives_in_every_recorded_case() -> None:
    with open(DATA) as f:
        recorded = json.load(f)["outs"]
    cases = _cases()
    assert len(cases) == len(recorded) == 900
    got = []
    for fn, base, (cpus, gpus), bundles, who in cases:
        trials = [_trial(i, b) for i, b in enumerate(bundles)]
        new = fn(_Controller(cpus, gpus, trials), trials[who], {"training_iteration": 1}, _Base(
            PlacementGroupFactory(base)))
        got.append(None if new is None else new.bundles)
    wrong = [(i, cases[i][1:], got[i], recorded[i]) for i in range(len(cases)) if got[i] != recorded[i]]
    assert not wrong, f"{len(wrong)} cases differ from Ray's, e.g. {wrong[:3]}"
    assert sum(1 for r in recorded if r is not None and r != cases[0][1]) > 300, "the cases resize trials"


def test_no_new_size_before_the_first_iteration_and_a_base_that_is_not_a_factory_is_refused() -> None:
    trial = _trial(0, {"CPU": 1})
    fn = DistributeResources()
    assert fn(_Controller(4, 0, [trial]), trial, {"training_iteration": 0},
              _Base(PlacementGroupFactory([{"CPU": 1}]))) is None  # (recorded)
    with pytest.raises(ValueError, match="only supports PlacementGroupFactories"):
        fn(_Controller(4, 0, [trial]), trial, {"training_iteration": 1}, _Base(None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="number of bundles"):
        fn(_Controller(4, 0, [trial]), trial, {"training_iteration": 1},
           _Base(PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}])))
    with pytest.raises(ValueError, match="metric parameter cannot be None"):
        DistributeResourcesToTopJob(mode="min")(_Controller(4, 0, [trial]), trial, {"training_iteration": 1},
                                                _Base(PlacementGroupFactory([{"CPU": 1}])))


# ------------------------------------------------------------------------------------- the hooks
def _host(sched: Any, cluster: dict[str, float]) -> tuple[SchedulerHost, Any]:
    host = SchedulerHost(sched, "loss", "min")
    seq = itertools.count(1)

    def call(kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
             updates: tuple[TrialSnapshot, ...] = ()) -> Any:
        return host.handle(SchedulerCall(next(seq), kind, trial_id, results, updates, (), dict(cluster)))
    return host, call


def _snap(tid: str, status: TrialStatus, cpus: float) -> TrialSnapshot:
    return TrialSnapshot(tid, {}, status, resources={"cpu": cpus})


def test_a_continued_result_that_changes_the_size_pauses_and_the_size_is_set_once_the_trial_is_not_running(
        ) -> None:
    _, call = _host(ResourceChangingScheduler(FIFOScheduler()), {"cpu": 4.0})
    call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))
    out = call(HookKind.RESULT, "a", ({"training_iteration": 1, "loss": 1.0},),
               updates=(_snap("a", TrialStatus.RUNNING, 1),))
    assert out.decision is Decision.PAUSE and out.actions == ()  # noted, not set: the trial still runs
    out = call(HookKind.CHOOSE, None)  # its pause has not landed: the mirror still shows it RUNNING
    assert out.actions == () and out.chosen is None
    out = call(HookKind.CHOOSE, None, updates=(_snap("a", TrialStatus.PAUSED, 1),))
    assert [(a.kind, a.trial_id, a.info) for a in out.actions] == [
        (ActionKind.RESOURCES, "a", {"resources": {"cpu": 4.0}})]
    assert out.chosen == "a"
    out = call(HookKind.RESULT, "a", ({"training_iteration": 2, "loss": 0.5},),
               updates=(_snap("a", TrialStatus.RUNNING, 4),))
    assert out.decision is Decision.CONTINUE, "the same size again: nothing to change"


def test_the_wrapped_schedulers_stop_wins_and_trials_of_other_base_sizes_are_refused_as_rays() -> None:
    _, call = _host(ResourceChangingScheduler(ASHAScheduler(max_t=1, grace_period=1)), {"cpu": 4.0})
    call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))
    out = call(HookKind.RESULT, "a", ({"training_iteration": 1, "loss": 1.0},),
               updates=(_snap("a", TrialStatus.RUNNING, 1),))
    assert out.decision is Decision.STOP  # (max_t: ASHA stops it; no resizing after a STOP)
    with pytest.raises(RuntimeError, match="doesn't support trials with varying base resources"):
        call(HookKind.ADD, "b", updates=(_snap("b", TrialStatus.PENDING, 2),))


def test_no_allocation_function_warns_and_never_resizes() -> None:
    with pytest.warns(UserWarning, match="No resource requirements will be changed"):
        sched = ResourceChangingScheduler(resources_allocation_function=None)
    _, call = _host(sched, {"cpu": 4.0})
    call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))
    assert call(HookKind.RESULT, "a", ({"training_iteration": 1, "loss": 1.0},),
                updates=(_snap("a", TrialStatus.RUNNING, 1),)).decision is Decision.CONTINUE


def test_its_state_is_saved_without_the_allocation_function_a_local_one_as_rays_examples_write() -> None:
    def mine(tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any) -> Any:
        cpus = tune_controller._resource_updater.get_num_cpus() // len(tune_controller.get_live_trials())
        return PlacementGroupFactory([{"CPU": cpus}])

    sched = ResourceChangingScheduler(FIFOScheduler(), mine)
    _, call = _host(sched, {"cpu": 6.0})
    call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))
    call(HookKind.ADD, "b", updates=(_snap("b", TrialStatus.PENDING, 1),))
    assert call(HookKind.RESULT, "a", ({"training_iteration": 1, "loss": 1.0},),
                updates=(_snap("a", TrialStatus.RUNNING, 1),)).decision is Decision.PAUSE
    state = call(HookKind.SAVE, None).state
    again = ResourceChangingScheduler(FIFOScheduler(), mine)
    again.restore(pickle.loads(state)["scheduler"])
    assert again._trials_to_reallocate.keys() == {"a"} and again._base_trial_resources == PlacementGroupFactory(
        [{"CPU": 1}])
    assert again._resources_allocation_function is mine


def test_a_scheduler_that_does_not_declare_it_cannot_resize_trials() -> None:
    class Sneaky(FIFOScheduler):
        def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
            tune_controller.set_trial_resources(trial, {"CPU": 2})

    _, call = _host(Sneaky(), {"cpu": 4.0})
    with pytest.raises(ConfigError, match="changes_trial_resources = True"):
        call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))


def test_create_scheduler_builds_it_by_rays_name() -> None:
    sched = create_scheduler("resource_changing", base_scheduler=FIFOScheduler())
    assert isinstance(sched, ResourceChangingScheduler)
    assert isinstance(sched._resources_allocation_function, DistributeResources)
    assert sched.debug_string() == "(ResourceChangingScheduler) Using FIFO scheduling algorithm."


# ------------------------------------------------------------------------------------- whole runs
def _fn(config: dict[str, Any]) -> None:
    start = 0
    ck = tune.get_checkpoint()
    if ck:
        with ck.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            start = json.load(f)["i"]
    for i in range(start, config["n"]):
        cpus = tune.get_context().get_trial_resources().required_resources["CPU"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"i": i + 1}, f)
            tune.report({"cpus": cpus, "restored": start, "loss": 1.0 / (i + 1)},
                        checkpoint=tune.Checkpoint.from_directory(d))


class _Cls(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"cpus": self.trial_resources.required_resources["CPU"], "restored": None, "loss": 1.0 / self.i,
                "done": self.i >= 4}

    def save_checkpoint(self, d: str) -> None:
        with open(os.path.join(d, "s.json"), "w") as f:
            json.dump({"i": self.i}, f)

    def load_checkpoint(self, d: str) -> None:
        with open(os.path.join(d, "s.json")) as f:
            self.i = json.load(f)["i"]


@pytest.mark.parametrize("system", ["simple", "multiproc"])
@pytest.mark.parametrize(("trainable", "restored"), [(_fn, [0, 1, 1, 1]), (_Cls, [None] * 4)])
def test_a_lone_trial_grows_to_the_whole_machine_after_its_first_result_as_in_ray(
        trainable: Any, restored: list[Any], system: str, tmp_path: Any, no_leaks: None) -> None:
    tune.init(num_cpus=2)  # (Ray's ray.init(num_cpus=2) of the recording)
    try:
        grid = tune.Tuner(trainable, param_space={"n": 4},
                          tune_config=tune.TuneConfig(scheduler=ResourceChangingScheduler(FIFOScheduler()),
                                                      metric="loss", mode="min"),
                          run_config=tune.RunConfig(storage=str(tmp_path), verbose=0, system=system)).fit()
    finally:
        tune.shutdown()
    rows = grid[0].metrics_dataframe.to_dict("records")
    assert [(r["training_iteration"], r["cpus"]) for r in rows] == [(1, 1.0), (2, 2.0), (3, 2.0), (4, 2.0)]
    assert [None if r["restored"] != r["restored"] else r["restored"] for r in rows] == restored


# ------------------------------------------------------------------------------------- seeded simulations
class _OneMembersWorth(DistributeResources):
    """Ray's default allocation, capped at 2 CPUs: the sweep's multi-host members have 2 each, and a trial given
    the whole cluster's share could never be placed (the next test shows that run ending)."""

    def __call__(self, tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any) -> Any:
        new = super().__call__(tune_controller, trial, result, scheduler)
        if new is None:
            return None
        return PlacementGroupFactory([{"CPU": min(2.0, new.required_resources["CPU"])}])


def test_a_trial_resized_beyond_every_member_ends_the_run_naming_it_where_ray_waits_for_ever() -> None:
    from actors.testing import simulate

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["x"] / i, "time_this_iter_s": config["x"] / 10}  # (x=1 ends first)

    sim = simulate(curve, {"x": tune.grid_search([1.0, 2.0])},
                   tune.TuneConfig(metric="loss", mode="min", scheduler=ResourceChangingScheduler()),
                   max_iterations=20, members={"m1": {"cpu": 2}, "m2": {"cpu": 2}})
    # the first trial to end leaves the other alone in a 4-CPU cluster: DistributeResources gives it all 4, in
    # one bundle no 2-CPU member can hold (Ray's trial would wait for ever; the placement deadline ends it here)
    assert not sim.hung and sim.error is not None
    assert "no member can ever run a trial needing {'cpu': 4.0}" in sim.error
    assert "cap its allocation at one member's" in sim.error
    sim.discard()


@pytest.mark.slow
def test_seeded_simulations_with_every_scheduler_wrapped_to_resize_trials_keep_every_invariant(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault sweep's scenarios (deaths, lost exits, members lost and back, aborts restored...) with each
    scheduler wrapped in a ResourceChangingScheduler, so trials are paused, resized and restarted as trials end:
    every experiment ends, no history has a gap or a duplicate, an aborted one restores (its trials with the
    sizes they were given), and the engine's books never hold more than a member has."""
    import logging

    import tests._sim_scenarios as scenarios
    from actors._engine.core import ExperimentCore

    plain = scenarios.scheduler
    monkeypatch.setattr(scenarios, "scheduler",
                        lambda *a, **kw: ResourceChangingScheduler(plain(*a, **kw), _OneMembersWorth()))
    held_over: list[str] = []
    resized: set[str] = set()
    handle = ExperimentCore.handle

    def checked(core: ExperimentCore, event: Any, now: float) -> Any:
        out = handle(core, event, now)
        held_over.extend(scenarios.over_held(core))
        resized.update(t for t, r in core.table.trials.items() if r.resources and r.resources.get("cpu") != 1.0)
        return out

    monkeypatch.setattr(ExperimentCore, "handle", checked)
    logging.getLogger("audition").setLevel(logging.ERROR)
    failures = []
    try:
        for seed in range(150):
            sc = scenarios.scenario(seed)
            found = scenarios.check(sc)
            if found or held_over:
                failures.append(f"seed {seed} {sc}: {(found + held_over)[:3]}")
            held_over.clear()
    finally:
        logging.getLogger("audition").setLevel(logging.NOTSET)
    assert not failures, "\n".join(failures[:10])
    assert len(resized) > 100, "trials were resized"


def test_a_trial_its_wrapped_scheduler_paused_itself_is_not_resized_as_rays_noop() -> None:
    class Exploits(FIFOScheduler):
        """Pauses a trial itself and answers NOOP, as Ray's PBT does when it exploits."""

        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            tune_controller.pause_trial(trial)
            return Decision.NOOP

    _, call = _host(ResourceChangingScheduler(Exploits()), {"cpu": 4.0})
    call(HookKind.ADD, "a", updates=(_snap("a", TrialStatus.PENDING, 1),))
    out = call(HookKind.RESULT, "a", ({"training_iteration": 1, "loss": 1.0},),
               updates=(_snap("a", TrialStatus.RUNNING, 1),))
    assert [a.kind for a in out.actions] == [ActionKind.PAUSE]
    out = call(HookKind.CHOOSE, None, updates=(_snap("a", TrialStatus.PAUSED, 1),))
    assert out.actions == (), "nothing was noted: Ray resizes only after CONTINUE"


def test_an_aborted_run_restores_with_the_sizes_its_trials_were_given() -> None:
    from actors.testing import Faults, simulate
    from storage import ExperimentLayout, StorageContext, read_experiment_state

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["x"] / i, "time_this_iter_s": config["x"]}

    space = {"x": tune.grid_search([1.0, 2.0, 3.0])}
    tc = tune.TuneConfig(metric="loss", mode="min", scheduler=ResourceChangingScheduler())
    first = simulate(curve, space, tc, max_iterations=8, cpus=6, faults=Faults(abort_at_s=12.5))
    assert first.error is not None and "simulated abort" in first.error
    ctx = StorageContext(first.storage_url)
    rows = read_experiment_state(ctx, ExperimentLayout(ctx, first.name))["trials"]
    sizes = {r["trial_id"]: (r["status"], r.get("resources")) for r in rows}
    assert any(res not in (None, {"cpu": 1.0}) for _, res in sizes.values()), sizes  # some were resized
    again = simulate(curve, space, tc, max_iterations=8, cpus=6, restore=first.experiment_path)
    assert again.error is None and not again.hung
    table = again.world.core.table.trials
    # a trial that ended before the abort never runs again: it keeps the size it was saved with
    ended = {t: res for t, (status, res) in sizes.items() if status == "TERMINATED"}
    assert ended and any(res != {"cpu": 1.0} for res in ended.values()), sizes
    assert all(table[t].resources == res for t, res in ended.items())
    assert sorted(r.metrics["training_iteration"] for r in again.results) == [8, 8, 8]
    assert not any(m.used.get("cpu", 0.0) for m in again.world.core.members.placement.members.values())
    first.discard()
    again.discard()
