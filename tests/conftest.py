"""Shared fixtures: process-leak checks and helpers for end-to-end runs.

Leaks are the processes ``tests._procs.forked_processes`` finds. Under pytest-xdist (the README's ``-n 4``)
each worker is started with a command line of its own (``pytest_xdist_setupnodes``), so one worker's checks
never count the other's actor systems.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import Any

import psutil
import pytest

from actors._driver.config import DEFAULT_STORAGE
from tests._procs import forked_processes

pytest_plugins = ["tests._fixtures_s3", "tests._cluster", "tests._stacks"]

# Importing comet_ml (tests/test_integration_comet.py, at collection) patches MLflow, XGBoost, LightGBM and
# others for Comet's auto-logging: every later MLflow run in the same worker then also wrote an offline Comet
# experiment into the working directory, the checkout. The Comet tests' experiments are their callback's own.
os.environ.setdefault("COMET_DISABLE_AUTO_LOGGING", "1")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: Any, specs: list[Any]) -> None:
    """Start each xdist worker as ``python -X audition_test_worker=N``: forks inherit their parent's command line,
    so the leak checks below tell the processes one worker forked from another's. (xdist's own worker id is set
    in the worker after it starts, in no place a forked process shows.)"""
    for n, spec in enumerate(specs):
        if getattr(spec, "popen", False) and not spec.python:
            spec.python = f"{shlex.quote(sys.executable)} -X audition_test_worker={n}"


@pytest.fixture
def no_leaks():
    """Fail the test if a process forked during it (an actor system) outlives it."""
    before = {p.pid for p in forked_processes()}
    yield
    deadline = time.monotonic() + 20.0  # a loaded 2-core box shuts systems down slowly
    left: list[psutil.Process] = []
    while time.monotonic() < deadline:
        left = [p for p in forked_processes() if p.pid not in before]
        if not left:
            return
        psutil.wait_procs(left, timeout=0.2)
    details = []
    for p in left:
        try:
            details.append((p.pid, p.ppid(), p.status(), [c.pid for c in p.children()]))
        except psutil.NoSuchProcess:
            continue
    if details:
        raise AssertionError(f"processes left running after the test (pid, ppid, status, children): {details}")


@pytest.fixture
def storage_dir(tmp_path):
    return str(tmp_path / "results")


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _checkout_files() -> set[str] | None:
    """The checkout's files git does not ignore and does not track (None: not a git checkout, or no git)."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", _ROOT, "status", "--porcelain", "--untracked-files=all"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {line[3:] for line in out.stdout.splitlines() if line.startswith("??")}


_HOME_RESULTS = DEFAULT_STORAGE  # the user's default storage


def _home_results() -> set[str]:
    """What the user's default storage holds: a test that writes there writes into the user's home."""
    try:
        return set(os.listdir(os.path.expanduser(_HOME_RESULTS)))
    except OSError:
        return set()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Which test modules were collected (before -k/-m deselect any) and which heavy libraries collecting them
    imported: read by tests/test_lean_collection.py."""
    from tests._lean import HEAVY

    config._audition_collection = ({str(item.path) for item in items},
                                   sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY)))


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    """Freeze what is alive before pytest's last garbage collections (one in its ``pytest_unconfigure``,
    one in its clean-up), so they look only at garbage made after this. A full collection over a worker's
    heap at the suite's end (TensorFlow, torch and the rest loaded: ~760,000 objects, 0.57 s idle) on a loaded
    machine can outlast the 5 s execnet gives a worker once the controller is done with it; execnet then
    sends the worker SIGINT (seen in suite runs: ``KeyboardInterrupt`` in hypothesis's gc callback)."""
    import gc

    gc.freeze()


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # (xdist's controller, or a run without xdist)
        session.config._audition_untracked = _checkout_files()
        session.config._audition_home = _home_results()


def pytest_sessionfinish(session, exitstatus):
    """After the whole suite, no process forked by it may still run, and no test wrote into the checkout or
    into the user's default storage."""
    before = getattr(session.config, "_audition_untracked", None)
    after = _checkout_files() if before is not None else None
    if before is not None and after is not None and after - before:
        print(f"\nWRITTEN INTO THE CHECKOUT by the test session (tests write under tmp_path): "
              f"{sorted(after - before)[:20]}")
        session.exitstatus = 1
    home_before = getattr(session.config, "_audition_home", None)
    if home_before is not None and _home_results() - home_before:
        print(f"\nWRITTEN INTO {_HOME_RESULTS} by the test session (a test that builds a Trainable by hand and "
              f"reads its logdir sets HOME to its tmp_path): {sorted(_home_results() - home_before)[:20]}")
        session.exitstatus = 1
    deadline = time.monotonic() + 15.0
    left = forked_processes()
    while left and time.monotonic() < deadline:
        psutil.wait_procs(left, timeout=0.5)
        left = forked_processes()
    if left:
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        print(f"\nLEAK: {len(left)} process(es) forked by the test session were still running: "
              f"{[p.pid for p in left]}")
        session.exitstatus = 1
