"""Ray Tune 2.60's per-trial metric statistics (``Trial.metric_analysis``, which
``get_best_result``/``get_best_trial`` compare), NaN included.

Recorded from Ray 2.60 (``/work/rayvenv``) with a function trainable reporting the sequences in
``SEQ`` (one trial per key, ``grid_search``, ``max_concurrent_trials=1``), then
``get_best_result(metric, mode, scope, filter_nan_and_inf)`` and ``tune.run(...)``'s
``trials[i].metric_analysis``. Ray updates max/min result by result as ``max(value, best)``: a NaN
replaces the best so far and is replaced by the next number, so ``[3.0, 0.5, nan]`` has min NaN
and ``[1.0, nan, 2.0]`` has min and max 2.0.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import actors
from actors import RunConfig, TuneConfig, Tuner, report
from actors.search import grid_search

NAN, INF = float("nan"), float("inf")
SEQ: dict[str, list[Any]] = {
    "a": [1.0, NAN, 2.0],
    "b": [3.0, 0.5, NAN],
    "c": [2.0, 2.0, 2.0],
    "d": [INF, 1.0, 1.5],
    "e": [True, False, True],
}


def _train(config: dict[str, Any]) -> None:
    for i, v in enumerate(SEQ[config["k"]]):
        report({"m": v, "nest": {"v": i}, "s": "text"})


@pytest.fixture
def grid(storage_dir: str) -> Any:
    return Tuner(_train, param_space={"k": grid_search(list(SEQ))},
                 tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(name="stats", storage=storage_dir, verbose=0, system="simple")).fit()


# recorded from Ray 2.60: (mode, scope, filter_nan_and_inf) -> the best trial's "k"
RAY_BEST = {
    ("min", "all", True): "e", ("min", "all", False): "e", ("max", "all", True): "a", ("max", "all", False): "d",
    ("min", "last", True): "e", ("min", "last", False): "e", ("max", "last", True): "a", ("max", "last", False): "a",
    ("min", "avg", True): "e", ("min", "avg", False): "a", ("max", "avg", True): "c", ("max", "avg", False): "a",
    ("min", "last-5-avg", True): "e", ("min", "last-5-avg", False): "a",
    ("max", "last-5-avg", True): "c", ("max", "last-5-avg", False): "a",
    ("min", "last-10-avg", True): "e", ("max", "last-10-avg", False): "a",
}


def test_best_result_by_rays_running_statistics(grid: Any) -> None:
    got = {key: grid.get_best_result("m", key[0], scope=key[1], filter_nan_and_inf=key[2]).config["k"]
           for key in RAY_BEST}
    assert got == RAY_BEST


def test_keys_ray_leaves_out_of_its_analysis_name_no_best_trial(grid: Any) -> None:
    # recorded from Ray 2.60: get_best_result("timestamp", "max") and ("config/k", "min") raise
    # RuntimeError("No best trial found for the given metric: ...")
    for metric in ("timestamp", "config/k", "pid"):
        with pytest.raises(RuntimeError):
            grid.get_best_result(metric, "max")


def test_metric_analysis_is_rays(grid: Any) -> None:
    analysis = actors.ExperimentAnalysis(grid)
    by_k = {t.config["k"]: t.metric_analysis for t in analysis.trials}
    # recorded from Ray 2.60 (tune.run, the same trainable): the keys in the order Ray met them,
    # bools counted, strings, config and the debug keys left out, nested keys last
    assert list(by_k["e"]) == ["m", "done", "training_iteration", "time_this_iter_s", "time_total_s",
                               "time_since_restore", "iterations_since_restore", "nest/v"]
    assert by_k["e"]["m"] == {"max": True, "min": False, "avg": 0.6666666666666666, "last": True,
                              "last-5-avg": 0.6666666666666666, "last-10-avg": 0.6666666666666666}
    assert by_k["e"]["done"]["max"] is False and by_k["e"]["done"]["last"] is False
    assert all(math.isnan(v) for v in by_k["b"]["m"].values())  # [3.0, 0.5, nan]: every statistic NaN
    a = by_k["a"]["m"]  # [1.0, nan, 2.0]
    assert (a["max"], a["min"], a["last"]) == (2.0, 2.0, 2.0) and math.isnan(a["avg"])
    d = by_k["d"]["m"]
    assert (d["max"], d["min"], d["last"], d["avg"], d["last-5-avg"]) == (INF, 1.0, 1.5, INF, INF)
    c = by_k["c"]["m"]
    assert c == {"max": 2.0, "min": 2.0, "avg": 2.0, "last": 2.0, "last-5-avg": 2.0, "last-10-avg": 2.0}
    # Ray's avg is 1 / step * (value + (step - 1) * avg), which is not always value / step bit for bit
    assert by_k["c"]["nest/v"] == {"max": 2, "min": 0, "avg": 1.0, "last": 2, "last-5-avg": 1.0,
                                   "last-10-avg": 1.0}


class _Obj:
    def __repr__(self) -> str:
        return "Obj()"


def _odd_values(config: dict[str, Any]) -> None:
    import numpy as np

    report({"top": 1, "n": {"a": 0, "d": {"x": 1}, "b": 2}, "empty": {}, "ls": ["a", "b"], "tp": (1, "c"),
            "arr": np.arange(3), "f32": np.float32(0.1), "o": _Obj(), "st": {1}, "none": None, "comma": "a,b"})


def test_progress_csv_and_result_json_hold_values_as_rays(storage_dir: str) -> None:
    """Recorded from Ray 2.60: one report of these values, then ``progress.csv`` (read with
    ``csv.reader``) and ``result.json``. Ray writes the CSV with ``csv.DictWriter`` over its
    ``flatten_dict`` of the result (nested keys after the flat ones, level by level; an empty dict
    makes no column), so each cell is ``str(value)``; ``result.json`` writes a set as its ``str``."""
    import csv
    import json
    import os

    pytest.importorskip("numpy")
    r = Tuner(_odd_values, param_space={"x": 1},
              run_config=RunConfig(name="odd", storage=storage_dir, verbose=0, system="simple")).fit()[0]
    with open(os.path.join(r.path, "progress.csv"), newline="") as handle:
        header, row = list(csv.reader(handle))
    cells = dict(zip(header, row, strict=True))
    ray_columns = ["top", "ls", "tp", "arr", "f32", "o", "st", "none", "comma", "checkpoint_dir_name", "done",
                   "training_iteration", "iterations_since_restore", "n/a", "n/b", "n/d/x"]
    assert [c for c in header if c in ray_columns or c.startswith(("n/", "empty"))] == ray_columns
    assert {c: cells[c] for c in ray_columns[:9]} == {
        "top": "1", "ls": "['a', 'b']", "tp": "(1, 'c')", "arr": "[0 1 2]", "f32": "0.1", "o": "Obj()",
        "st": "{1}", "none": "", "comma": "a,b"}
    with open(os.path.join(r.path, "result.json")) as handle:
        line = json.loads(handle.readline())
    assert (line["st"], line["ls"], line["tp"], line["arr"], line["o"], line["empty"]) == (
        "{1}", ["a", "b"], [1, "c"], [0, 1, 2], "Obj()", {})
    assert r.metrics_dataframe["st"].tolist() == ["{1}"]


def _mixed(config: dict[str, Any]) -> None:
    for v in ([None, "x", 4.0, 3.0] if config["k"] == "c" else [2.0, 1.0, 5.0]):
        report({"m": v})


def test_a_mixed_column_is_compared_by_its_numbers_in_both_dataframes(storage_dir: str) -> None:
    """Ray 2.60 raises ``TypeError`` for ``get_dataframe(filter_metric="m", ...)`` when a trial reported
    ``None``, ``"x"``, then numbers (recorded); audition compares the numbers, the same way in
    ``get_dataframe`` and ``ExperimentAnalysis.dataframe`` (documented in coming-from-ray.md)."""
    pytest.importorskip("pandas")
    grid = Tuner(_mixed, param_space={"k": grid_search(["a", "c"])}, tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(name="mixed", storage=storage_dir, verbose=0, system="simple")).fit()
    for mode, want in (("min", [1.0, 3.0]), ("max", [5.0, 4.0])):
        assert grid.get_dataframe(filter_metric="m", filter_mode=mode)["m"].tolist() == want
        assert actors.ExperimentAnalysis(grid).dataframe("m", mode)["m"].tolist() == want


def _fails_at_two(config: dict[str, Any]) -> None:
    report({"x": 1})
    if config["x"] == 2:
        raise ValueError("bad x")


def test_an_analysis_trial_names_its_error_file_as_rays(storage_dir: str) -> None:
    """Recorded from Ray 2.60: ``error_file`` is None for a TERMINATED trial and an existing ``error.txt``
    for an ERROR one (Ray's is in its driver's staging directory, audition's in the trial's directory)."""
    import os

    from actors import ExperimentAnalysis

    Tuner(_fails_at_two, param_space={"x": grid_search([1, 2])},
          run_config=RunConfig(name="errs", storage=storage_dir, verbose=0, system="simple")).fit()
    ok, failed = sorted(ExperimentAnalysis(os.path.join(storage_dir, "errs")).trials, key=lambda t: t.config["x"])
    assert ok.error_file is None
    assert failed.error_file == os.path.join(failed.path, "error.txt") and os.path.exists(failed.error_file)
    assert "ValueError: bad x" in open(failed.error_file).read()
