"""Search algorithms and stoppers end to end through ``Tuner.fit()``.

The unit tests (``test_searchers.py``, ``test_optuna_search.py``, ``test_stoppers.py``)
drive searchers and stoppers directly; here the real engine calls them: a
ConcurrencyLimiter around OptunaSearch under ASHA on the multi-process system, a
user-written Searcher, a Repeater, and stoppers that end trials or the whole
experiment, including while HyperBand pauses trials at its rung boundaries.

Searcher state is read back from the experiment state the controller saved in
storage (``snapshot_table``'s ``"searcher"`` key), so the assertions hold whether
or not the actor system copies the searcher.
"""

from __future__ import annotations

import base64
import os
import pickle
import sys
import time
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._driver.result_grid import ResultGrid
from actors._engine.trial import TrialStatus
from actors.schedulers import ASHAScheduler, HyperBandScheduler
from actors.search import (
    BasicVariantGenerator,
    ConcurrencyLimiter,
    OptunaSearch,
    Repeater,
    Searcher,
    choice,
    grid_search,
    randint,
    uniform,
)
from actors.stoppers import (
    CombinedStopper,
    ExperimentPlateauStopper,
    MaximumIterationStopper,
    Stopper,
    TimeoutStopper,
)
from storage import ExperimentLayout, StorageContext, read_experiment_state

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_init_resources import overlap  # (most trials at once: the recorder's count, used here too)

pytestmark = pytest.mark.timeout(60)


# ---------------------------------------------------------------------------- trainables

def timed_trainable(config: dict[str, Any]) -> None:
    """Reports ``steps`` results stamped with wall time; loss ``(x - 0.3)^2 + 1 / step``."""
    started = time.time()
    for step in range(1, config.get("steps", 6) + 1):
        time.sleep(config.get("work", 0.0))  # simulated work, not a wait
        loss = (config["x"] - 0.3) ** 2 + 1.0 / step
        report_time = time.time()
        _report({"loss": loss, "started": started, "now": report_time, "step": step})


def _report(metrics: dict[str, Any]) -> None:
    from actors import report

    report(metrics)


def flat_trainable(config: dict[str, Any]) -> None:
    """The same loss at every step: an experiment-level plateau right away."""
    for step in range(1, config.get("steps", 1000) + 1):
        time.sleep(config.get("work", 0.0))  # simulated work, not a wait
        _report({"loss": 1.0, "step": step})


# ---------------------------------------------------------------------------- helpers

def _state(storage_dir: str, name: str) -> dict[str, Any]:
    ctx = StorageContext(storage_dir)
    state = read_experiment_state(ctx, ExperimentLayout(ctx, name))
    assert state is not None, "no experiment state was saved"
    return state


def _searcher_state(storage_dir: str, name: str) -> dict[str, Any]:
    blob = _state(storage_dir, name)["searcher"]
    assert blob is not None, "the experiment state holds no searcher state"
    loaded: dict[str, Any] = pickle.loads(base64.b64decode(blob))
    return loaded


def _iterations(grid: ResultGrid) -> dict[str, list[int]]:
    return {r.trial_id: [h["training_iteration"] for h in r.metrics_history] for r in grid}


def _check_clean(grid: ResultGrid, n_trials: int) -> None:
    assert grid.num_errors == 0, [str(e) for e in grid.errors]
    assert len(grid) == n_trials
    for r in grid:
        assert r.status is TrialStatus.TERMINATED, (r.trial_id, r.status)
        its = [h["training_iteration"] for h in r.metrics_history]
        assert its == list(range(1, len(its) + 1)), (r.trial_id, its)


