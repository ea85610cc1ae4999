"""Shared by the multi-host and process tests: waiting on a condition, and a leader with worker processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pytest

from actors import Tuner
from tests._ports import leader_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``cond`` until it is truthy (returned) or ``timeout_s`` passes (AssertionError naming ``what``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


def exit_code_or_stacks(proc: subprocess.Popen[Any], timeout_s: float, log_path: Any) -> int:
    """``proc``'s exit code once it exits within ``timeout_s``; otherwise SIGABRT (``faulthandler``, which
    ``PYTHONFAULTHANDLER=1`` in its environment enabled, writes every thread's stack to its log) and fail with
    that log: a command that does not end on a signal names where it waits."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        text = open(log_path, errors="replace").read() if log_path is not None else ""
        pytest.fail(f"{str(proc.args)[:200]} did not exit within {timeout_s}s; its log, ending with its threads' "
                    f"stacks:\n{text[-12000:]}")


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Cluster:
    """Runs ``fit()`` as the leader in a thread and starts worker processes once it listens."""

    def __init__(self, tag: str) -> None:
        self.port = leader_port()
        self.tag = tag
        self.workers: dict[str, subprocess.Popen] = {}

    def start_worker(self, name: str, cpus: int = 1) -> None:
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{self.port}",
             "--cpus", str(cpus), "--id", f"{name}-{self.tag}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def processes(self, name: str) -> list[psutil.Process]:
        ident = f"{name}-{self.tag}"
        out = []
        for p in psutil.process_iter(["cmdline", "status"]):
            try:
                if ident in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return out

    def kill_worker(self, name: str) -> None:
        for p in self.processes(name):
            p.send_signal(signal.SIGKILL)

    def stop(self) -> None:
        for w in self.workers.values():
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for name, w in self.workers.items():
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                w.kill()
            wait_for(lambda n=name: not self.processes(n), 20, f"worker {name} to exit")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster(uuid.uuid4().hex[:8])
    try:
        yield c
    finally:
        for name in list(c.workers):
            for p in c.processes(name):
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
        c.stop()


def fit_in_thread(tuner: Tuner, out: dict) -> threading.Thread:
    """``fit()`` in a daemon thread; its grid (or exception) lands in ``out["grid"]`` (``out["error"]``)."""
    def run() -> None:
        try:
            out["grid"] = tuner.fit()
        except BaseException as exc:  # reported by the test
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
