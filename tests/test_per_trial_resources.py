"""Each trial's own resources from its config: Ray's ``with_resources(train, lambda config: ...)`` and a class
trainable's ``default_resource_request(config)``.

The core is driven by hand first (tests/_core_harness.py): a trial is placed by its own resources, one whose
resources are not free yet lets a pending trial they are free for start first (Ray starts each pending trial
whose resources it is granted), and each trial is told its own resources. Then real runs: multi-process on this
machine (the trials never hold more CPUs than it offers, each sees its own ``get_trial_resources()``), a class
trainable's ``default_resource_request``, a restore that keeps each trial's resources, and bad functions.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import pytest

from actors import RunConfig, Trainable, Tuner, get_context, init, report, shutdown, with_resources
from actors._driver.errors import ConfigError
from actors._driver.resources import PlacementGroupFactory
from actors._engine.signals import Start
from actors._engine.trial import TrialStatus
from actors.messages import EndReason, ExperimentFinished, RunTrial, TrialEnded
from actors.search import grid_search
from tests._core_harness import ALL_HOOKS, Harness, make_spec, sent


def _per_trial(cpus: list[float], total: float = 2.0, **over: Any) -> Harness:
    """A core whose trials need ``cpus`` (in the order they are drawn) on a machine of ``total`` CPUs."""
    sizes = iter(cpus)
    spec = make_spec(num_samples=len(cpus), max_concurrent=1_000_000, total_resources={"cpu": total},
                     resources_of=lambda config: {"cpu": next(sizes)}, **over)
    return Harness(spec)


def _started(h: Harness) -> list[Any]:
    """Start the experiment, FIFO answering every choice: the commands that started the trials there is room for."""
    h.handle(Start(), at=0.0)
    h.ready()
    return h.answer_all()


def _runs(out: list[Any]) -> dict[str, RunTrial]:
    return {c.msg.trial_id: c.msg for c in out if hasattr(c, "msg") and isinstance(c.msg, RunTrial)}


def test_a_trial_whose_resources_are_not_free_lets_one_they_are_free_for_start_first() -> None:
    h = _per_trial([1, 2, 1])
    runs = _runs(_started(h))
    t0, t1, t2 = sorted(h.core.table.trials)
    assert sorted(runs) == [t0, t2], "t1 (2 CPUs) waits for both; t2 (1 CPU) takes the one t0 left"
    assert {t: r.resources for t, r in runs.items()} == {t0: {"cpu": 1}, t2: {"cpu": 1}}
    assert h.core.table.get(t1).status is TrialStatus.PENDING
    assert not h.open_calls(), "nothing fits: the scheduler is not asked again"
    out = h.handle(TrialEnded(t0, 1, 1, EndReason.COMPLETED)) + h.answer_all()
    assert _runs(out) == {}, "one CPU free: still not enough for t1"
    out = h.handle(TrialEnded(t2, 1, 1, EndReason.COMPLETED)) + h.answer_all()
    assert [(t, r.resources) for t, r in _runs(out).items()] == [(t1, {"cpu": 2})]
    out = h.handle(TrialEnded(t1, 1, 1, EndReason.COMPLETED)) + h.answer_all()
    assert sent(out, ExperimentFinished)
    assert h.core.members.placement.members["local"].used == {"cpu": 0.0}


def test_a_fraction_of_a_cpu_left_is_room_for_a_trial_that_asks_for_that_fraction() -> None:
    h = _per_trial([1.5, 0.5, 0.5])
    runs = _runs(_started(h))
    t0, t1, t2 = sorted(h.core.table.trials)
    assert sorted(runs) == [t0, t1] and h.core.table.get(t2).status is TrialStatus.PENDING
    assert sorted(_runs(h.handle(TrialEnded(t1, 1, 1, EndReason.COMPLETED)) + h.answer_all())) == [t2]


def test_the_machine_is_the_member_and_a_trial_it_can_never_hold_stops_the_run_naming_it() -> None:
    h = _per_trial([1, 3])
    assert [r["resources"] for r in h.core.members.rows()] == [{"cpu": 2.0}], "the machine, not a slot count"
    _started(h)
    assert h.core.phase.name in ("ABORTING", "FINISHED")
    assert "asks for {'cpu': 3}" in (h.core.error or "") and "this machine offers {'cpu': 2.0}" in h.core.error


def test_a_resources_function_that_raises_stops_the_run_naming_the_trial_and_its_config() -> None:
    def boom(config: dict[str, Any]) -> dict[str, float]:
        raise KeyError("workers")

    h = Harness(make_spec(num_samples=1, total_resources={"cpu": 2.0}, resources_of=boom))
    _started(h)
    assert "its resources could not be worked out from its config {}: KeyError: 'workers'" in (h.core.error or "")


def test_every_trial_started_is_placed_within_the_machine_whatever_the_sizes() -> None:
    """Trials of random sizes end in random order: the CPUs held never exceed the machine's, and all run."""
    import random

    for seed in range(30):
        rng = random.Random(seed)
        sizes = [rng.choice([0.5, 1, 1.5, 2, 3, 4]) for _ in range(8)]
        h = _per_trial(sizes, total=4.0)
        running = set(_runs(_started(h)))
        done: set[str] = set()
        while running:
            held = sum(h.core.table.get(t).resources["cpu"] for t in running)  # type: ignore[index]
            assert held <= 4.0, (seed, sizes, running)
            t = rng.choice(sorted(running))
            running.discard(t)
            done.add(t)
            running |= set(_runs(h.handle(TrialEnded(t, 1, 1, EndReason.COMPLETED)) + h.answer_all()))
        assert len(done) == 8, (seed, sizes)


