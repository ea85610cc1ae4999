"""More end-to-end engine checks: the seed scenario seen through callbacks, the concurrency
limit, and the installed console script."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import time
from typing import Any

import pytest

from actors import Callback, RunConfig, TuneConfig, Tuner, report
from actors.search import grid_search
from tests import _trainables as T


class Starts(Callback):
    def __init__(self) -> None:
        self.starts: dict[str, list[Any]] = {}
        self.errors = 0
        self.final: dict[str, Any] = {}

    def on_trial_start(self, iteration, trials, trial) -> None:
        self.starts.setdefault(trial.trial_id, []).append(trial)

    def on_trial_error(self, iteration, trials, trial) -> None:
        self.errors += 1

    def on_trial_complete(self, iteration, trials, trial) -> None:
        self.final[trial.trial_id] = trial


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_seed_scenario_pauses_once_and_resumes_from_its_checkpoint(system, storage_dir, no_leaks) -> None:
    """pause_trial(should_checkpoint=True) + NOOP: exactly one pause (two starts, no failure),
    and the second start is from the checkpoint of iteration 2."""
    cb = Starts()
    Tuner(T.ClassTrainable, param_space={"x": grid_search([1.0, 2.0])},
          tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PauseFromHook(at=2)),
          run_config=RunConfig(name="seed", storage=storage_dir, verbose=0, system=system,
                               callbacks=[cb])).fit()
    assert cb.errors == 0 and len(cb.starts) == 2
    for trial_id, starts in cb.starts.items():
        assert len(starts) == 2, starts
        assert starts[0].checkpoint_iteration is None and starts[1].checkpoint_iteration == 2
        assert cb.final[trial_id].num_failures == 0
        assert cb.final[trial_id].last_result["training_iteration"] == T.STEPS


def timed(config: dict[str, Any]) -> None:
    start = time.time()
    for step in range(3):
        time.sleep(0.05)  # the work of a step
        report({"loss": float(step), "start": start, "end": time.time()})


def test_max_concurrent_trials_is_a_limit(storage_dir, no_leaks) -> None:
    grid = Tuner(timed, param_space={"i": grid_search(list(range(4)))},
                 tune_config=TuneConfig(metric="loss", mode="min", max_concurrent_trials=1),
                 run_config=RunConfig(name="one", storage=storage_dir, verbose=0)).fit()
    spans = sorted((r.metrics["start"], r.metrics["end"]) for r in grid)
    assert len(spans) == 4
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, spans  # the next trial started only after the previous one ended


def test_console_script_is_installed() -> None:
    exe = shutil.which("audition")
    if exe is None:
        pytest.skip("the audition console script is not on PATH (pip install -e . installs it)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert out.returncode == 0 and "0.1.0" in out.stdout + out.stderr
