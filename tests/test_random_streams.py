"""A trial draws from the global random streams as a Ray Tune trial does: numpy's, Python's and torch's
are seeded afresh in each trial process, whatever the driver seeded, and a reused process keeps its
streams from one trial to the next (recorded from Ray 2.60 by
``benchmarks/ray_oracle/record_random_streams.py``). An audition trial process is forked: without the
reseeding, every trial drew what the driver's script would have drawn next, the same numbers as each other.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import types
from typing import Any

import pytest

from actors._worker.random_streams import reseed_inherited_streams
from tests._lean import IN_PROCESS

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "ray_random_streams.json")


@pytest.mark.slow
def test_trials_draw_from_fresh_streams_as_rays_do(tmp_path):
    pytest.importorskip("torch")
    with open(DATA) as f:
        ray = json.load(f)
    run = subprocess.run([sys.executable, os.path.join(HERE, "_random_driver.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == ray["results"]


def test_only_the_libraries_loaded_are_reseeded():
    calls = []
    fake_np = types.SimpleNamespace(random=types.SimpleNamespace(
        RandomState=lambda: types.SimpleNamespace(get_state=lambda: "fresh"), set_state=calls.append))
    assert reseed_inherited_streams({"numpy": fake_np}) == ["numpy"]
    assert calls == ["fresh"]
    assert reseed_inherited_streams({}) == []


def test_a_library_that_cannot_be_reseeded_is_logged_and_the_others_still_are(caplog):
    def refuse() -> None:
        raise RuntimeError("no entropy here")

    seeded = []
    broken_np = types.SimpleNamespace(random=types.SimpleNamespace(RandomState=refuse, set_state=seeded.append))
    torch = types.SimpleNamespace(seed=lambda: seeded.append("torch"))
    with caplog.at_level("WARNING"):
        assert reseed_inherited_streams({"numpy": broken_np, "torch": torch}) == ["torch"]
    assert seeded == ["torch"]
    assert "numpy" in caplog.text and "no entropy here" in caplog.text


def test_numpys_global_stream_is_left_as_a_new_interpreters():
    np = pytest.importorskip("numpy")
    saved = np.random.get_state()
    try:
        np.random.seed(0)
        np.random.rand(5)
        reseed_inherited_streams({"numpy": np})
        state = np.random.get_state()
        # a new RandomState's position (np.random.seed() alone would have kept the parent's: 10)
        assert state[2] == np.random.RandomState().get_state()[2]
        assert not np.array_equal(state[1], np.random.RandomState(0).get_state()[1])
    finally:
        np.random.set_state(saved)


@IN_PROCESS
def test_trials_in_the_drivers_own_process_draw_from_the_drivers_streams(tmp_path):
    np = pytest.importorskip("numpy")
    from actors import RunConfig, Tuner, report

    def train(config):
        report({"x": float(np.random.rand())})

    saved = np.random.get_state()
    try:
        np.random.seed(7)
        grid = Tuner(train, run_config=RunConfig(system="simple", storage_path=str(tmp_path), verbose=0)).fit()
        assert grid[0].metrics["x"] == np.random.RandomState(7).rand()
    finally:
        np.random.set_state(saved)


def _fit_in_process_in_a_worker(storage: str, out: Any) -> None:
    """A user's multiprocessing worker that runs an in-process experiment (not a main process)."""
    import numpy as np

    from actors import RunConfig, Tuner, report
    from actors._process.children import ends_children
    from actors._process.hygiene import in_driver_process

    def train(config):
        report({"x": float(np.random.rand()), "driver": in_driver_process(), "ends": ends_children()})

    np.random.seed(7)
    grid = Tuner(train, run_config=RunConfig(system="simple", storage_path=storage, verbose=0)).fit()
    m = grid[0].metrics
    out.put((m["x"] == np.random.RandomState(7).rand(), m["driver"], m["ends"]))


def test_an_in_process_run_in_a_users_worker_process_leaves_that_process_alone(tmp_path):
    """The worker is not a script's main process, yet its in-process actors run in it: its streams are the
    user's, and it is not an actor process (it ends no children of its own at exit)."""
    pytest.importorskip("numpy")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    worker = ctx.Process(target=_fit_in_process_in_a_worker, args=(str(tmp_path), out))
    worker.start()
    try:
        assert out.get(timeout=60) == (True, True, False)
    finally:
        worker.join(30)
    assert worker.exitcode == 0
