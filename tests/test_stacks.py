"""A stuck multi-process run shows where each of its processes waits (``kill -USR2``, and before a test times out)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from tests._cluster import ROOT, wait_for
from tests._stacks import dump_stacks


def _stuck_until(started: str, release: str) -> Callable[[dict[str, Any]], None]:
    def stuck_in_training(config: dict[str, Any]) -> None:
        open(started, "w").close()
        while not os.path.exists(release):
            time.sleep(0.02)
        report({"x": 1})
    return stuck_in_training


def test_every_process_of_a_stuck_run_shows_its_stacks(tmp_path, capfd, no_leaks):
    started, release = str(tmp_path / "started"), str(tmp_path / "release")
    signalled: list[int] = []

    def dump_then_release() -> None:
        try:
            wait_for(lambda: os.path.exists(started), 60, "the trial to start")
            signalled.extend(dump_stacks())
        finally:
            open(release, "w").close()

    helper = threading.Thread(target=dump_then_release)
    helper.start()
    try:
        grid = Tuner(_stuck_until(started, release), tune_config=TuneConfig(num_samples=1),
                     run_config=RunConfig(storage_path=str(tmp_path / "results"), name="stuck")).fit()
    finally:
        helper.join(60)
    err = capfd.readouterr().err
    assert grid.num_errors == 0 and grid[0].metrics["x"] == 1  # the signal ended nothing
    assert len(signalled) >= 3, (signalled, err[-3000:])  # the admin, the controller, the trial, ...
    for pid in signalled:
        assert f"--- stacks of pid {pid} " in err
    assert "in stuck_in_training" in err, err[-3000:]  # the trial's own thread, not its captured output
    assert "actors/_shell/controller.py" in err or "thespian" in err, err[-3000:]
    assert "Current thread" in err or "Thread 0x" in err
    # beside its stacks, each actor says what it waits for: the controller its trials' inboxes, the trial its run
    trial_id = grid[0].metrics["trial_id"]
    assert "controller: phase=RUNNING" in err, err[-3000:]
    assert f"  trial {trial_id}: RUNNING phase=STEPPING run=1 pending=CONTINUE inbox: run 1 seq 1 holds []" in err, \
        err[-3000:]
    assert f"trial actor: trial {trial_id} run 1: ended=False last_seq_sent=0 results_held=0" in err, err[-3000:]
    assert "worker_alive=True" in err and "events_queued=0" in err, err[-3000:]


@pytest.mark.slow
def test_a_test_that_times_out_shows_the_stacks_of_the_run_it_started(tmp_path):
    """pytest-timeout's own report shows the test's process; the plugin adds every actor process's."""
    (tmp_path / "test_hang.py").write_text(textwrap.dedent(f"""
        import time
        from actors import RunConfig, TuneConfig, Tuner, report

        def stuck_in_training(config):
            while True:
                time.sleep(0.05)

        def test_hangs():
            Tuner(stuck_in_training, tune_config=TuneConfig(num_samples=1),
                  run_config=RunConfig(storage_path={str(tmp_path / "results")!r}, name="hang")).fit()
    """))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests._stacks",
                          "--timeout", "12", "--rootdir", str(tmp_path), str(tmp_path / "test_hang.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text[-4000:]
    assert "Timeout" in text, text[-4000:]
    assert "test_hang.py::test_hangs is about to time out ---" in text, text[-4000:]
    assert "in stuck_in_training" in text, text[-4000:]
