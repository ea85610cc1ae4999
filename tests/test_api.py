"""Public API details: Checkpoint, stop criteria, dataframes, get_checkpoint outside a trial."""

from __future__ import annotations

import os

import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._driver.errors import TuneError
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
    from actors._driver.errors import ConfigError

    with pytest.raises(ConfigError, match=r"asks for \['gpu'\]"):
        Tuner(with_resources(T.fn_trainable, {"cpu": 1, "gpu": 1}), run_config=RunConfig(storage=storage_dir))
    with pytest.raises(ConfigError, match=r"asks for 64\.0 CPUs"):
        Tuner(with_resources(T.fn_trainable, {"cpu": 64}), run_config=RunConfig(storage=storage_dir))


def _manifest_iterations(trial_dir: str) -> list[tuple[int, int]]:
    import json

    out = []
    for name in sorted(os.listdir(trial_dir)):
        manifest = os.path.join(trial_dir, f".{name}.audition_manifest.json")
        if name.startswith("checkpoint_") and os.path.exists(manifest):
            with open(manifest) as f:
                out.append((int(name.split("_")[1]), json.load(f)["metadata"]["iteration"]))
    return out


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_checkpoint_at_end_of_a_pause_is_never_overwritten(system, storage_dir, no_leaks) -> None:
    """The resumed run numbers its checkpoints after the ones before the pause, never writing over the
    checkpoint it resumed from; and, as recorded from Ray 2.60 (the same class, checkpoint_frequency=1,
    checkpoint_at_end=True, paused at iteration 2), an iteration checkpointed already is not saved again
    by the pause nor at the end: one checkpoint per iteration, 1 to 6."""
    from actors import CheckpointConfig

    grid = Tuner(T.ClassTrainable, param_space={"x": 1.0},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PauseFromHook(at=2)),
                 run_config=RunConfig(name="atend", storage=storage_dir, verbose=0, system=system,
                                      checkpoint_config=CheckpointConfig(checkpoint_frequency=1,
                                                                         checkpoint_at_end=True))).fit()
    r = grid[0]
    assert [h["training_iteration"] for h in r.metrics_history] == list(range(1, T.STEPS + 1))
    assert r.metrics_history[2]["restored_from"] == 1  # resumed from the iteration-2 save
    committed = _manifest_iterations(r.path)
    # (audition saved iteration 2 three times: by checkpoint_frequency, by the pause, and by the end
    # checkpoint at the pause's stop; and iteration 6 twice)
    assert [it for _, it in committed] == [1, 2, 3, 4, 5, 6], committed


def test_num_to_keep_keeps_the_best_by_score(storage_dir, no_leaks) -> None:
    from actors import CheckpointConfig

    grid = Tuner(T.fn_trainable, param_space={"x": 1.0, "steps": 6},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="keep", storage=storage_dir, verbose=0, system="simple",
                                      checkpoint_config=CheckpointConfig(
                                          num_to_keep=2, checkpoint_score_attribute="step",
                                          checkpoint_score_order="min"))).fit()
    r = grid[0]
    kept = _manifest_iterations(r.path)
    # the two lowest "step" values, plus the latest (which a resume would need)
    assert [it for _, it in kept] == [1, 2, 6], kept


def test_a_class_trainables_checkpoint_at_end_carries_its_last_metrics(storage_dir, no_leaks) -> None:
    """The save at the end of a run happens outside a report; with score-based retention it must
    still be ranked by the last result, not last for want of metrics."""
    from actors import CheckpointConfig
    from storage import StorageContext, list_checkpoints

    grid = Tuner(T.ClassTrainable, param_space={"x": 1.0, "steps": 4},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="endmetrics", storage=storage_dir, verbose=0, system="simple",
                                      checkpoint_config=CheckpointConfig(
                                          checkpoint_frequency=1, checkpoint_at_end=True, num_to_keep=1,
                                          checkpoint_score_attribute="loss", checkpoint_score_order="min"))).fit()
    r = grid[0]
    ctx = StorageContext(storage_dir)
    infos = list_checkpoints(ctx, r.path)
    last = infos[-1].metadata
    assert last["iteration"] == 4 and last["metrics"]["loss"] == pytest.approx(0.25), last
    # the lowest loss is the last one, saved twice (iteration 4, then at the end): of equal scores Ray
    # keeps the newer, so only the end save stays (num_to_keep=1)
    assert [(i.metadata["iteration"], i.metadata["metrics"]["loss"]) for i in infos] == [(4, 0.25)]


def test_num_to_keep_holds_when_results_arrive_in_batches(storage_dir, no_leaks) -> None:
    """FIFO lets a fast trial run ahead, so several checkpoints travel in one result batch:
    retention must still hear of every one of them, or the earlier ones are never deleted."""
    from actors import CheckpointConfig

    grid = Tuner(T.fn_trainable, param_space={"x": 1.0, "steps": 60},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="batched", storage=storage_dir, verbose=0,
                                      checkpoint_config=CheckpointConfig(num_to_keep=2))).fit()
    r = grid[0]
    kept = _manifest_iterations(r.path)
    assert [it for _, it in kept] == [59, 60], kept


@pytest.mark.parametrize("kwargs", [{"num_to_keep": True}, {"num_to_keep": 0}, {"checkpoint_frequency": -1},
                                    {"checkpoint_score_attribute": 3}, {"checkpoint_at_end": "yes"},
                                    {"checkpoint_score_order": "up"}])
def test_bad_checkpoint_config_is_a_clear_error(kwargs) -> None:
    from actors import CheckpointConfig
    from actors._driver.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"CheckpointConfig\({next(iter(kwargs))}="):
        CheckpointConfig(**kwargs)
