"""Whole runs whose decisions were recorded from Ray 2.60: the same script (imports rewritten) must
end each trial where Ray's did.

Recorded by running each probe in a Ray 2.60 virtualenv (``ray.init(num_cpus=2)``) and printing, per
trial, its config, final ``training_iteration``, status and ``num_failures``; the literals below are
Ray's output.
"""

from __future__ import annotations

import os
from typing import Any

from actors import FailureConfig, RunConfig, TuneConfig, Tuner, report
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from actors.stoppers import CombinedStopper, ExperimentPlateauStopper, FunctionStopper, MaximumIterationStopper


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
