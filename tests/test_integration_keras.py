"""``actors.integration.keras``: Ray Tune 2.60's Keras callback.

``RAY`` was recorded from Ray 2.60 (tensorflow-cpu 2.21.0, the ``test`` extra's pin) by
``benchmarks/ray_oracle/record_keras.py``, which this test runs under audition: per case and trial, the
number of results, the keys reported and their values (5 significant digits: the same seeded CPU training),
the checkpoint's files and metadata, the saved model's weight shapes (read from ``model.keras`` without
TensorFlow: see ``saved_weights``), and how many checkpoints were kept. No test imports Ray.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from actors import RunConfig, Tuner
from actors.search import grid_search
from tests._lean import IN_PROCESS, needs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_keras import CASES, fit_with, rows  # (the recorder's trainables and view; TensorFlow inside them)

pytestmark = [needs("tensorflow"), IN_PROCESS]  # (imported by the tests: tests/_lean.py)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_keras.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


def _train(config: dict[str, Any]) -> None:
    from actors.integration.keras import TuneReportCheckpointCallback

    fit_with(TuneReportCheckpointCallback(**CASES[config["case"]]), config["lr"])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.slow
def test_the_callback_reports_and_checkpoints_as_rays(tmp_path: Path, case: str, no_leaks: Any) -> None:
    # (each trial in its own process, as Ray's: the seeds are the process's)
    grid = Tuner(_train, param_space={"lr": grid_search([0.05, 0.1]), "case": case},
                 run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system="multiproc")).fit()
    assert rows(grid) == RAY[case]


@pytest.mark.slow
def test_an_unknown_hook_is_refused_as_rays() -> None:
    from actors.integration.keras import TuneReportCheckpointCallback

    kind, message = RAY["bad_hook"]
    with pytest.raises(ValueError) as info:
        TuneReportCheckpointCallback(report_metrics_on="nope")
    assert kind == "ValueError"
    # (Ray lists the hooks asked for from a set: their order varies run to run)
    assert str(info.value).startswith("Invalid trigger time selected: [")
    assert str(info.value).split("]. ", 1)[1] == message.split("]. ", 1)[1]
    assert "'nope'" in str(info.value)


def test_the_removed_callback_raises_as_rays() -> None:
    from actors.integration.keras import TuneReportCallback

    with pytest.raises(DeprecationWarning) as info:
        TuneReportCallback()
    assert [type(info.value).__name__, str(info.value)] == RAY["report_callback"]
