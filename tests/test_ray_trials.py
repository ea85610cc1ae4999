"""Ray Tune's trial surface: the Trial objects callbacks get, trial_name_creator / trial_dirname_creator,
``Tuner.restore(...).get_results()`` without running, and ``Result.best_checkpoints``' order."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import actors as tune
from actors import Callback, Checkpoint, CheckpointConfig, RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError, TuneError
from actors._driver.result_grid import ray_checkpoint_order
from actors.search import grid_search


def train(config: dict[str, Any]) -> None:
    for i, acc in enumerate(config.get("accs", [0.5, 0.6])):
        tune.report({"acc": acc, "x": config["x"]}, checkpoint=Checkpoint.from_dict({"i": i}))
    if config.get("fail"):
        raise ValueError("planned failure")


class Recorder(Callback):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def _note(self, hook: str, trial: Any) -> None:
        self.seen.append({"hook": hook, "trial_id": trial.trial_id, "config": dict(trial.config),
                          "trainable_name": trial.trainable_name, "status": str(trial.status),
                          "repr": repr([trial.status]), "is_running": trial.status == "RUNNING",
                          "last_result": dict(trial.last_result),
                          "path": trial.path, "local_path": trial.local_path, "str": str(trial)})

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any]) -> None:
        self._note("result", trial)

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any) -> None:
        self._note("complete", trial)


def test_callbacks_get_trials_that_carry_what_rays_do(storage_dir):
    rec = Recorder()
    grid = Tuner(train, param_space={"x": grid_search([1, 2])},
                 run_config=RunConfig(name="tr", storage=storage_dir, verbose=0, callbacks=[rec],
                                      system="simple")).fit()
    by_id = {r.trial_id: r for r in grid}
    assert {s["trial_id"] for s in rec.seen} == set(by_id)
    for s in rec.seen:
        r = by_id[s["trial_id"]]
        assert s["trainable_name"] == "train" and s["config"]["x"] == r.config["x"]
        assert s["str"] == f"train_{s['trial_id']}"  # Ray's str(trial)
        assert s["path"] == r.path and s["local_path"] == r.path and os.path.isdir(s["path"])
    results = [s for s in rec.seen if s["hook"] == "result"]
    assert all(s["status"] == "RUNNING" and s["is_running"] for s in results)  # Ray's strings
    assert {s["repr"] for s in results} == {"['RUNNING']"}  # (printed in a list, as Ray's)
    for tid in by_id:  # recorded from Ray 2.60: the previous result (none yet at the first), experiment_tag last
        mine = [s["last_result"] for s in results if s["trial_id"] == tid]
        assert len(mine) > 1 and "acc" not in mine[0]
        assert all("acc" in lr and list(lr)[-1] == "experiment_tag" for lr in mine[1:])
    # recorded from Ray 2.60: on_trial_complete runs before the trial is set TERMINATED
    assert {s["status"] for s in rec.seen if s["hook"] == "complete"} == {"RUNNING"}


def _names(trial: Any) -> str:
    return f"{trial.trainable_name}-x{trial.config['x']}"


def _dirs(trial: Any) -> str:
    return f"dir_{trial.config['x']}_{trial.trial_id[-2:]}"


def test_name_and_dirname_creators_name_the_trial_and_its_directory(storage_dir):
    rec = Recorder()
    tuner = Tuner(train, param_space={"x": grid_search([1, 2]), "fail": False},
                  tune_config=TuneConfig(trial_name_creator=_names, trial_dirname_creator=_dirs),
                  run_config=RunConfig(name="named", storage=storage_dir, verbose=0, callbacks=[rec],
                                       system="simple"))
    grid = tuner.fit()
    assert {s["str"] for s in rec.seen} == {"train-x1", "train-x2"}
    dirs = sorted(d for d in os.listdir(os.path.join(storage_dir, "named")) if d.startswith("dir_"))
    assert dirs == sorted(f"dir_{r.config['x']}_{r.trial_id[-2:]}" for r in grid)
    for r in grid:
        assert os.path.basename(r.path) in dirs
        assert {"checkpoint_000000", "params.json", "result.json"} <= set(os.listdir(r.path))
        assert [h["acc"] for h in r.metrics_history] == [0.5, 0.6]
        assert r.checkpoint is not None and r.checkpoint.path.startswith(r.path)
    assert {os.path.basename(s["path"]) for s in rec.seen} == set(dirs)  # Ray's trial.path
    restored = Tuner.restore(grid.experiment_path, train).get_results()  # the names survive in the state
    assert sorted(os.path.basename(r.path) for r in restored) == dirs
    assert all([h["acc"] for h in r.metrics_history] == [0.5, 0.6] for r in restored)
    from actors._cli.inspect import open_experiment  # what `audition status` and `audition plot` read

    histories = open_experiment(grid.experiment_path).histories()
    assert sorted(len(h) for h in histories.values()) == [2, 2]


@pytest.mark.parametrize("creator, message", [
    (lambda t: "same", "already trial"),
    (lambda t: "a/b", "must not contain '/'"),
    (lambda t: "", "non-empty"),
    (lambda t: "tuner.pkl", "experiment's own files"),
    (lambda t: 1 / 0, "raised ZeroDivisionError"),
])
def test_a_bad_or_colliding_directory_name_stops_the_experiment_clearly(storage_dir, creator, message):
    tuner = Tuner(train, param_space={"x": grid_search([1, 2])},
                  tune_config=TuneConfig(trial_dirname_creator=creator),
                  run_config=RunConfig(name="bad", storage=storage_dir, verbose=0, system="simple"))
    with pytest.raises(TuneError, match="trial_dirname_creator") as info:
        tuner.fit()
    assert message in str(info.value)


def test_a_name_creator_must_return_a_string(storage_dir):
    tuner = Tuner(train, param_space={"x": 1}, tune_config=TuneConfig(trial_name_creator=lambda t: None),
                  run_config=RunConfig(name="badname", storage=storage_dir, verbose=0, system="simple"))
    with pytest.raises(TuneError, match=r"trial_name_creator=\.\.\.\) returned None"):
        tuner.fit()
    with pytest.raises(ConfigError, match="trial_dirname_creator"):
        TuneConfig(trial_dirname_creator="dir")


def test_restore_get_results_reads_the_stored_results_without_running(storage_dir, tmp_path):
    first = Tuner(train, param_space={"x": grid_search([1, 2]), "fail": grid_search([False, True])},
                  tune_config=TuneConfig(metric="acc", mode="max"),
                  run_config=RunConfig(name="rr", storage=storage_dir, verbose=0, system="simple")).fit()
    marker = tmp_path / "ran"

    def must_not_run(config: dict[str, Any]) -> None:
        marker.write_text("ran")

    must_not_run.__name__ = "train"  # Tuner.restore refuses another name, as Ray 2.60
    before = {r.trial_id: open(os.path.join(r.path, "result.json")).read() for r in first}
    grid = Tuner.restore(first.experiment_path, must_not_run, resume_errored=True).get_results()
    assert not marker.exists()
    assert {r.trial_id: open(os.path.join(r.path, "result.json")).read() for r in grid} == before
    assert sorted((r.config["x"], r.config["fail"], r.status.value) for r in grid) == sorted(
        (r.config["x"], r.config["fail"], r.status.value) for r in first)
    assert grid.num_errors == 2 and "planned failure" in str(grid.errors[0])
    assert {r.trial_id: r.metrics["acc"] for r in grid} == {r.trial_id: r.metrics["acc"] for r in first}
    assert grid.get_best_result().metrics["acc"] == 0.6
    assert all([h["acc"] for h in r.metrics_history] == [0.5, 0.6] for r in grid)


# Ray 2.60's _CheckpointManager.best_checkpoint_results for checkpoints registered in this order
# (recorded with Ray in its own virtualenv; the index of each checkpoint, best_checkpoints' order)
RAY_ORDERS = [
    ({"num_to_keep": 2, "checkpoint_score_attribute": "acc", "checkpoint_score_order": "max"},
     [0.5, 0.9, 0.1, 0.7, 0.3], [3, 1]),
    ({"checkpoint_score_attribute": "loss", "checkpoint_score_order": "min"},
     [3.0, 1.0, 2.0, 1.0, float("nan"), 5.0], [4, 5, 0, 2, 1, 3]),
    ({"num_to_keep": 3, "checkpoint_score_attribute": "acc", "checkpoint_score_order": "max"},
     [0.5, None, 0.5, 0.2, 0.9], [1, 2, 4]),
    ({"num_to_keep": 2}, [1, 2, 3, 4], [2, 3]),
]


@pytest.mark.parametrize("config, values, ray_order", RAY_ORDERS)
def test_best_checkpoints_order_is_rays(config, values, ray_order):
    attr = config.get("checkpoint_score_attribute")
    found = [(i, {"i": i, **({attr: v} if attr and v is not None else {})}) for i, v in enumerate(values)]
    assert [c for c, _ in ray_checkpoint_order(found, CheckpointConfig(**config))] == ray_order


def test_best_checkpoints_of_a_run_worst_first_best_last(storage_dir):
    cc = CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="acc", checkpoint_score_order="max")
    grid = Tuner(train, param_space={"x": 1, "accs": [0.5, 0.9, 0.1, 0.7, 0.3]},
                 run_config=RunConfig(name="best", storage=storage_dir, verbose=0, checkpoint_config=cc,
                                      system="simple")).fit()
    best = grid[0].best_checkpoints
    assert [m["acc"] for _, m in best] == [0.7, 0.9]  # Ray: ascending score, the last num_to_keep
    assert [json.loads(json.dumps(c.to_dict()))["i"] for c, _ in best] == [3, 1]
    assert grid[0].checkpoint is not None and grid[0].checkpoint.to_dict()["i"] == 4  # the latest


def train_resumes(config: dict[str, Any]) -> None:
    start = tune.get_checkpoint().to_dict()["i"] + 1 if tune.get_checkpoint() else 0
    tune.report({"acc": 0.7, "x": config["x"], "from": start}, checkpoint=Checkpoint.from_dict({"i": start}))


train_resumes.__name__ = "train"  # the experiment's trainable, changed: Tuner.restore wants its name (Ray 2.60)


def test_a_restored_trial_keeps_writing_to_its_named_directory(storage_dir):
    first = Tuner(train, param_space={"x": 1, "fail": True}, tune_config=TuneConfig(trial_dirname_creator=_dirs),
                  run_config=RunConfig(name="keep", storage=storage_dir, verbose=0, system="simple")).fit()
    assert first.num_errors == 1
    grid = Tuner.restore(first.experiment_path, train_resumes, resume_errored=True).fit()
    [r] = list(grid)
    assert os.path.basename(r.path) == os.path.basename(first[0].path)
    assert [h["acc"] for h in r.metrics_history] == [0.5, 0.6, 0.7] and r.metrics["from"] == 2
    assert r.checkpoint is not None and r.checkpoint.path.startswith(r.path)
    trial_dirs = [d for d in os.listdir(os.path.join(storage_dir, "keep"))
                  if os.path.isdir(os.path.join(storage_dir, "keep", d)) and not d.startswith(".")]
    assert trial_dirs == [os.path.basename(r.path)]  # nothing written under the trial id


# ------------------------------------------------------------------ which checkpoints retention keeps
RETENTION = {  # case: (scores of iterations 1..6, score attribute, order)
    "ties": ([3, 5, 5, 1, 5, 2], "s", "max"),
    "missing": ([3, None, 5, 1, None, 2], "s", "max"),
    "nested": ([3, 9, 5, 1, 4, 2], "m/s", "max"),
    "min_nan": ([3, float("nan"), 5, 1, 4, 2], "s", "min"),
}
# recorded from Ray 2.60 (the same trainable, num_to_keep=2): the iterations whose checkpoint
# directories remain, and Result.best_checkpoints. Among equal scores the newer is kept; a result
# without the attribute counts as the newest-best; a nested "m/s" is never found among the result's
# top-level keys, so the newest are kept; NaN is lowest; the latest checkpoint always remains.
RAY_KEPT = {"ties": ([3, 5, 6], [3, 5]), "missing": ([3, 5, 6], [3, 5]), "nested": ([5, 6], [5, 6]),
            "min_nan": ([4, 6], [6, 4])}


def scored_checkpoints(config: dict[str, Any]) -> None:
    values, attr, _ = RETENTION[config["case"]]
    for i, v in enumerate(values):
        metrics: dict[str, Any] = {} if v is None else {"m": {"s": v}} if attr == "m/s" else {"s": v}
        tune.report(dict(metrics, it=i + 1), checkpoint=Checkpoint.from_dict({"i": i + 1}))


@pytest.mark.parametrize("case", list(RETENTION))
def test_retention_keeps_the_checkpoints_ray_keeps(case: str, storage_dir: str) -> None:
    _, attr, order = RETENTION[case]
    (r,) = Tuner(scored_checkpoints, param_space={"case": case},
                 run_config=RunConfig(name=case, storage=storage_dir, verbose=0, system="simple",
                                      checkpoint_config=CheckpointConfig(num_to_keep=2, checkpoint_score_attribute=attr,
                                                                         checkpoint_score_order=order))).fit()
    left = sorted(Checkpoint(os.path.join(r.path, d)).to_dict()["i"] for d in os.listdir(r.path)
                  if d.startswith("checkpoint_"))
    assert (left, [c.to_dict()["i"] for c, _ in r.best_checkpoints]) == RAY_KEPT[case]
