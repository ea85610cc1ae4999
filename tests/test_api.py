"""Public API details: Checkpoint, stop criteria, dataframes, get_checkpoint outside a trial."""

from __future__ import annotations

import os

import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._errors import TuneError
from actors.search import grid_search
from tests import _trainables as T


def test_checkpoint_dict_and_directory_round_trip(tmp_path) -> None:
    ck = Checkpoint.from_dict({"w": [1, 2, 3]})
    assert ck.to_dict() == {"w": [1, 2, 3]}
    d = tmp_path / "state"
    d.mkdir()
    (d / "weights.bin").write_bytes(b"\x00\x01")
    ck2 = Checkpoint.from_directory(d)
    out = ck2.to_directory(str(tmp_path / "copy"))
    assert open(os.path.join(out, "weights.bin"), "rb").read() == b"\x00\x01"
    with pytest.raises(ValueError, match=r"not made by Checkpoint\.from_dict"):
        ck2.to_dict()
    with pytest.raises(ValueError, match="no such directory"):
        Checkpoint.from_directory(tmp_path / "missing")


def test_report_outside_a_trial_is_a_clear_error() -> None:
    with pytest.raises(TuneError, match="outside a trial"):
        report({"loss": 1.0})
    with pytest.raises(TuneError, match="outside a trial"):
        get_checkpoint()


@pytest.mark.parametrize("stop", [{"training_iteration": 3}, lambda trial_id, result: result["step"] >= 2],
                         ids=["dict", "callable"])
def test_stop_criteria_take_effect_exactly(stop, storage_dir, no_leaks) -> None:
    grid = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 50},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage=storage_dir, stop=stop, verbose=0)).fit()
    for r in grid:
        assert [h["training_iteration"] for h in r.metrics_history] == [1, 2, 3]
        assert r.metrics["done"] is True


def test_results_as_dataframes(storage_dir, no_leaks) -> None:
    pytest.importorskip("pandas")
    grid = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 3},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage=storage_dir, system="simple", verbose=0)).fit()
    df = grid.get_dataframe()
    assert sorted(df["config/x"]) == [1.0, 2.0] and "loss" in df.columns
    assert list(grid[0].metrics_dataframe["training_iteration"]) == [1, 2, 3]
    assert grid.get_best_result(scope="all").config["x"] == 1.0


def test_resources_that_can_never_fit_are_refused_at_start(storage_dir) -> None:
    from actors import with_resources
    from actors._errors import ConfigError

    with pytest.raises(ConfigError, match=r"asks for \['gpu'\]"):
        Tuner(with_resources(T.fn_trainable, {"cpu": 1, "gpu": 1}), run_config=RunConfig(storage=storage_dir))
    with pytest.raises(ConfigError, match=r"asks for 64\.0 CPUs"):
        Tuner(with_resources(T.fn_trainable, {"cpu": 64}), run_config=RunConfig(storage=storage_dir))
