"""Whole runs whose decisions were recorded from Ray 2.60: the same script (imports rewritten) must
end each trial where Ray's did.

Recorded by running each probe in a Ray 2.60 virtualenv (``ray.init(num_cpus=2)``) and printing, per
trial, its config, final ``training_iteration``, status and ``num_failures``; the literals below are
Ray's output.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from actors import FailureConfig, RunConfig, Trainable, TuneConfig, Tuner, report
from actors._engine.trial import TrialStatus
from actors.schedulers import AsyncHyperBandScheduler, FIFOScheduler
from actors.search import Searcher, grid_search
from actors.stoppers import CombinedStopper, ExperimentPlateauStopper, FunctionStopper, MaximumIterationStopper
from actors.testing import simulate


def _fit(trainable: Any, space: dict[str, Any], storage_dir: str, stop: Any, **failure: Any) -> Any:
    return Tuner(trainable, param_space=space, tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(name="exp", storage=storage_dir, system="simple", verbose=0, stop=stop,
                                      failure_config=FailureConfig(**failure))).fit()


def _ends(grid: Any) -> dict[Any, tuple[Any, TrialStatus, int]]:
    return {r.config["x"]: (r.metrics.get("training_iteration"), r.status, r.num_failures) for r in grid}


def _fails_once_at_third(marks: str) -> Any:
    def train(config: dict[str, Any]) -> None:
        for i in range(1, 9):
            mark = os.path.join(marks, str(config["x"]))
            if i == 3 and not os.path.exists(mark):
                open(mark, "w").close()
                raise RuntimeError("the first run fails at its third iteration")
            report({"m": config["x"] * i})
    return train


def test_maximum_iteration_stopper_counts_the_failed_runs_results(storage_dir: str, tmp_path: Any) -> None:
    # Probe: x in [1, 2], the first run of each fails at iteration 3 (no checkpoint, so the retry
    # starts over), FailureConfig(max_failures=2). Ray 2.60 with MaximumIterationStopper(5): both
    # end TERMINATED at training_iteration 3 with num_failures 1 (2 + 3 results seen); with
    # CombinedStopper(MaximumIterationStopper(6), FunctionStopper(m >= 10)), max_failures=-1: both at 4.
    (tmp_path / "a").mkdir()
    grid = _fit(_fails_once_at_third(str(tmp_path / "a")), {"x": grid_search([1, 2])}, storage_dir,
                MaximumIterationStopper(5), max_failures=2)
    assert _ends(grid) == {1: (3, TrialStatus.TERMINATED, 1), 2: (3, TrialStatus.TERMINATED, 1)}
    (tmp_path / "b").mkdir()
    grid = _fit(_fails_once_at_third(str(tmp_path / "b")), {"x": grid_search([1, 2])}, storage_dir + "2",
                CombinedStopper(MaximumIterationStopper(6), FunctionStopper(lambda t, r: r["m"] >= 10)),
                max_failures=-1)
    assert _ends(grid) == {1: (4, TrialStatus.TERMINATED, 1), 2: (4, TrialStatus.TERMINATED, 1)}


def _sequences(config: dict[str, Any]) -> None:
    for v in {"a": [1, 2, 2, 2, 2, 2, 2, 2, 2, 2], "b": [5, 4, 3, 3.005, 3, 3.005, 3, 3, 3, 3]}[config["x"]]:
        report({"m": v})


def test_experiment_plateau_patience_ends_the_run_where_ray_does(storage_dir: str, tmp_path: Any) -> None:
    # Probe: trials one after another (max_concurrent_trials=1), x="a" reports 1, 2, 2, 2, ...
    # Ray 2.60, ExperimentPlateauStopper("m", top=4, patience=1, std=0.01, mode="max"): "a" ends at
    # iteration 5 and "b" is never created; top=2, patience=3, std=0.5: "a" ends at iteration 4.
    grid = _fit(_sequences, {"x": grid_search(["a", "b"])}, storage_dir,
                ExperimentPlateauStopper("m", top=4, patience=1, std=0.01, mode="max"))
    assert _ends(grid) == {"a": (5, TrialStatus.TERMINATED, 0)}
    grid = _fit(_sequences, {"x": grid_search(["a", "b"])}, storage_dir + "2",
                ExperimentPlateauStopper("m", top=2, patience=3, std=0.5, mode="max"))
    assert _ends(grid) == {"a": (4, TrialStatus.TERMINATED, 0)}


_PLATEAUS = {"a": [1, 5, 5, 5, 5], "b": [3, 5, 5, 5, 5], "c": [4, 4, 6, 6, 6], "d": [5, 5, 5, 5, 5],
             "e": [5, 5, 5, 5, 5]}


def _plateaus(config: dict[str, Any]) -> None:
    for v in _PLATEAUS[config["x"]]:
        report({"m": v})


def test_combined_stopper_hides_a_stopped_result_from_the_stoppers_after(storage_dir: str) -> None:
    # Probe: trials a..e one after another, CombinedStopper(MaximumIterationStopper(2),
    # ExperimentPlateauStopper("m", top=2, std=0.001, mode="max")). Ray 2.60: a, b, c, d end at
    # iteration 2 and e at 1 (the plateau stopper never saw the 5s that ended a, b and d: its top
    # values first read [5, 5] at e's first result).
    grid = _fit(_plateaus, {"x": grid_search(list(_PLATEAUS))}, storage_dir,
                CombinedStopper(MaximumIterationStopper(2),
                                ExperimentPlateauStopper("m", top=2, std=0.001, mode="max")))
    assert {x: end[0] for x, end in _ends(grid).items()} == {"a": 2, "b": 2, "c": 2, "d": 2, "e": 1}


def _note(log: str, *row: Any) -> None:
    with open(log, "a") as f:  # (a file: on "multiproc" the scheduler and the searcher run in other processes)
        f.write(" ".join(str(v) for v in row) + "\n")


class _SeeingASHA(AsyncHyperBandScheduler):
    def __init__(self, log: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.log = log

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        _note(self.log, "sched", trial.config["x"], result["training_iteration"])
        return super().on_trial_result(controller, trial, result)


class _SeeingFIFO(FIFOScheduler):
    def __init__(self, log: str) -> None:
        super().__init__()
        self.log = log

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        _note(self.log, "sched", trial.config["x"], result["training_iteration"])
        return super().on_trial_result(controller, trial, result)


class _SeeingSearcher(Searcher):
    """Suggests the given x values in turn and notes the results it is told of."""

    def __init__(self, log: str, xs: list[int]) -> None:
        super().__init__(metric="m", mode="max")
        self.log, self.xs, self.x_of = log, list(xs), {}

    def suggest(self, trial_id: str) -> Any:
        if not self.xs:
            return Searcher.FINISHED
        self.x_of[trial_id] = self.xs.pop(0)
        return {"x": self.x_of[trial_id]}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        _note(self.log, "search", self.x_of[trial_id], result["training_iteration"])

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        assert result is not None
        _note(self.log, "complete", self.x_of[trial_id], result["training_iteration"], result["done"])


def _says_done(config: dict[str, Any]) -> None:
    for i in range(1, 10):
        report({"m": i, "done": i >= config["x"]})


class _StepsDone(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.x = config["x"]

    def step(self) -> dict[str, Any]:
        return {"m": self.iteration + 1, "done": self.iteration + 1 >= self.x}


def _seen(log: str) -> list[tuple[Any, ...]]:
    with open(log) as f:
        return sorted(tuple(line.split()) for line in f)


# Recorded from Ray 2.60 (/tmp probe, ray.init(num_cpus=2)): the same scripts with ray.tune imports, the
# scheduler, searcher and trainables above, max_concurrent_trials=1, num_samples=2. Ray's
# TuneController._process_trial_result decides a result with done=True STOP through Trial.should_stop,
# without calling the scheduler's on_trial_result, and calls the searcher's only when not STOP; the
# searcher's on_trial_complete gets that result (done True). Ray's lines, as (hook, x, iteration[, done]):
RAY_ASHA_FUNCTION = [("complete", "3", "3", "True"), ("complete", "5", "5", "True"),
                     ("sched", "3", "1"), ("sched", "3", "2"),
                     ("sched", "5", "1"), ("sched", "5", "2"), ("sched", "5", "3"), ("sched", "5", "4"),
                     ("search", "3", "1"), ("search", "3", "2"),
                     ("search", "5", "1"), ("search", "5", "2"), ("search", "5", "3"), ("search", "5", "4")]
RAY_PER_RESULT_CLASS = [("complete", "2", "2", "True"), ("complete", "4", "4", "True"),
                        ("sched", "2", "1"), ("sched", "4", "1"), ("sched", "4", "2"), ("sched", "4", "3"),
                        ("search", "2", "1"), ("search", "4", "1"), ("search", "4", "2"), ("search", "4", "3")]


def test_a_result_reported_done_reaches_neither_the_scheduler_nor_the_searcher(storage_dir: str,
                                                                               tmp_path: Any) -> None:
    # ASHA (grace_period=1, max_t=8, rungs 1 and 4): its horizon lets results between rungs come batched,
    # so a batch can end in the done result; the scheduler is asked about the ones before it only
    log = str(tmp_path / "seen.txt")
    grid = Tuner(_says_done, tune_config=TuneConfig(
        num_samples=2, max_concurrent_trials=1, search_alg=_SeeingSearcher(log, [3, 5]), metric="m", mode="max",
        scheduler=_SeeingASHA(log, grace_period=1, max_t=8)),
        run_config=RunConfig(name="exp", storage=storage_dir, system="simple", verbose=0)).fit()
    assert _ends(grid) == {3: (3, TrialStatus.TERMINATED, 0), 5: (5, TrialStatus.TERMINATED, 0)}
    assert _seen(log) == RAY_ASHA_FUNCTION


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_step_returning_done_is_decided_without_a_per_result_scheduler(system: str, storage_dir: str,
                                                                         tmp_path: Any, no_leaks: None) -> None:
    # a scheduler overriding on_trial_result decides every result: window 1 on "simple"; on "multiproc"
    # the trial asks it directly (DecideResult), except for the done result
    log = str(tmp_path / "seen.txt")
    grid = Tuner(_StepsDone, tune_config=TuneConfig(
        num_samples=2, max_concurrent_trials=1, search_alg=_SeeingSearcher(log, [2, 4]), scheduler=_SeeingFIFO(log)),
        run_config=RunConfig(name="exp", storage=storage_dir, system=system, verbose=0)).fit()
    assert _ends(grid) == {2: (2, TrialStatus.TERMINATED, 0), 4: (4, TrialStatus.TERMINATED, 0)}
    assert _seen(log) == RAY_PER_RESULT_CLASS


def _steps_done(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"m": i, "done": i >= config["x"]}


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "through-the-core"])
def test_the_simulator_decides_a_done_result_without_the_scheduler(direct: bool, tmp_path: Any) -> None:
    # the simulated trial mirrors the worker: it does not ask the scheduler about its done result
    log = str(tmp_path / "seen.txt")
    sim = simulate(_steps_done, tune_config=TuneConfig(
        num_samples=2, max_concurrent_trials=1, search_alg=_SeeingSearcher(log, [2, 4]), scheduler=_SeeingFIFO(log)),
        direct_decisions=direct)
    try:
        assert sim.error is None and not sim.hung and sim.world.core.orders.direct == ("simulated" if direct else "")
        assert _seen(log) == RAY_PER_RESULT_CLASS
    finally:
        sim.discard()