# ---------------------------------------------------------------------------------------- real runs
def _train(config: dict[str, Any]) -> None:
    import time

    started = time.time()
    resources = get_context().get_trial_resources()
    time.sleep(config.get("work", 0.2))
    report({"loss": 1.0, "cpus": resources.required_resources.get("CPU"), "started": started,
            "ended": time.time()})


def test_each_trial_runs_with_its_own_resources_and_never_more_than_the_machine_offers(storage_dir: str,
                                                                                       no_leaks: None) -> None:
    init(num_cpus=2)
    try:
        grid = Tuner(with_resources(_train, lambda config: {"cpu": config["cpus"]}),
                     param_space={"cpus": grid_search([2, 1, 1, 2, 0.5, 0.5])},
                     run_config=RunConfig(name="sizes", storage=storage_dir, verbose=0)).fit()
    finally:
        shutdown()
    assert not grid.errors
    rows = [r.metrics for r in grid]
    assert [r["cpus"] for r in rows] == [2, 1, 1, 2, 0.5, 0.5], "get_trial_resources() is the trial's own"
    events = sorted([(r["started"], r["cpus"]) for r in rows] + [(r["ended"], -r["cpus"]) for r in rows])
    held = list(itertools.accumulate(c for _, c in events))
    assert max(held) <= 2, events  # (a span within each trial's run: the CPUs held then are surely held)
    with open(os.path.join(grid.experiment_path, "experiment_state.json")) as f:
        pointer = json.load(f)
    with open(os.path.join(grid.experiment_path, ".state", pointer["latest"])) as f:
        state = json.load(f)
    assert sorted(row["resources"]["cpu"] for row in state["trials"]) == [0.5, 0.5, 1, 1, 2, 2]


class _Sized(Trainable):
    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory | None:
        return PlacementGroupFactory([{"CPU": config["cpus"]}]) if config["cpus"] else None

    def step(self) -> dict[str, Any]:
        r = get_context().get_trial_resources()
        return {"loss": 1.0, "cpus": r.required_resources.get("CPU"), "done": True}


def test_a_class_trainable_sizes_each_trial_by_its_default_resource_request(storage_dir: str) -> None:
    grid = Tuner(_Sized, param_space={"cpus": grid_search([2, 0])},
                 run_config=RunConfig(name="cls", storage=storage_dir, system="simple", verbose=0)).fit()
    assert [r.metrics["cpus"] for r in grid] == [2, 1], "None is Ray's default: one CPU"
    grid = Tuner(with_resources(_Sized, {"cpu": 1}), param_space={"cpus": grid_search([2])},
                 run_config=RunConfig(name="cls2", storage=storage_dir, system="simple", verbose=0)).fit()
    assert [r.metrics["cpus"] for r in grid] == [1], "with_resources overrides it, as Ray's"


@pytest.mark.parametrize("fn, says", [
    (lambda config: {"cpu": -1}, "the amount of 'cpu' must be a finite number >= 0"),
    (lambda config: "two", "resources must be a dict"),
    (lambda config: {"gpu": 0}, "asks for no resources at all"),
])
def test_a_bad_resources_value_fails_the_run_clearly(fn: Any, says: str, storage_dir: str) -> None:
    with pytest.raises(Exception, match=f"its resources could not be worked out.*{says}"):
        Tuner(with_resources(_train, fn), param_space={"work": 0.0},
              run_config=RunConfig(name="bad", storage=storage_dir, system="simple", verbose=0)).fit()


