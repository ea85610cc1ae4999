"""The order trials run in when one fails and is retried, as Ray Tune 2.60 runs them (recorded by
``benchmarks/ray_oracle/record_retry_order.py`` into ``tests/data/ray_retry_order.json``): Ray's
``_requeue_trial`` moves the failed trial to the end of the trial list, so with one CPU the trials waiting run
before its retry, and results list it last.

Before: the table moved the trial, but the scheduler's mirror of it moved only with an ``on_trial_add`` call,
which is skipped for a plugin that does not override it (FIFO): FIFO's ``choose_trial_to_run`` still saw the
retried trial first and ran it again at once, ahead of the trials waiting (same results order, another
execution order: with ASHA or HyperBand, other decisions).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from actors import FailureConfig, RunConfig, TuneConfig, Tuner, report
from actors.schedulers import FIFOScheduler
from actors.search import grid_search

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_retry_order import SCENARIOS, observed, space, trainable  # (the recorder's trainable, run here)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_retry_order.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)


@pytest.mark.parametrize("system", ["multiproc", "simple"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_retried_trial_runs_after_the_trials_waiting_as_in_ray(tmp_path: Path, name: str, system: str,
                                                                 no_leaks: Any) -> None:
    log = tmp_path / "log"
    log.mkdir()
    actors.init(num_cpus=1)
    try:
        tuner = Tuner(trainable(report), param_space=space(name, str(log), grid_search),
                      tune_config=TuneConfig(scheduler=FIFOScheduler()),
                      run_config=RunConfig(name=name, storage_path=str(tmp_path / "runs"), verbose=0, system=system,
                                           failure_config=FailureConfig(max_failures=SCENARIOS[name][3])))
        got = observed(tuner.fit(), str(log))
    finally:
        actors.shutdown()
    assert got == RAY[name]
