"""Stop always stops: time limits act on trials that never report, a trial that ignores a stop is
killed after ``RunConfig(trial_stop_grace_s)``, and an interrupted or killed driver takes every
process of its actor system along even when a trial is stuck in a C call (issue 13 item 4)."""

from __future__ import annotations

import ctypes
import datetime
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._driver.errors import ConfigError
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from actors.stoppers import TimeoutStopper
from tests._cluster import wait_for
from tests._driver_script import end_driver, processes_with

SCRIPT = os.path.join(os.path.dirname(__file__), "_blocking_driver.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def silent(config: dict) -> None:
    """Reports once, then blocks without reporting: in a sleep, or in a C call holding the GIL."""
    report({"step": 0})
    if config["gil"]:
        time.sleep(0.5)  # the result leaves this process first
        ctypes.PyDLL(None).sleep(3600)
    time.sleep(3600)


LIMITS = {
    "TimeoutStopper": ({}, {"stop": TimeoutStopper(1.0)}),
    "time_budget_s": ({"time_budget_s": datetime.timedelta(seconds=1)}, {}),
    "time_total_s": ({}, {"stop": {"time_total_s": 1.0}}),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("limit", list(LIMITS))
def test_time_limit_ends_trials_that_never_report(limit, storage_dir, no_leaks):
    tune_kw, run_kw = LIMITS[limit]
    grid = Tuner(silent, param_space={"gil": grid_search([False, True])},
                 tune_config=TuneConfig(**tune_kw),
                 run_config=RunConfig(name=limit, storage=storage_dir, verbose=0, trial_stop_grace_s=1.0,
                                      **run_kw)).fit()
    assert [r.status for r in grid] == [TrialStatus.TERMINATED] * 2
    assert all(r.num_failures == 0 and r.metrics["step"] == 0 for r in grid)


def test_grace_and_budget_are_checked():
    with pytest.raises(ConfigError, match="trial_stop_grace_s"):
        RunConfig(trial_stop_grace_s=0)
    with pytest.raises(ConfigError, match="time_budget_s"):
        TuneConfig(time_budget_s=-1)
    assert RunConfig().trial_stop_grace_s == 10.0




def start_driver(storage: str, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, SCRIPT, storage, mode], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "sigkill"])
def test_driver_signal_ends_every_process_with_a_stuck_trial(sig, tmp_path):
    storage = str(tmp_path / "res")
    proc = start_driver(storage, "block")
    try:
        wait_for(lambda: sum(1 for p in glob.glob(f"{storage}/blocked/*/result.json") if os.path.getsize(p)) == 2,
                 30, "both trials to report")  # (each result.json is created empty at its trial's start, as Ray's)
        assert len(processes_with(SCRIPT, storage)) > 3  # driver, admin, logger, controller, trials...
        sent = time.monotonic()
        proc.send_signal(sig)
        if sig != signal.SIGKILL:
            out, err = proc.communicate(timeout=60)
            # Ctrl-C: fit() returns, as Ray 2.60's (tests/test_ctrl_c.py); SIGTERM: it raises KeyboardInterrupt
            want = (0, "fit returned") if sig == signal.SIGINT else (130, "interrupted")
            assert (proc.returncode, out.strip()) == want, err[-2000:]
        wait_for(lambda: not processes_with(SCRIPT, storage), 30, "every process of the run to end")
        print(f"{signal.Signals(sig).name}: all gone {time.monotonic() - sent:.1f}s after the signal")
    finally:
        end_driver(proc, SCRIPT, storage)