def test_the_resources_function_is_checked_as_a_dict_is() -> None:
    sized = with_resources(_train, lambda config: {"CPU": 2})
    assert sized._audition_resources({"x": 1}) == {"cpu": 2.0}
    assert with_resources(_train, lambda config: {})._audition_resources({}) == {"cpu": 1.0}, "{}: one CPU, as Ray"
    with pytest.raises(ConfigError):
        with_resources(_train, {"cpu": 0})


_given: list[dict[str, Any]] = []  # the configs _big_then_small was called with (system="simple": this process)


def _big_then_small(config: dict[str, Any]) -> dict[str, float]:
    _given.append(config)
    return {"cpu": 2} if len(_given) == 1 else {"cpu": 0.5}


def _fails_first(config: dict[str, Any]) -> None:
    if not os.path.exists(config["go"]):
        raise RuntimeError("not yet")
    report({"loss": 1.0, "cpus": get_context().get_trial_resources().required_resources.get("CPU")})


@pytest.mark.parametrize("how", ["resume_errored", "restart_errored"])
def test_a_restored_trial_keeps_the_resources_it_was_given(how: str, tmp_path: Any) -> None:
    """As Ray's restored Trial keeps its placement group factory (and ``Trial.reset``, a restarted one): read from
    the saved state, not worked out again (the function here would give another answer the second time)."""
    go = str(tmp_path / "go")
    _given.clear()
    run = RunConfig(name="keep", storage=str(tmp_path / "results"), system="simple", verbose=0)
    [r] = Tuner(with_resources(_fails_first, _big_then_small), param_space={"go": go}, run_config=run).fit()
    assert r.error is not None
    open(go, "w").close()
    [r] = Tuner.restore(r.path.rsplit("/", 1)[0], with_resources(_fails_first, _big_then_small),
                        **{how: True}).fit()
    assert r.error is None and r.metrics["cpus"] == 2 and len(_given) == 1


def test_trials_wait_for_a_member_big_enough_only_while_none_of_their_sizes_could_ever_fit() -> None:
    from actors._engine.members import Membership

    m = Membership(make_spec(multi_host=True, leader_resources={}))
    m.joined("w1", {"cpu": 1}, "a1", now=0.0)
    assert m.unplaceable_for(True, 1.0, [{"cpu": 2.0}]) == 0.0, "no member could ever hold 2 CPUs"
    assert m.unplaceable_for(True, 4.0, [{"cpu": 2.0}]) == 3.0
    assert m.unplaceable_for(True, 5.0, [{"cpu": 2.0}, {"cpu": 1.0}]) is None, "one of them fits w1"
    m.joined("w2", {"cpu": 2}, "a2", now=6.0)
    assert m.unplaceable_for(True, 7.0, [{"cpu": 2.0}]) is None


def test_a_choice_dropped_for_its_resources_is_no_scheduler_that_chose_nothing() -> None:
    """Nothing runs, a paused 1-CPU trial fits the only worker, the scheduler picks the 2-CPU trial no member can
    ever hold: the run waits for a worker big enough (the placement deadline, as for any trial no member can hold),
    it is not ended as a scheduler that chose no trial while trials wait."""
    from actors._engine.reducer import Decision
    from actors._engine.signals import MemberJoined, Tick, Wake
    from actors.messages import CheckpointRef, HookKind, SaveKind, TrialResults, TrialSaved

    h = _per_trial([1, 2], multi_host=True, leader_resources={}, placement_grace_s=30.0)
    h.handle(Start(), at=0.0)
    h.ready(ALL_HOOKS)
    h.handle(MemberJoined("w1", {"cpu": 1.0}, "addr"), at=0.5)
    small, big = sorted(h.core.table.trials)
    for call in h.open_calls():  # (the trials' on_trial_add, then the choice)
        h.reply(call.seq, chosen=small if call.kind is HookKind.CHOOSE else None)
    h.handle(TrialResults(small, 1, 1, ({"training_iteration": 1, "loss": 1.0},), None))
    [result] = h.open_calls(HookKind.RESULT)
    h.reply(result.seq, Decision.PAUSE)
    h.handle(TrialSaved(small, 1, 2, CheckpointRef("ckpt/0", 0, 1), SaveKind.PAUSE))
    h.handle(TrialEnded(small, 1, 3, EndReason.STOPPED))
    assert h.core.table.get(small).status is TrialStatus.PAUSED and h.core.table.running == 0
    [choose] = h.open_calls(HookKind.CHOOSE)
    h.reply(choose.seq, chosen=big)
    assert h.core.error is None and h.core.phase.name == "RUNNING", h.core.error
    h.handle(Wake(Tick.PERIODIC), at=40.0)
    h.handle(Wake(Tick.PERIODIC), at=80.0)
    assert "no member can ever run a trial needing {'cpu': 2.0}" in (h.core.error or ""), h.core.error


