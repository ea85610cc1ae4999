"""Processes a trainable starts: they begin with plain signal handlers (a ``with Pool(...)`` block ends), and
those left running end with the trial's process, as Ray's workers end theirs
(``RAY_kill_child_processes_on_worker_exit``, default true; false keeps them)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._process.children import CHILDREN_ENV, pid_alive
from tests._cluster import wait_for


def _leaves_a_child_running(config: dict) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    report({"child": child.pid})


def _children_of(tmp_path, name: str, parents: list[int] | None = None) -> list[int]:
    grid = Tuner(_leaves_a_child_running, tune_config=TuneConfig(num_samples=2),
                 run_config=RunConfig(storage_path=str(tmp_path), name=name, verbose=0)).fit()
    assert grid.num_errors == 0
    if parents is not None:
        parents += [r.metrics["pid"] for r in grid]
    return [r.metrics["child"] for r in grid]


def _described(pid: int) -> str:
    """A process still running: its parent, group and command line (seen once in a full suite: a child
    outlived the run; whether its trial process was gone, and who its parent is now, says which end failed)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state, ppid, pgid = f.read().rsplit(")", 1)[1].split()[:3]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return f"{pid}: gone"
    return f"{pid}: state {state}, parent {ppid}, group {pgid}, {cmd}"


def test_a_trials_leftover_processes_end_with_it(tmp_path, no_leaks):
    parents: list[int] = []
    children = _children_of(tmp_path, "children", parents)
    try:  # (their trial processes end them as they exit: after fit() returns, on a loaded box, see no_leaks's 20 s)
        wait_for(lambda: not any(pid_alive(pid) for pid in children), 30, "the trials' children to end")
    except AssertionError as exc:
        alive = [_described(pid) for pid in children if pid_alive(pid)]
        trials = [f"{pid}: {'running' if pid_alive(pid) else 'gone'}" for pid in parents]
        raise AssertionError(f"{exc}: still running {alive}; the trial processes {trials}") from None


def _leaves_a_child_and_is_killed(config: dict) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    report({"child": child.pid})
    time.sleep(0.3)  # (its result reaches the controller)
    os.kill(os.getpid(), 9)  # as the kernel kills a trial process whose parent exited first, or the OOM killer


def test_a_child_of_a_killed_trial_process_ends_when_the_system_shuts_down(tmp_path, no_leaks):
    """A trial process killed outright runs no exit code, so it ends none of its children: they stay under init
    in the actor system's process group, which the admin clears as it exits (``end_group_leftovers``). Seen in
    full suites (1 run in 3) as a child outliving ``fit()``: its trial process was killed by the kernel at shutdown
    because its parent exited first."""
    grid = Tuner(_leaves_a_child_and_is_killed,
                 run_config=RunConfig(storage_path=str(tmp_path), name="killed", verbose=0)).fit()
    assert grid.num_errors == 1
    [child] = [int(h["child"]) for h in grid[0].metrics_history]
    try:
        wait_for(lambda: not pid_alive(child), 30, "the killed trial's child to end")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {_described(child)}") from None


def test_rays_switch_keeps_them(tmp_path, monkeypatch, no_leaks):
    monkeypatch.setenv(CHILDREN_ENV, "false")
    children = _children_of(tmp_path, "kept")
    try:
        assert all(pid_alive(pid) for pid in children)
    finally:
        for pid in children:
            os.kill(pid, 9)


