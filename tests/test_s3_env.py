"""S3 credentials and endpoint from the usual environment only (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL), as with MinIO or Ceph: the driver and every trial actor
(forked, multi-process system) reach the bucket with no ``storage_options`` at all."""

from __future__ import annotations

from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from storage import StorageContext, manifest_path
from tests import _trainables as T

pytestmark = pytest.mark.s3


def test_fit_on_s3_with_credentials_and_endpoint_from_the_environment(
        s3_location: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
        no_leaks: Any) -> None:
    url, options = s3_location
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["secret"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", options["client_kwargs"]["endpoint_url"])
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    grid = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 3},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="env", storage=url, verbose=0)).fit()
    assert grid.num_errors == 0
    ctx = StorageContext(url, {})  # also from the environment
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        assert [h["training_iteration"] for h in r.metrics_history] == [1, 2, 3]
        assert r.checkpoint is not None and r.checkpoint.path.startswith("s3://")
        assert ctx.fs.exists(manifest_path(r.checkpoint.path.removeprefix("s3://")))