def test_an_idle_actor_is_reused_only_by_a_trial_of_the_size_it_last_ran() -> None:
    """Ray's actor cache is keyed by the resource request: a trial of another size gets a new actor (its setup,
    not reset_config, runs)."""
    from actors._engine.signals import ActorKind, Spawn

    h = _per_trial([2, 1, 2], total=2.0)
    out = _started(h)
    t0, t1, t2 = sorted(h.core.table.trials)
    [first] = [c.handle for c in out if isinstance(c, Spawn) and c.kind is ActorKind.TRIAL]
    out = h.handle(TrialEnded(t0, 1, 1, EndReason.COMPLETED)) + h.answer_all()
    assert sorted(_runs(out)) == [t1] and [c for c in out if isinstance(c, Spawn)], "1 CPU: not t0's 2-CPU actor"
    out = h.handle(TrialEnded(t1, 1, 1, EndReason.COMPLETED)) + h.answer_all()
    runs = [c for c in out if hasattr(c, "msg") and isinstance(c.msg, RunTrial)]
    assert [(c.msg.trial_id, c.to) for c in runs] == [(t2, first)], "2 CPUs again: t0's actor, reused"


# ---------------------------------------------------------------------------------------- seeded simulations
def _size_of(config: dict[str, Any]) -> dict[str, float]:
    """Half a CPU or one, from the scenario's space. (Not 2: a restore is simulated on this machine's cores, 2 in
    CI, where a 2-CPU trial cannot run beside any other. Then PBT can starve a trial: its choose_trial_to_run
    breaks a tie of last_train_time, which an exploit copies from its source, by table order, so a trial cloned
    from a paused one is chosen before it again and again (seen: seed 46, a restore that never ended). Ray's PBT
    has the same rules.)"""
    return {"cpu": 0.5 if config["step_s"] == 0.5 else 1.0}


@pytest.mark.slow
def test_seeded_simulations_of_trials_of_many_sizes_keep_every_invariant() -> None:
    """The fault sweep's scenarios (every scheduler, every fault kind: deaths, lost exits, members lost and back,
    aborts restored...) with each trial sized by its config: every experiment ends, no history has a gap or a
    duplicate, an aborted one restores. A size that a released trial did not give back (or gave back twice) shows
    as a run that hangs or as more trials at once than the CPUs allow (checked on the engine's books)."""
    import logging

    from actors._engine.core import ExperimentCore
    from tests._sim_scenarios import check, over_held, scenario

    held_over: list[str] = []
    handle = ExperimentCore.handle

    def checked(core: ExperimentCore, event: Any, now: float) -> Any:
        out = handle(core, event, now)
        held_over.extend(over_held(core))
        return out

    logging.getLogger("audition").setLevel(logging.ERROR)
    failures = []
    ExperimentCore.handle = checked  # type: ignore[method-assign]
    try:
        for seed in range(400):
            sc = scenario(seed)
            found = check(sc, resources=_size_of)
            if found or held_over:
                failures.append(f"seed {seed} {sc}: {(found + held_over)[:3]}")
            held_over.clear()
    finally:
        ExperimentCore.handle = handle  # type: ignore[method-assign]
        logging.getLogger("audition").setLevel(logging.NOTSET)
    assert not failures, "\n".join(failures[:10])


def test_a_waiting_trial_bigger_than_the_machine_ends_the_run_once_nothing_else_runs() -> None:
    """A restored trial keeps the size it was given, and this machine may be smaller than the first one: once
    nothing runs and none of the waiting trials could ever fit, the run ends after the placement deadline."""
    from actors._engine.signals import Tick, Wake

    h = _per_trial([2, 1], placement_grace_s=30.0)
    _started(h)
    t0, t1 = sorted(h.core.table.trials)
    h.core.table.get(t1).resources = {"cpu": 3.0}  # (as a restored trial sized on a bigger machine)
    h.handle(TrialEnded(t0, 1, 1, EndReason.COMPLETED), at=1.0)
    h.answer_all()
    h.handle(Wake(Tick.PERIODIC), at=2.0)
    assert h.core.error is None, "the deadline has not passed"
    h.handle(Wake(Tick.PERIODIC), at=40.0)
    assert "no trial waiting can ever run on this machine: one needs {'cpu': 3.0}" in (h.core.error or "")
