"""``actors.integration.mlflow`` as Ray Tune 2.60's ``ray.air.integrations.mlflow``: the same MLflow runs.

``tests/data/ray_mlflow.json`` was recorded from Ray 2.60 (mlflow-skinny 3.18, a ``file:`` tracking URI) with the
same trainables and settings: each run's name, status, tags, parameters, metric keys and the histories of the
metrics that do not depend on timing. No test imports Ray.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, grid_search, report
from actors.integration.mlflow import MLflowLoggerCallback, setup_mlflow
from tests._lean import needs

pytestmark = needs("mlflow")  # (imported by the callback the tests build: tests/_lean.py)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_mlflow.json")) as _f:
    RAY = json.load(_f)
VOLATILE = {"pid", "timestamp", "time_this_iter_s", "time_total_s", "time_since_restore"}


@pytest.fixture(autouse=True)
def _file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # mlflow 3.18 refuses its file store unless asked (as under Ray); the trial processes inherit it
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    import mlflow

    monkeypatch.setattr(mlflow.tracking._tracking_service.utils, "_tracking_uri", None, raising=False)


def _train(config: dict[str, Any]) -> None:
    for i in range(3):
        if config["x"] == 3 and i == 2:
            raise RuntimeError("boom")
        report({"loss": config["x"] * (i + 1), "nested": {"a": i, "s": "text"}, "flag": True, "name": "n"})


def _train_setup(config: dict[str, Any]) -> None:
    m = setup_mlflow(config, tracking_uri=config["uri"], experiment_name="inner", create_experiment_if_not_exists=True,
                     tags={"k": "v"})
    for i in range(2):
        m.log_metrics({"inner_loss": config["x"] + i}, step=i)
        report({"loss": config["x"] + i})


def _runs(uri: str, experiment: str) -> list[dict[str, Any]]:
    """Each run of ``experiment``, oldest first, as the recording holds them."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no MLflow experiment {experiment!r}"
    rows = []
    for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]):
        metrics = {}
        for key in run.data.metrics:
            history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp))
            metrics[key] = [[m.step, m.value] for m in history]
        # a trial id whose hex digits are all decimal ("57643_00000") is a float to float(), so it is logged, as
        # under Ray (the same rule); the recording's ids were not: left out on both sides
        metrics.pop("trial_id", None)
        rows.append({"run_name": run.info.run_name, "status": run.info.status,
                     "tags": {k: v for k, v in run.data.tags.items() if k != "mlflow.source.name"},
                     "params": run.data.params, "metric_keys": sorted(metrics),
                     "metrics": {k: v for k, v in metrics.items() if k not in VOLATILE},
                     "artifacts": sorted(a.path for a in client.list_artifacts(run.info.run_id))})
    return rows


def _named_as(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """Ray's rows with its trial names replaced by audition's (the ids are drawn per run)."""
    out = []
    for row, name in zip(rows, names, strict=True):
        ray_name = row["run_name"]
        out.append(json.loads(json.dumps(row).replace(ray_name, name)))
    return out


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_the_callback_logs_the_runs_ray_logs(tmp_path: Any, system: str) -> None:
    uri = "file:" + str(tmp_path / "mlruns")
    grid = Tuner(_train, param_space={"x": grid_search([1, 3]), "nest": {"y": 2, "s": "str"}},
                 tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(storage=str(tmp_path), name="e1", verbose=0, system=system, callbacks=[
                     MLflowLoggerCallback(tracking_uri=uri, experiment_name="exp1", tags={"team": "a"})])).fit()
    names = [os.path.basename(r.path).split("_x=")[0].rsplit("_", 1)[0] for r in grid]  # train_<id>
    assert _runs(uri, "exp1") == _named_as(RAY["exp1"], names)
    # every result's numeric values (flattened; a bool as 1.0, strings left out), a failed trial's run FAILED:
    assert RAY["exp1"][1]["status"] == "FAILED" and "name" not in RAY["exp1"][0]["metric_keys"]


def test_params_at_the_end_and_the_trial_directory_as_artifacts(tmp_path: Any) -> None:
    uri = "file:" + str(tmp_path / "mlruns")
    grid = Tuner(_train, param_space={"x": grid_search([1])},
                 run_config=RunConfig(storage=str(tmp_path), name="e2", verbose=0, system="simple", callbacks=[
                     MLflowLoggerCallback(tracking_uri=uri, experiment_name="exp2", save_artifact=True,
                                          log_params_on_trial_end=True)])).fit()
    [run] = _runs(uri, "exp2")
    name = os.path.basename(grid[0].path).split("_x=")[0].rsplit("_", 1)[0]
    want = _named_as(RAY["exp2"], [name])[0]
    # the artifacts are the trial directory's files: audition's (stdout.txt, ...) where Ray's are its own
    assert run["artifacts"] == sorted(os.listdir(grid[0].path))
    assert {"params.json", "progress.csv", "result.json"} <= set(want["artifacts"]) & set(run["artifacts"])
    run.pop("artifacts"), want.pop("artifacts")
    assert run == want


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_setup_mlflow_in_a_trainable_as_ray(tmp_path: Any, system: str) -> None:
    uri = "file:" + str(tmp_path / "mlruns")
    Tuner(_train_setup, param_space={"x": grid_search([5, 6]), "uri": uri},
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage=str(tmp_path), name="e3", verbose=0, system=system)).fit()
    got = _runs(uri, "inner")
    want = json.loads(json.dumps(RAY["inner"]).replace(RAY["inner"][0]["params"]["uri"], uri))
    for run in (*got, *want):
        run["tags"].pop("mlflow.user", None)  # (the account the tests run under)
    assert got == want  # run named after the experiment, the config as params, left RUNNING (as Ray leaves it)


def test_only_what_float_takes_is_a_metric_as_in_ray() -> None:
    from actors.integration.mlflow import _MLflowLoggerUtil

    # Ray's _parse_dict: float(value) or left out; Python's float() reads "57643_00000" (digits and underscores)
    assert _MLflowLoggerUtil._as_floats({"a": 1, "b": True, "c": "2.5", "d": "x", "e": None, "id": "57643_00000",
                                         "hex": "5be89_00000", "l": [1]}) == {
        "a": 1.0, "b": 1.0, "c": 2.5, "id": 5764300000.0}


def test_setup_mlflow_outside_a_trial_and_its_errors(tmp_path: Any) -> None:
    uri = "file:" + str(tmp_path / "mlruns")
    with pytest.raises(ValueError, match="does not exist and no experiment_name provided"):
        setup_mlflow({"a": 1}, tracking_uri=uri, create_experiment_if_not_exists=True)
    with pytest.raises(ValueError, match="or experiment_name: nope does not exist"):
        setup_mlflow({"a": 1}, tracking_uri=uri, experiment_name="nope")
    import mlflow

    m = setup_mlflow({"a": 1}, tracking_uri=uri, experiment_name="outside", create_experiment_if_not_exists=True)
    try:
        assert m is mlflow and mlflow.active_run().info.run_name == "outside"
        assert mlflow.get_run(mlflow.active_run().info.run_id).data.params == {"a": "1"}
    finally:
        mlflow.end_run()