class FixedSearcher(Searcher):
    """Suggests ``configs`` in order, then FINISHED; records every call the engine makes."""

    def __init__(self, configs: list[dict[str, Any]], metric: str | None = None, mode: str | None = None) -> None:
        super().__init__(metric, mode)
        self.configs = [dict(c) for c in configs]
        self.next = 0
        self.suggested: list[str] = []
        self.results: list[tuple[str, int]] = []
        self.completed: list[tuple[str, dict[str, Any] | None, bool]] = []
        self.events: list[tuple[str, str]] = []  # ("result" | "complete", trial_id), in call order

    def suggest(self, trial_id: str) -> dict[str, Any] | Any:
        if self.next >= len(self.configs):
            return Searcher.FINISHED
        config = dict(self.configs[self.next])
        self.next += 1
        self.suggested.append(trial_id)
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.results.append((trial_id, int(result["training_iteration"])))
        self.events.append(("result", trial_id))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        self.completed.append((trial_id, dict(result) if result else None, error))
        self.events.append(("complete", trial_id))

    def save(self) -> dict[str, Any]:
        return {"kind": "FixedSearcher", **self._base_state(), "configs": self.configs, "next": self.next,
                "suggested": list(self.suggested), "results": list(self.results),
                "completed": list(self.completed), "events": list(self.events)}

    def restore(self, state: dict[str, Any]) -> None:
        self._restore_base(state)
        self.configs, self.next = state["configs"], state["next"]
        self.suggested, self.results = list(state["suggested"]), list(state["results"])
        self.completed = list(state["completed"])
        self.events = list(state["events"])


# ---------------------------------------------------------------------------- a. Optuna + limiter + ASHA

@pytest.mark.slow
def test_optuna_behind_a_concurrency_limiter_under_asha(storage_dir: str, no_leaks: None) -> None:
    optuna = pytest.importorskip("optuna")
    assert optuna.__version__
    sched = ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=1, reduction_factor=2)
    grid = Tuner(
        timed_trainable,
        param_space={"x": uniform(0.0, 1.0), "steps": 6, "work": 0.02},
        tune_config=TuneConfig(metric="loss", mode="min", num_samples=8, scheduler=sched,
                               search_alg=ConcurrencyLimiter(OptunaSearch(seed=0), max_concurrent=2)),
        run_config=RunConfig(name="optuna", storage=storage_dir, verbose=0),  # system="multiproc"
    ).fit()
    _check_clean(grid, 8)
    assert len({r.config["x"] for r in grid}) == 8  # eight distinct Optuna suggestions
    assert any(len(r.metrics_history) < 6 for r in grid)  # ASHA cut some trials short
    windows = [(r.metrics_history[0]["started"], r.metrics_history[-1]["now"]) for r in grid]
    assert overlap(windows) <= 2, sorted(windows)

    merged = _searcher_state(storage_dir, "optuna")  # (the Tuner's wrapper: suggestions merged into param_space)
    assert merged["kind"] == "ConstantsMerged"
    saved = merged["searcher"]
    assert saved["kind"] == "ConcurrencyLimiter"
    assert saved["live"] == [] and saved["held"] == []  # every trial was reported complete
    assert saved["searcher"]["kind"] == "OptunaSearch"
    assert saved["searcher"]["metric"] == "loss" and saved["searcher"]["mode"] == "min"
    # the saved state restores into a fresh limiter, which then has no live trials
    resumed = ConcurrencyLimiter(OptunaSearch(), max_concurrent=2)
    resumed.restore(saved)
    assert resumed.live_trials == []


# ---------------------------------------------------------------------------- b. a user-written Searcher