def test_end_children_terminates_then_kills_only_direct_children(tmp_path):
    """In a process of its own: ``end_children`` ends every child of the process it runs in."""
    script = textwrap.dedent("""
        import json, os, subprocess, sys, time
        from actors._process.children import direct_children, end_children, pid_alive
        stubborn = subprocess.Popen([sys.executable, "-c",
            "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
            "time.sleep(60)"], stdout=subprocess.PIPE)
        stubborn.stdout.readline()  # (SIGTERM is ignored from here on)
        polite = subprocess.Popen(["sleep", "60"])
        # a grandchild: not ended (as in Ray: not recursive), and its parent's end leaves it to init
        middle = subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); "
            "import time; time.sleep(60)"], stdout=subprocess.PIPE)
        grandchild = int(middle.stdout.readline())
        found = sorted(direct_children())
        started = time.monotonic()
        ended = sorted(end_children(grace_s=0.5))
        took = time.monotonic() - started
        deadline = time.monotonic() + 10  # (a SIGKILLed process takes a moment to be gone)
        while any(pid_alive(p) for p in (stubborn.pid, polite.pid, middle.pid)) and time.monotonic() < deadline:
            time.sleep(0.02)
        print(json.dumps({"found": found, "ended": ended,
                          "expected": sorted([stubborn.pid, polite.pid, middle.pid]),
                          "alive": [pid_alive(p) for p in (stubborn.pid, polite.pid, middle.pid)],
                          "grandchild_alive": pid_alive(grandchild), "took": took}))
        os.kill(grandchild, 9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["found"] == got["ended"] == got["expected"]
    assert got["alive"] == [False, False, False]
    assert got["grandchild_alive"] is True
    assert got["took"] >= 0.5  # the stubborn one needed the SIGKILL after the grace


@pytest.mark.parametrize("value", ["0", "False"])
def test_the_switch_is_read_as_rays(monkeypatch, value):
    from actors._process import children

    monkeypatch.setattr(children, "in_driver_process", lambda: False)
    monkeypatch.setenv(CHILDREN_ENV, value)
    assert not children.ends_children()
    monkeypatch.setenv(CHILDREN_ENV, "true")
    assert children.ends_children()
    monkeypatch.delenv(CHILDREN_ENV)
    assert children.ends_children()
    monkeypatch.setattr(children, "in_driver_process", lambda: True)  # the in-process system: the driver's own
    assert not children.ends_children()


def _square(x: int) -> int:
    for line in range(20):  # (slower workers: one is still waiting for the queue when the block ends)
        print(f"square of {x}: line {line}", flush=True)
    return x * x


def _pools_in_with_blocks(config: dict) -> None:
    for _ in range(4):
        with multiprocessing.get_context("fork").Pool(2) as pool:
            total = sum(pool.map(_square, range(8)))
        report({"total": total})


def _ready_then_sleep(ready: Any) -> None:
    ready.set()
    time.sleep(60)


def _terminated(config: dict) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_ready_then_sleep, args=(ready,))
    child.start()
    assert ready.wait(30)  # (a SIGTERM before the child's handlers are reset would be lost either way)
    child.terminate()  # SIGTERM
    child.join(10)
    if child.exitcode is None:
        child.kill()
        child.join(10)
    report({"exitcode": child.exitcode})


@pytest.mark.timeout(60)
def test_a_pool_the_trainable_opens_in_a_with_block_ends(tmp_path, no_leaks):
    """Its workers inherited Thespian's SIGTERM handler, survived ``Pool.terminate()``, and the block's end waited
    for them forever (Ray 2.60 runs this trainable: recorded by hand, both trials 140)."""
    grid = Tuner(_pools_in_with_blocks, tune_config=TuneConfig(num_samples=2),
                 run_config=RunConfig(storage_path=str(tmp_path), name="pools", verbose=0)).fit()
    assert grid.num_errors == 0 and [r.metrics["total"] for r in grid] == [140, 140]


def test_a_process_the_trainable_forks_ends_on_sigterm(tmp_path, no_leaks):
    grid = Tuner(_terminated, run_config=RunConfig(storage_path=str(tmp_path), name="sigterm", verbose=0)).fit()
    assert grid.num_errors == 0 and grid[0].metrics["exitcode"] == -15  # (-9: it had to be killed)


def test_a_fork_of_an_actor_process_gets_a_fresh_interpreters_handlers():
    script = textwrap.dedent("""
        import json, multiprocessing, signal
        from actors._process.hygiene import plain_signals_in_forks
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1):  # as Thespian's actors have
            signal.signal(signum, lambda *args: None)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        plain_signals_in_forks()
        plain_signals_in_forks()  # (once: a second call adds no second hook)

        def report(queue):
            names = {signal.SIG_DFL: "default", signal.SIG_IGN: "ignored", signal.default_int_handler: "int"}
            queue.put({s.name: names.get(signal.getsignal(s), "python") for s in
                       (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE, signal.SIGUSR1, signal.SIGHUP)})

        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=report, args=(queue,))
        child.start()
        print(json.dumps(queue.get(timeout=30)))
        child.join(30)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "SIGTERM": "default", "SIGINT": "int", "SIGPIPE": "ignored", "SIGUSR1": "default", "SIGHUP": "ignored"}
