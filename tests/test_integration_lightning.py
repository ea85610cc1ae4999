"""``actors.integration.pytorch_lightning``: Ray Tune 2.60's Lightning callbacks.

``RAY`` was recorded from Ray 2.60 (torch 2.13.0 CPU, lightning 2.6.6, the ``test`` extra's pins) by
``benchmarks/ray_oracle/record_lightning.py``, which this test runs under audition: per case and trial, the
number of results, the keys reported and their values (5 significant digits: the same seeded CPU training),
the checkpoint's files, what the saved trainer holds, and how many checkpoints were kept. No test imports Ray.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from actors import RunConfig, Tuner
from actors.search import grid_search

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))

from tests._lean import IN_PROCESS, needs

pytestmark = [needs("torch", "lightning"), IN_PROCESS]  # (imported by the tests: tests/_lean.py)
# the recorder's cases (record_lightning.CASES, which imports Lightning): test_the_cases_are_the_recorders
CASE_NAMES = ("all_metrics", "listed", "missing", "renamed", "report_only", "two_hooks")


def _recorder() -> ModuleType:
    """The recorder's trainables and view (``benchmarks/ray_oracle/record_lightning.py``)."""
    import record_lightning

    return record_lightning


with open(os.path.join(os.path.dirname(__file__), "data", "ray_lightning.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


def _make(case: str) -> Any:
    from actors.integration.pytorch_lightning import TuneReportCallback, TuneReportCheckpointCallback

    args = dict(_recorder().CASES[case])
    cls = TuneReportCallback if args.pop("cls", None) == "report" else TuneReportCheckpointCallback
    return cls(**args)


def _train(config: dict[str, Any]) -> None:
    _recorder().fit_with(_make(config["case"]), config["lr"])


def _same(ours: Any, ray: Any) -> bool:
    """Equal, NaN included (the first result has no epoch-level training loss yet: NaN in the frame)."""
    return json.dumps(ours, sort_keys=True) == json.dumps(ray, sort_keys=True)


def test_the_cases_are_the_recorders() -> None:
    assert tuple(sorted(_recorder().CASES)) == CASE_NAMES


@pytest.mark.parametrize("case", CASE_NAMES)
@pytest.mark.slow
def test_the_callback_reports_and_checkpoints_as_rays(tmp_path: Path, case: str, no_leaks: Any) -> None:
    # (each trial in its own process, as Ray's: seed_everything seeds the process's global generators, which
    # two trials training at once in one process, system="simple", would share)
    grid = Tuner(_train, param_space={"lr": grid_search([0.05, 0.1]), "case": case},
                 run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system="multiproc")).fit()
    got = _recorder().rows(grid)
    assert _same(got, RAY[case]), (got, RAY[case])


def test_an_unknown_hook_is_refused_as_rays() -> None:
    from actors.integration.pytorch_lightning import TuneReportCheckpointCallback

    with pytest.raises(ValueError, match=f"^{RAY['bad_hook']}. Must be one of") as info:
        TuneReportCheckpointCallback(on="nope")
    assert "'validation_end'" in str(info.value)