def test_user_searcher_sees_every_result_in_order(storage_dir: str, no_leaks: None) -> None:
    configs = [{"x": 0.1, "steps": 3}, {"x": 0.5, "steps": 5}, {"x": 0.9, "steps": 2}]
    searcher = FixedSearcher(configs)
    grid = Tuner(
        timed_trainable,
        tune_config=TuneConfig(metric="loss", mode="min", num_samples=10, search_alg=searcher),
        run_config=RunConfig(name="fixed", storage=storage_dir, system="simple", verbose=0),
    ).fit()
    _check_clean(grid, 3)  # FINISHED after three configs, although num_samples allows ten
    by_id = {r.trial_id: r for r in grid}
    assert sorted((r.config["x"], len(r.metrics_history)) for r in grid) == [(0.1, 3), (0.5, 5), (0.9, 2)]

    saved = _searcher_state(storage_dir, "fixed")
    assert saved["metric"] == "loss" and saved["mode"] == "min"  # set_search_properties filled them in
    assert sorted(saved["suggested"]) == sorted(by_id)
    for trial_id, r in by_id.items():
        seen = [it for t, it in saved["results"] if t == trial_id]
        assert seen == [h["training_iteration"] for h in r.metrics_history], (trial_id, seen)
    completions = [t for t, _, _ in saved["completed"]]
    assert sorted(completions) == sorted(by_id)  # exactly one completion per trial
    for trial_id, last, error in saved["completed"]:
        assert not error and last is not None
        assert last["training_iteration"] == len(by_id[trial_id].metrics_history)
    for trial_id in by_id:  # no result reaches the searcher after the trial's completion
        mine = [kind for kind, t in saved["events"] if t == trial_id]
        assert mine == ["result"] * len(by_id[trial_id].metrics_history) + ["complete"], (trial_id, mine)


class _SearchedOnly(Searcher):
    """Ray's pattern: takes the Tuner's param_space and suggests only the values it searches."""

    def __init__(self) -> None:
        super().__init__(metric="loss", mode="min")
        self.n = 0

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any] | None,
                              **spec: Any) -> bool:
        self.space = config
        return True

    def suggest(self, trial_id: str) -> dict[str, Any]:
        self.n += 1
        return {"x": self.n, "nest": {"b": self.n * 10}}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        pass


def _seen_config(config: dict[str, Any]) -> None:
    from actors import report

    report({"loss": 1.0, "keys": list(config), "nest": dict(config["nest"])})


def test_a_searchers_suggestion_is_merged_into_the_param_space_as_in_ray(
        storage_dir: str, no_leaks: None, caplog: pytest.LogCaptureFixture) -> None:
    grid = Tuner(
        _seen_config,
        param_space={"a": 1, "x": uniform(0, 1), "nest": {"b": uniform(0, 1), "c": 5}, "y": choice([1, 2])},
        tune_config=TuneConfig(num_samples=2, search_alg=_SearchedOnly()),
        run_config=RunConfig(name="merged", storage=storage_dir, system="simple", verbose=0),
    ).fit()
    got = [(r.metrics["keys"], r.metrics["nest"], r.config, r.metrics["experiment_tag"]) for r in grid]
    # recorded from Ray 2.60 (its configs also hold y, the unresolved Categorical object, and its tags "y=ray_...")
    assert got == [
        (["a", "x", "nest"], {"b": 10, "c": 5}, {"a": 1, "x": 1, "nest": {"b": 10, "c": 5}}, "1_a=1,b=10,c=5,x=1"),
        (["a", "x", "nest"], {"b": 20, "c": 5}, {"a": 1, "x": 2, "nest": {"b": 20, "c": 5}}, "2_a=1,b=20,c=5,x=2")]
    warned = [r.getMessage() for r in caplog.records if "suggested no value for 'y'" in r.getMessage()]
    assert len(warned) == 1, warned  # once, naming the domain left out


def test_a_searcher_state_saved_before_the_merge_wrapper_restores_into_it() -> None:
    from actors.search._wrappers import ConstantsMerged

    class Counting(_SearchedOnly):
        def save(self) -> dict[str, Any]:
            return {"kind": "Counting", "n": self.n}

        def restore(self, state: dict[str, Any]) -> None:
            self.n = state["n"]

    old = Counting()
    old.n = 7  # an experiment saved before 2026-12-05 holds the searcher's own state, unwrapped
    wrapped = ConstantsMerged(Counting(), {"a": 1, "x": uniform(0, 1)})
    wrapped.restore(old.save())
    assert wrapped.suggest("t8") == {"a": 1, "x": 8, "nest": {"b": 80}}
    again = ConstantsMerged(Counting(), {"a": 1})
    again.restore(wrapped.save())
    assert again.searcher.n == 8


# ---------------------------------------------------------------------------- c. Repeater

