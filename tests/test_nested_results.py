"""Nested results as Ray Tune 2.60 treats them: flattened with ``/`` for the metric check, the
scheduler, the searcher and the dataframes; ``get_best_result`` over Ray's per-trial statistics.

Every expected value here was recorded from Ray 2.60 running the same script (Ray is not needed
to run these tests).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._driver.errors import ConfigError
from actors._engine.flat import flatten, lookup
from actors.schedulers import FIFOScheduler
from actors.search import Searcher, grid_search


def test_flatten_as_ray() -> None:
    # recorded from Ray 2.60: ray._private.dict.flatten_dict on the same dict
    got = flatten({"a": 1, "m": {"x": 1, "y": {"z": 2}}, "e": {}, "b": [1, {"c": 2}], "k": {"1": 3}})
    assert list(got.items()) == [("a", 1), ("b", [1, {"c": 2}]), ("m/x", 1), ("k/1", 3), ("m/y/z", 2)]
    assert lookup({"m": {"x": {"y": 5}}}, "m/x/y") == 5 and lookup({"m/x": 1}, "m/x") == 1
    assert lookup({"m": {"x": 1}}, "m/z", "absent") == "absent"
    # as flatten: a list is a value, not a level (Ray's flatten_dict does not enter lists either)
    assert lookup({"m": [1, 2]}, "m/0") is None and "m/0" not in flatten({"m": [1, 2]})
    # Ray's unflattened_lookup (Result.get_best_checkpoint) also indexes lists
    assert lookup({"m": [1, {"c": 2}]}, "m/1/c", sequences=True) == 2
    assert lookup({"m": [1, 2]}, "m/-1", sequences=True) == 2 and lookup({"m": [1]}, "m/5", sequences=True) is None


SEEN: list[tuple[str, dict[str, Any]]] = []  # what the plugins were handed (system="simple": one process)


class Recording(FIFOScheduler):
    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        SEEN.append(("scheduler", result))
        return super().on_trial_result(tune_controller, trial, result)


class OneConfig(Searcher):
    def __init__(self) -> None:
        super().__init__()
        self.given = False

    def suggest(self, trial_id: str) -> Any:
        if self.given:
            return Searcher.FINISHED
        self.given = True
        return {"lr": 0.5, "opt": {"name": "sgd"}}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        SEEN.append(("searcher", result))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        SEEN.append(("complete", result or {}))


def nested(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"val": {"loss": 1.0 / (i + 1), "acc": {"top1": i}}, "plain": i})


def test_a_nested_metric_is_named_with_slashes_and_plugins_get_flat_results(tmp_path) -> None:
    """Ray 2.60: TuneConfig(metric="val/loss") runs; the scheduler's and searcher's hooks get
    results flattened (``val/loss``, ``val/acc/top1``, ``config/opt/name``); ``Result.metrics``
    stays nested; ``get_best_result`` finds the nested metric."""
    SEEN.clear()
    grid = Tuner(nested, tune_config=TuneConfig(metric="val/loss", mode="min", scheduler=Recording(),
                                                search_alg=OneConfig()),
                 run_config=RunConfig(storage=str(tmp_path), name="e", system="simple", verbose=0)).fit()
    (result,) = list(grid)
    assert result.error is None and result.metrics["val"] == {"loss": 1.0 / 3, "acc": {"top1": 2}}
    kinds = [k for k, _ in SEEN]
    assert kinds.count("scheduler") == 3 and kinds.count("searcher") == 3 and kinds[-1] == "complete"
    for _, r in SEEN:
        assert "val" not in r and "config" not in r, r
        assert {"val/loss", "val/acc/top1", "plain", "config/lr", "config/opt/name"} <= set(r)
    assert [r["val/loss"] for k, r in SEEN if k == "scheduler"] == [1.0, 0.5, 1.0 / 3]


SEQ = {"a": [5, 1, 1, 1, 1, 1, 9], "b": [2, 2, 2, 2, 2, 2, 2], "c": [0, 8, 8, 8, 8, 8, 3], "d": [math.nan] * 7,
       "e": [0, 0, 15, 0, 0, 0, 0, 0]}


def sequence(config: dict[str, Any]) -> None:
    for v in SEQ[config["k"]]:
        report({"s": {"v": v}})


@pytest.fixture(scope="module")
def seq_grid(tmp_path_factory: Any) -> Any:
    return Tuner(sequence, param_space={"k": grid_search(list(SEQ))},
                 run_config=RunConfig(storage=str(tmp_path_factory.mktemp("seq")), name="e", system="simple",
                                      verbose=0)).fit()


# recorded from Ray 2.60: get_best_result(metric="s/v", mode=..., scope=...).config["k"]
RAY_BEST = {("last", "max"): "a", ("last", "min"): "e", ("avg", "max"): "c", ("avg", "min"): "e",
            ("all", "max"): "e", ("all", "min"): "c", ("last-5-avg", "max"): "c", ("last-5-avg", "min"): "e",
            ("last-10-avg", "max"): "c", ("last-10-avg", "min"): "e"}


@pytest.mark.parametrize(("scope", "mode"), list(RAY_BEST))
def test_get_best_result_scopes_as_ray(seq_grid: Any, scope: str, mode: str) -> None:
    assert seq_grid.get_best_result(metric="s/v", mode=mode, scope=scope).config["k"] == RAY_BEST[scope, mode]


def test_get_best_result_edges_as_ray(seq_grid: Any, tmp_path: Any) -> None:
    # recorded from Ray 2.60: NaN is not filtered out when asked, and wins nothing against numbers
    assert seq_grid.get_best_result(metric="s/v", mode="max", filter_nan_and_inf=False).config["k"] == "a"
    with pytest.raises(RuntimeError, match="no trial reported the metric 'nope'"):
        seq_grid.get_best_result(metric="nope", mode="max")
    with pytest.raises(ConfigError, match="scope"):
        seq_grid.get_best_result(metric="s/v", mode="max", scope="median")
    # recorded from Ray 2.60: with one trial, that trial, whatever the metric
    one = Tuner(sequence, param_space={"k": "a"},
                run_config=RunConfig(storage=str(tmp_path), name="one", system="simple", verbose=0)).fit()
    assert one.get_best_result(metric="nope", mode="max").config == {"k": "a"}


def test_dataframes_are_flattened_as_ray(seq_grid: Any, tmp_path: Any) -> None:
    pytest.importorskip("pandas")
    # recorded from Ray 2.60 (trial "d", all NaN, left out: Ray 2.60 itself raises ValueError there
    # with pandas >= 3, "Encountered all NA values"; audition leaves it out with a warning, as Ray
    # meant to): (config/k, s/v, training_iteration) of each trial's best row
    for mode, want in (("max", [("a", 9, 7), ("b", 2, 1), ("c", 8, 2), ("e", 15, 3)]),
                       ("min", [("a", 1, 2), ("b", 2, 1), ("c", 0, 1), ("e", 0, 1)])):
        df = seq_grid.get_dataframe(filter_metric="s/v", filter_mode=mode)
        assert sorted(zip(df["config/k"], df["s/v"], df["training_iteration"], strict=True)) == want
    grid = Tuner(nested, param_space={"lr": grid_search([0.1, 0.2]), "opt": {"name": "sgd"}},
                 run_config=RunConfig(storage=str(tmp_path), name="e", system="simple", verbose=0)).fit()
    engine = {"timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
              "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "time_since_restore",
              "iterations_since_restore"}
    # recorded from Ray 2.60: the columns of Result.metrics_dataframe and of get_dataframe()
    user = {"val/loss", "val/acc/top1", "plain", "config/lr", "config/opt/name"}
    assert set(grid[0].metrics_dataframe.columns) == engine | user
    df = grid.get_dataframe()
    assert set(df.columns) == engine | user | {"logdir"}
    # recorded from Ray 2.60 (ResultGrid.get_dataframe() of a function and a class trainable, with and
    # without filter_metric): logdir holds the trial id, not the trial's directory
    assert sorted(df["logdir"]) == sorted(r.trial_id for r in grid) and list(df["plain"]) == [2, 2]
    assert list(grid.get_dataframe(filter_metric="plain", filter_mode="max")["logdir"]) == list(df["logdir"])
    # a filter_metric alone gives the last rows (Ray); a mode alone is refused
    assert list(grid.get_dataframe(filter_metric="val/loss")["plain"]) == [2, 2]


def one_report(config: dict[str, Any]) -> None:
    report({"v": 1})


def silent(config: dict[str, Any]) -> None:
    pass


def test_result_metrics_carry_the_experiment_tag_as_ray(tmp_path: Any) -> None:
    """Recorded from Ray 2.60: ``Result.metrics["experiment_tag"]`` of each trial (the drawn values,
    keys sorted), also read back through ``Tuner.restore(...).get_results()``; a trial that
    reported nothing has none."""
    space = {"lr": grid_search([0.1, 0.25]), "opt": {"m": grid_search(["a", "b"])}, "c": 3}
    grid = Tuner(one_report, param_space=space,
                 run_config=RunConfig(storage=str(tmp_path), name="e", system="simple", verbose=0)).fit()
    want = ["0_lr=0.1000,m=a", "1_lr=0.2500,m=a", "2_lr=0.1000,m=b", "3_lr=0.2500,m=b"]
    assert sorted(r.metrics["experiment_tag"] for r in grid) == want
    stored = Tuner.restore(str(tmp_path / "e"), one_report).get_results()
    assert sorted(r.metrics["experiment_tag"] for r in stored) == want
    assert all("experiment_tag" not in r.metrics_history[-1] for r in grid)  # (not in result.json, as Ray)
    quiet = Tuner(silent, param_space={"lr": grid_search([0.1])},
                  run_config=RunConfig(storage=str(tmp_path), name="q", system="simple", verbose=0)).fit()
    assert "experiment_tag" not in quiet[0].metrics
