"""``actors.integration.comet.CometLoggerCallback`` as Ray Tune 2.60's: the same Comet experiments, offline.

``tests/data/ray_comet.json`` was recorded from Ray 2.60 (comet_ml 3.58, ``online=False``) with the same trainable
and settings, each trial's offline experiment read back with ``tests/_comet_records.py``: its project, tags, the
"other" values, every parameter and metric message with its step, and the system information's keys. Timing and
machine values are left out. No test imports Ray.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, grid_search, report
from actors.integration.comet import CometLoggerCallback
from tests._comet_records import read_experiment
from tests._lean import needs

pytestmark = needs("comet_ml")  # (imported by the callback the tests build: tests/_lean.py)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_comet.json")) as _f:
    RAY = json.load(_f)
TIMING = {"time_since_restore", "time_this_iter_s", "time_total_s", "timestamp", "process duration"}


def _train(config: dict[str, Any]) -> None:
    for i in range(2):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "w.txt"), "w") as f:
            f.write(str(i))
        report({"loss": config["x"] * (i + 1), "nested": {"a": i}, "flag": True, "name": "n"},
               checkpoint=Checkpoint.from_directory(d) if i == 1 else None)


def _normal(exp: dict[str, Any]) -> dict[str, Any]:
    """An experiment without what differs from run to run: its trial's id and name, timings, machine values."""
    name = dict(exp["other"])["Name"]
    trial_id = dict(exp["other"])["trial_id"]
    text = json.dumps({**exp, "parameters": [p for p in exp["parameters"] if p[2] != "cli"],  # (the command line)
                       # (Comet notes the ML libraries the process imported before it: sklearn, in a full run)
                       "other": [o for o in exp["other"] if not o[0].startswith("sys.")],
                       "metrics": [m for m in exp["metrics"]
                                          if m[0] not in TIMING and not m[0].startswith("sys.")],
                       "system": [k for k, _ in exp["system"]]})
    return json.loads(text.replace(name, "<name>").replace(trial_id, "<id>"))


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_the_experiments_are_rays(tmp_path: Any, system: str) -> None:
    offline = str(tmp_path / "comet")
    Tuner(_train, param_space={"x": grid_search([1, 3]), "nest": {"y": 2}},
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage=str(tmp_path), name="cm", verbose=0, system=system, callbacks=[
              CometLoggerCallback(online=False, tags=["t"], offline_directory=offline, project_name="p")])).fit()
    got = sorted((read_experiment(z) for z in glob.glob(offline + "/*.zip")),
                 key=lambda e: dict(e["other"])["Name"])
    assert len(got) == 2
    assert [_normal(e) for e in got] == [_normal(e) for e in RAY["plain"]]


def test_offline_checkpoints_fail_in_the_hook_and_the_run_goes_on(tmp_path: Any,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # recorded: Comet's OfflineExperiment refuses artifacts (NotImplementedError), which stops Ray's whole run;
    # audition logs a hook's error and goes on (as for every callback)
    grid = Tuner(_train, param_space={"x": grid_search([1])},
                 run_config=RunConfig(storage=str(tmp_path), name="cm2", verbose=0, system="simple", callbacks=[
                     CometLoggerCallback(online=False, offline_directory=str(tmp_path / "c"), project_name="p",
                                         save_checkpoints=True)])).fit()
    assert not grid.errors and grid[0].metrics["training_iteration"] == 2
    assert "only supported for Online Experiment" in caplog.text