def test_repeater_runs_each_config_repeat_times(storage_dir: str, no_leaks: None) -> None:
    inner = FixedSearcher([{"x": 0.2, "steps": 2}, {"x": 0.7, "steps": 2}], metric="loss", mode="min")
    grid = Tuner(
        timed_trainable,
        tune_config=TuneConfig(metric="loss", mode="min", num_samples=6, search_alg=Repeater(inner, repeat=3)),
        run_config=RunConfig(name="repeat", storage=storage_dir, system="simple", verbose=0),
    ).fit()
    _check_clean(grid, 6)
    groups: dict[float, list[int]] = {}
    for r in grid:
        groups.setdefault(r.config["x"], []).append(r.config["__trial_index__"])
    assert {x: sorted(ix) for x, ix in groups.items()} == {0.2: [0, 1, 2], 0.7: [0, 1, 2]}

    saved = _searcher_state(storage_dir, "repeat")
    assert saved["kind"] == "Repeater" and saved["groups"] == {} and saved["trial_group"] == {}
    inner_saved = saved["searcher"]
    assert len(inner_saved["suggested"]) == 2 and len(inner_saved["completed"]) == 2
    final = {r.config["x"]: r.metrics["loss"] for r in grid}
    got = {}
    for group_id, result, error in inner_saved["completed"]:
        assert not error and result is not None
        got[group_id] = result["loss"]
    # each group's result is the mean of its three (identical, deterministic) final losses
    assert sorted(got.values()) == pytest.approx(sorted(final.values()))


# ---------------------------------------------------------------------------- c2. BasicVariantGenerator

def sum_trainable(config: dict[str, Any]) -> dict[str, Any]:
    return {"s": config["a"] + config["b"]}


def _by_trial(grid: ResultGrid) -> list[dict[str, Any]]:
    return [r.config for r in sorted(grid, key=lambda r: r.metrics["trial_id"])]


def test_basic_variant_generator_with_ray_arguments(storage_dir: str, no_leaks: None) -> None:
    """Ray's docstring example, constant_grid_search and random_state through Tuner.fit().

    Recorded from Ray 2.60 (Tuner.fit() with these arguments, trials by trial id): the points give
    a = [2, 1, 1, 2, 1, 2] with b = 2 in trials 0, 2 and 3; constant_grid_search holds b over each
    sweep of a; random_state=5 repeats the configs run after run.
    """
    def fit(gen: BasicVariantGenerator, name: str, num_samples: int) -> list[dict[str, Any]]:
        grid = Tuner(sum_trainable, param_space={"a": grid_search([1, 2]), "b": randint(0, 3)},
                     tune_config=TuneConfig(search_alg=gen, num_samples=num_samples),
                     run_config=RunConfig(name=name, storage=storage_dir, system="simple", verbose=0)).fit()
        _check_clean(grid, len(grid))
        return _by_trial(grid)

    points = fit(BasicVariantGenerator(points_to_evaluate=[{"a": 2, "b": 2}, {"a": 1}, {"b": 2}]), "points", 4)
    assert [c["a"] for c in points] == [2, 1, 1, 2, 1, 2]
    assert [points[i]["b"] for i in (0, 2, 3)] == [2, 2, 2]
    held = fit(BasicVariantGenerator(constant_grid_search=True, random_state=5), "held", 3)
    assert [c["a"] for c in held] == [1, 2] * 3
    assert all(held[i]["b"] == held[i + 1]["b"] for i in (0, 2, 4))
    assert fit(BasicVariantGenerator(constant_grid_search=True, random_state=5), "held_again", 3) == held
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] sets 'c'"):
        Tuner(sum_trainable, param_space={"a": 1, "b": 2},
              tune_config=TuneConfig(search_alg=BasicVariantGenerator([{"c": 1}])))


# ---------------------------------------------------------------------------- d. stoppers

