"""Shortly before a test times out, every process it forked prints its threads' stacks.

pytest-timeout prints the stacks of the test's own process only. A multi-process ``fit()`` that hangs
waits in the driver for an answer some actor process never sends, and that process is the one to read.
Each process that catches ``STACKS_SIGNAL`` (every actor and admin: ``actors._process.hygiene.
dump_stacks_on_signal``) is signalled in turn and writes to the stderr it inherited, which is the
test's captured stderr (pytest's fd capture), shown with the failure.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psutil
import pytest

from actors._process.hygiene import STACKS_SIGNAL
from tests._procs import forked_processes

_TIMER = pytest.StashKey[threading.Timer]()
SETTLE_S = 0.05  # a dump is done once fd 2 has not grown for this long
MAX_WAIT_S = 2.0  # per process: a process that never writes (a pipe that is full) does not hold up the rest


def catches(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (SigCgt in /proc): one that has none would be killed by it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return False


def _size(fd: int) -> int:
    try:
        return os.fstat(fd).st_size
    except OSError:
        return -1


def _settled(fd: int, base: int) -> None:
    """Until ``fd``'s file has grown past ``base`` and stopped growing (the signalled process finished its
    dump), at most MAX_WAIT_S."""
    deadline = time.monotonic() + MAX_WAIT_S
    last, since = _size(fd), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S / 5)
        size = _size(fd)
        if size != last:
            last, since = size, time.monotonic()
        elif size > base and time.monotonic() - since >= SETTLE_S:
            return


def dump_stacks(why: str = "") -> list[int]:
    """Signal each process this one forked that catches ``STACKS_SIGNAL``, one at a time (their dumps share
    one file), each after a header line naming it; returns the pids signalled."""
    signalled = []
    for p in forked_processes():
        if not catches(p.pid, STACKS_SIGNAL):
            continue
        try:
            parent = p.ppid()
            os.write(2, f"\n--- stacks of pid {p.pid} (parent {parent}){why} ---\n".encode())
            base = _size(2)
            os.kill(p.pid, STACKS_SIGNAL)
        except (OSError, psutil.NoSuchProcess):  # gone meanwhile
            continue
        signalled.append(p.pid)
        _settled(2, base)
    return signalled


def dump_after(timeout_s: float) -> float:
    """When to dump before a test's timeout: late enough that a slow test has surely hung, early enough to finish."""
    return max(timeout_s * 0.75, timeout_s - 10.0)


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item: Any, settings: Any) -> None:
    """Beside pytest-timeout's own timer (returning None lets it start too)."""
    timeout = getattr(settings, "timeout", None)
    if not timeout or timeout <= 0:
        return None
    timer = threading.Timer(dump_after(timeout), dump_stacks,
                            kwargs={"why": f": {item.nodeid} is about to time out"})
    timer.daemon = True
    timer.start()
    item.stash[_TIMER] = timer
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item: Any) -> None:
    timer = item.stash.get(_TIMER, None)
    if timer is not None:
        timer.cancel()
    return None


__all__ = ["catches", "dump_after", "dump_stacks"]
