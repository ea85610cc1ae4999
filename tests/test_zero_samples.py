"""``num_samples=0`` runs no trial, as in Ray Tune 2.60 (recorded by
``benchmarks/ray_oracle/record_zero_samples.py`` into ``tests/data/ray_zero_samples.json``).

Before: ``TuneConfig(num_samples=0)`` was refused (Ray returns an empty ``ResultGrid``), and with the check
relaxed the engine read 0 as "no limit", so a searcher (Optuna) drew trials forever. That runaway, in an
in-process run, also showed that SIGTERM was held for good: a signal is held while a Thespian call runs, and
that call never returned. A second signal now ends the driver (as Ray's second Ctrl-C does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report, run
from actors.search import OptunaSearch, grid_search, uniform

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ray_oracle"))
from record_zero_samples import grid_row, report_of  # (the recorder's views, run here)

with open(os.path.join(os.path.dirname(__file__), "data", "ray_zero_samples.json")) as _f:
    RAY: dict[str, Any] = json.load(_f)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _train(config: dict[str, Any]) -> None:
    report(report_of(config))


@pytest.mark.parametrize("system", ["multiproc", "simple"])
@pytest.mark.parametrize("name", ["grid", "optuna"])
def test_zero_samples_run_no_trial_as_rays(tmp_path: Path, name: str, system: str, no_leaks: Any) -> None:
    space = {"x": grid_search([1.0, 2.0])} if name == "grid" else {"x": uniform(0, 1)}
    searcher = OptunaSearch(seed=0) if name == "optuna" else None
    grid = Tuner(_train, param_space=space,
                 tune_config=TuneConfig(num_samples=0, metric="loss", mode="min", search_alg=searcher),
                 run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system=system)).fit()
    assert grid_row(grid) == RAY[name]


def test_run_with_zero_samples_has_no_trials(tmp_path: Path, no_leaks: Any) -> None:
    analysis = run(_train, config={"x": uniform(0, 1)}, num_samples=0, storage_path=str(tmp_path), verbose=0,
                   system="simple")
    assert len(analysis.trials) == RAY["run"]


@pytest.mark.parametrize("bad", [-2, 1.5, True])
def test_other_sample_counts_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"num_samples=.*use an int >= 1 \(0 runs no trial"):
        TuneConfig(num_samples=bad)


def test_a_second_sigterm_ends_a_driver_whose_experiment_never_returns(tmp_path: Path) -> None:
    marker = tmp_path / "spinning"
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "_runaway_driver.py"), str(marker),
                             str(tmp_path / "store")], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():  # the searcher spins from here on
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        sent = 0
        while proc.poll() is None and sent < 20:  # (two signals sent at once may arrive as one)
            proc.send_signal(signal.SIGTERM)
            sent += 1
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        assert proc.poll() is not None, "the driver ignored 20 SIGTERMs"
        _, err = proc.communicate(timeout=30)
        assert "Interrupted: signal 15" in err, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