def test_combined_stopper_caps_iterations(storage_dir: str, no_leaks: None) -> None:
    stop = CombinedStopper(TimeoutStopper(30.0), MaximumIterationStopper(3))
    grid = Tuner(
        timed_trainable,
        param_space={"x": grid_search([0.1, 0.5, 0.9]), "steps": 50},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(name="combined", storage=storage_dir, stop=stop, system="simple", verbose=0),
    ).fit()
    _check_clean(grid, 3)
    assert all(its == [1, 2, 3] for its in _iterations(grid).values()), _iterations(grid)


@pytest.mark.slow
def test_timeout_stopper_ends_the_experiment(storage_dir: str, no_leaks: None) -> None:
    stop = CombinedStopper(TimeoutStopper(1.0), MaximumIterationStopper(10_000))
    started = time.monotonic()
    grid = Tuner(
        flat_trainable,
        param_space={"x": grid_search([0.1, 0.5]), "steps": 2000, "work": 0.01},  # ~20 s unstopped
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(name="timeout", storage=storage_dir, stop=stop, verbose=0),
    ).fit()
    assert time.monotonic() - started < 15.0
    assert grid.num_errors == 0, [str(e) for e in grid.errors]
    assert all(r.status is TrialStatus.TERMINATED for r in grid)
    assert all(len(its) < 2000 for its in _iterations(grid).values())


def test_experiment_plateau_stopper_ends_the_experiment(storage_dir: str, no_leaks: None) -> None:
    stop = ExperimentPlateauStopper("loss", std=0.001, top=3, mode="min")
    grid = Tuner(
        flat_trainable,
        param_space={"x": grid_search([0.1, 0.5, 0.9]), "steps": 1000, "work": 0.005},
        tune_config=TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(name="plateau", storage=storage_dir, stop=stop, system="simple", verbose=0),
    ).fit()
    assert grid.num_errors == 0, [str(e) for e in grid.errors]
    assert all(r.status is TrialStatus.TERMINATED for r in grid), [r.status for r in grid]
    total = sum(len(its) for its in _iterations(grid).values())
    assert total < 100, _iterations(grid)  # stopped soon after the third result, not at 3 x 1000


class StopAtRung(Stopper):
    """Stops each trial at ``at`` iterations: exactly where HyperBand pauses it at a rung."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(result["training_iteration"] >= self.at)


HYPERBAND_STOPPERS = [
    pytest.param(lambda: StopAtRung(1), id="trial-stop-at-rung-1"),
    pytest.param(lambda: StopAtRung(3), id="trial-stop-at-rung-3"),
    pytest.param(lambda: ExperimentPlateauStopper("loss", std=10.0, top=4, mode="min", patience=12),
                 id="stop-all"),
]


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_stopper", HYPERBAND_STOPPERS)
def test_stopper_under_hyperband_pausing_at_rungs(make_stopper: Any, storage_dir: str, no_leaks: None) -> None:
    sched = HyperBandScheduler(time_attr="training_iteration", max_t=9, reduction_factor=3)
    grid = Tuner(
        timed_trainable,
        param_space={"x": grid_search([i / 10 for i in range(9)]), "steps": 9},
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=sched),
        run_config=RunConfig(name="hb", storage=storage_dir, stop=make_stopper(), verbose=0),
    ).fit()
    assert grid.num_errors == 0, [str(e) for e in grid.errors]
    stopper = make_stopper()
    # stop_all starts no further trial, so the grid may be cut short; trial stops run all nine
    assert len(grid) == 9 if isinstance(stopper, StopAtRung) else 1 <= len(grid) <= 9
    for r in grid:
        assert r.status is TrialStatus.TERMINATED, (r.config, r.status)
        its = [h["training_iteration"] for h in r.metrics_history]
        assert its == list(range(1, len(its) + 1)), (r.config, its)
    if isinstance(stopper, StopAtRung):
        assert all(len(its) <= stopper.at for its in _iterations(grid).values()), _iterations(grid)
    state = _state(storage_dir, "hb")
    statuses = [row["status"] for row in state["trials"]]
    assert statuses == [TrialStatus.TERMINATED.value] * len(grid), statuses
    if not isinstance(stopper, StopAtRung):
        assert sum(len(its) for its in _iterations(grid).values()) < 9 * 9  # ended early
