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


# ---------------------------------------------------------------- Result.get_best_checkpoint
def four_checkpoints(config: dict[str, Any]) -> None:
    import tempfile

    from actors import Checkpoint

    rows: list[dict[str, Any]] = [{"loss": 5, "acc": 1}, {"loss": 3, "nested": {"x": 1}}, {"loss": 4, "acc": 3},
                                  {"loss": float("nan"), "acc": 4}]
    for row in rows:
        with tempfile.TemporaryDirectory() as d:
            report(row, checkpoint=Checkpoint.from_directory(d))


@pytest.mark.parametrize(("metric", "mode", "best"), [
    # Recorded from Ray 2.60 (the same trainable, CheckpointConfig(num_to_keep=None)): checkpoints without
    # the metric are passed over, a nested value is read through "a/b", and the NaN of the last one loses
    # to the first both ways (Python's min/max keep the first when a comparison with NaN is False)
    ("loss", "min", "checkpoint_000001"), ("loss", "max", "checkpoint_000000"), ("acc", "max", "checkpoint_000003"),
    ("acc", "min", "checkpoint_000000"), ("nested/x", "max", "checkpoint_000001"),
    ("training_iteration", "max", "checkpoint_000003"),
])
def test_get_best_checkpoint_picks_as_ray(metric: str, mode: str, best: str, storage_dir: str) -> None:
    from actors import CheckpointConfig

    result = Tuner(four_checkpoints, run_config=RunConfig(
        storage=storage_dir, system="simple", verbose=0, checkpoint_config=CheckpointConfig(num_to_keep=None))).fit()[0]
    chosen = result.get_best_checkpoint(metric, mode)
    assert chosen is not None and chosen.path.rstrip("/").rsplit("/", 1)[-1] == best
    # Ray: RuntimeError when no checkpoint has the metric, ValueError for another mode
    with pytest.raises(RuntimeError, match="'missing'"):
        result.get_best_checkpoint("missing", "max")
    with pytest.raises(ValueError, match="'lowest'"):
        result.get_best_checkpoint("loss", "lowest")


def test_get_best_checkpoint_of_a_trial_without_checkpoints(storage_dir: str) -> None:
    result = Tuner(series, param_space={"name": "a"},
                   run_config=RunConfig(storage=storage_dir, system="simple", verbose=0)).fit()[0]
    with pytest.raises(RuntimeError, match="kept no checkpoint"):
        result.get_best_checkpoint("loss", "min")


# ---------------------------------------------------------------- RunConfig(sync_config=, log_to_file=)
def test_sync_config_and_log_to_file_are_taken_as_ray_takes_them(storage_dir: str, caplog: Any) -> None:
    from actors import SyncConfig

    grid = Tuner(series, param_space={"name": "a"},
                 run_config=RunConfig(storage=storage_dir, system="simple", verbose=0, log_to_file=("o.txt", "e.txt"),
                                      sync_config=SyncConfig(sync_period=10, sync_artifacts=True))).fit()
    assert grid.num_errors == 0 and "the names given are not used" in caplog.text
    with pytest.raises(ConfigError, match="does not upload the files"):
        Tuner(series, run_config=RunConfig(storage="memory://x/y", system="simple",
                                           sync_config=SyncConfig(sync_artifacts=True)))
    for bad in ({"log_to_file": 3}, {"log_to_file": ("a", "b", "c")}, {"sync_config": {"sync_period": 1}}):
        with pytest.raises(ConfigError):
            RunConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sync_period"):
        SyncConfig(sync_period=-1)


# ---------------------------------------------------------------- Result.from_path
def test_result_from_path_reads_a_trial_as_ray(storage_dir: str) -> None:
    """Recorded from Ray 2.60 (Result.from_path(result.path) of a finished trial that reported 4 checkpoints):
    the same last metrics, checkpoint, best checkpoints and path, no error; a directory that holds no trial
    is a RuntimeError. audition reads the trial from its experiment (the parent directory)."""
    from actors import CheckpointConfig, Result

    grid = Tuner(four_checkpoints, run_config=RunConfig(
        name="fp", storage=storage_dir, system="simple", verbose=0,
        checkpoint_config=CheckpointConfig(num_to_keep=None))).fit()
    original = grid[0]
    again = Result.from_path(original.path)
    assert again.path == original.path and again.error is None and again.config == original.config
    assert again.metrics["training_iteration"] == 4 == original.metrics["training_iteration"]
    assert again.checkpoint is not None and again.checkpoint.path == original.checkpoint.path  # type: ignore[union-attr]
    assert [m["training_iteration"] for _, m in again.best_checkpoints] == [1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="has the directory 'nonexistent'"):
        Result.from_path(f"{storage_dir}/fp/nonexistent")
    with pytest.raises(RuntimeError, match="no trial of an audition experiment"):
        Result.from_path(f"{storage_dir}/nothing/here")
