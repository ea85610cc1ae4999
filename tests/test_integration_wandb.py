"""``actors.integration.wandb.WandbLoggerCallback`` as Ray Tune 2.60's: the same W&B runs, in offline mode.

``tests/data/ray_wandb.json`` was recorded from Ray 2.60 (wandb 0.31, ``WANDB_MODE=offline``) with the same
trainable and settings, each trial's offline run file read back with ``tests/_wandb_records.py``: the run's id,
name, group, project, tags, notes and config, the config updates (the trial's id, host, pid and date), every
history row, the summary's keys, checkpoint artifacts and the exit code. Timing values are left out. No test
imports Ray.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
from typing import Any

import pytest

pytest.importorskip("wandb")

from actors import Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner, grid_search, report
from actors.integration.wandb import WandbLoggerCallback, _clean_log, _handle_result
from tests._wandb_records import read_run

with open(os.path.join(os.path.dirname(__file__), "data", "ray_wandb.json")) as _f:
    RAY = json.load(_f)
TIMING = {"_runtime", "_timestamp", "timestamp", "time_this_iter_s", "time_total_s", "time_since_restore",
          "_wandb/runtime"}
MACHINE = {"trial_log_path", "date", "pid", "hostname", "node_ip"}  # (their keys are compared, not their values)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")  # (the logging processes inherit it)
    monkeypatch.setenv("WANDB_SILENT", "true")


def _train(config: dict[str, Any]) -> None:
    for i in range(3):
        if config["x"] == 3 and i == 2:
            raise RuntimeError("boom")
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "w.txt"), "w") as f:
            f.write(str(i))
        report({"loss": config["x"] * (i + 1), "nested": {"a": i, "s": "text"}, "flag": True, "name": "n",
                "arr": [1, 2], "none": None}, checkpoint=Checkpoint.from_directory(d) if i == 1 else None)


def _normal(run: dict[str, Any]) -> dict[str, Any]:
    """A run without what differs from run to run: its trial id and name, timings, machine values."""
    trial_id, name = run["run"]["id"], run["run"]["name"]
    text = json.dumps({
        "run": run["run"], "config": {k: (None if k in MACHINE else v) for k, v in run["config"].items()},
        "history": [{k: v for k, v in row.items() if k not in TIMING} for row in run["history"]],
        "summary": sorted(run["summary"]), "artifacts": run["artifacts"], "exit": run["exit"]})
    return json.loads(text.replace(name, "<name>").replace(trial_id, "<id>"))


@pytest.mark.parametrize("case", ["plain", "options"])
@pytest.mark.slow
def test_the_runs_are_rays(tmp_path: Any, case: str) -> None:
    kwargs: dict[str, Any] = ({"project": "proj"} if case == "plain" else dict(
        project="proj", group="grp", excludes=["nested", "flag"], log_config=True, upload_checkpoints=True,
        tags=["t1"], notes="n1"))
    Tuner(_train, param_space={"x": grid_search([1, 3]), "nest": {"y": 2}, "lst": [1, 2]},
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage=str(tmp_path), name="wb_" + case, verbose=0,
                               callbacks=[WandbLoggerCallback(**kwargs)])).fit()
    files = sorted(glob.glob(str(tmp_path / f"wb_{case}" / "*" / "wandb" / "offline-run-*" / "run-*.wandb")))
    assert len(files) == 2, files  # one offline run per trial, in its directory (Ray's logging actor's cwd)
    got = [_normal(read_run(f)) for f in files]
    want = [_normal(r) for r in RAY[case]]
    # the group defaults to the experiment's name (Ray's experiment_dir_name)
    assert [r["run"]["group"] for r in got] == (["wb_plain"] * 2 if case == "plain" else ["grp"] * 2)
    assert got == want


def test_results_are_split_as_rays() -> None:
    result = {"loss": 1, "done": False, "config": {"x": 1}, "trial_id": "a_1", "pid": 7, "nested": {"a": 2, "s": "t"},
              "arr": [1, 2], "none": None, "img_like": "text"}
    logged, config = _handle_result(_clean_log(result), {"done", "should_checkpoint", "config"},
                                    set(WandbLoggerCallback.AUTO_CONFIG_KEYS))
    assert logged == {"loss": 1, "nested/a": 2}
    assert config == {"x": 1, "trial_id": "a_1", "pid": 7}
    assert _clean_log({"o": object(), "n": "12", "f": "1.5"})["n"] == "12"  # a string JSON takes is kept


def test_a_project_is_required_as_in_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_PROJECT_NAME", raising=False)
    with pytest.raises(ValueError, match="Please pass the project name"):
        WandbLoggerCallback().setup()
    monkeypatch.setenv("WANDB_PROJECT_NAME", "from-env")
    monkeypatch.setenv("WANDB_GROUP_NAME", "g-env")
    cb = WandbLoggerCallback()
    cb.setup()
    assert (cb.project, cb.group) == ("from-env", "g-env")
    with pytest.warns(DeprecationWarning, match="save_checkpoints"):
        assert WandbLoggerCallback(project="p", save_checkpoints=True).upload_checkpoints


def _train_setup(config: dict[str, Any]) -> None:
    from actors.integration.wandb import setup_wandb

    run = setup_wandb(config, project="proj", tags=["s"])
    for i in range(2):
        run.log({"m": config["x"] + i})
        report({"loss": config["x"] + i})
    run.finish()  # (as under Ray, nothing else finishes it before the trial's process ends)


@pytest.mark.parametrize("system", ["simple", "multiproc"])
@pytest.mark.slow
def test_setup_wandb_in_a_trainable_as_ray(tmp_path: Any, system: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # (in-process trials work in the driver's directory: W&B's files go there)
    Tuner(_train_setup, param_space={"x": grid_search([1, 2]), "nest": {"y": 2}},
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage=str(tmp_path), name="wb_setup", system=system, verbose=0)).fit()
    where = tmp_path if system == "simple" else tmp_path / "wb_setup" / "*"  # (a trial process: its directory)
    files = sorted(glob.glob(str(where / "wandb" / "offline-run-*" / "run-*.wandb")),
                   key=lambda f: read_run(f)["run"]["name"])
    assert len(files) == 2, files
    assert [_normal(read_run(f)) for f in files] == [_normal(r) for r in RAY["setup"]]


def _fails_once(config: dict[str, Any]) -> None:
    marker = os.path.join(config["dir"], "failed_once")
    for i in range(3):
        if i == 1 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("boom")
        report({"loss": float(i)})


def test_a_retried_trial_goes_on_in_its_run_as_in_ray(tmp_path: Any) -> None:
    """Ray ends a trial's W&B run only at its end or final error: a retry is ``on_trial_recover``, which the
    logger callback does not handle, so the retry's results go on in the same run (its logging process), at
    W&B's steps (the retry's first iteration lands on the row of the failed run's first)."""
    Tuner(_fails_once, param_space={"dir": str(tmp_path)},
          run_config=RunConfig(storage=str(tmp_path), name="wb_retry", verbose=0,
                               failure_config=FailureConfig(max_failures=1),
                               callbacks=[WandbLoggerCallback(project="proj")])).fit()
    assert os.path.exists(tmp_path / "failed_once")
    files = sorted(glob.glob(str(tmp_path / "wb_retry" / "*" / "wandb" / "offline-run-*" / "run-*.wandb")))
    runs = [read_run(f) for f in files]
    assert [[r["training_iteration"] for r in run["history"]] for run in runs] == [[1, 2, 3]]
    assert [r["loss"] for r in runs[0]["history"]] == [0.0, 1.0, 2.0]
    assert runs[0]["exit"] == 0
