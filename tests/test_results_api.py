"""ResultGrid.get_best_result scopes and NaN/inf filtering on a real (in-process) run."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._driver.errors import ConfigError
from actors.search import grid_search

SERIES = {
    "a": [5.0, 1.0, 5.0, 5.0, 5.0, 5.0],  # best single value, bad average
    "b": [3.0, 3.0, 3.0, 3.0, 3.0, 4.0],  # best last-5 average (3.2), bad last (4)
    "c": [9.0, 9.0, 9.0, 9.0, 9.0, math.inf],  # ends infinite
    "d": [4.5, 4.5, 4.5, 4.5, 4.5, 3.9],  # best finite last value
}


def series(config: dict[str, Any]) -> None:
    for v in SERIES[config["name"]]:
        report({"loss": v})


@pytest.fixture
def grid(storage_dir: str) -> Any:
    return Tuner(series, param_space={"name": grid_search(sorted(SERIES))},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="scopes", storage=storage_dir, system="simple", verbose=0)).fit()


def test_scopes_pick_different_trials(grid: Any) -> None:
    best = {scope: grid.get_best_result(scope=scope).config["name"] for scope in ("last", "all", "last-5-avg")}
    assert best == {"last": "d", "all": "a", "last-5-avg": "b"}


def test_nan_and_inf_are_filtered_unless_asked(grid: Any) -> None:
    assert grid.get_best_result(mode="max").config["name"] == "a"  # c's last value is inf: filtered
    assert grid.get_best_result(mode="max", filter_nan_and_inf=False).config["name"] == "c"
    with pytest.raises(ConfigError, match="scope="):
        grid.get_best_result(scope="best")
