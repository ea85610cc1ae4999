"""Processes a test starts through a command (a script, `python -m actors._cli ...`), found again by a marker in
their environment: a Thespian admin daemonizes (its parent becomes init, its command line is its starter's), so
the session's own leak check, which looks for its own command line, cannot see one that a command left behind."""

from __future__ import annotations

import os
import time
import uuid

import psutil

MARKER = "AUDITION_TEST_MARK"


def marked_env(**extra: str) -> tuple[str, dict[str, str]]:
    """A fresh token and an environment carrying it (plus ``extra``) for a command a test runs."""
    token = uuid.uuid4().hex
    return token, dict(os.environ, **extra, **{MARKER: token})


def marked(token: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get(MARKER) == token:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return out


def left_behind(token: str, within_s: float = 20.0) -> list[int]:
    """The pids of processes carrying ``token`` still running after ``within_s`` (a loaded 2-core box shuts
    actor systems down slowly); they are killed, so one failing test leaves nothing to the next."""
    deadline = time.monotonic() + within_s
    left = marked(token)
    while left and time.monotonic() < deadline:
        psutil.wait_procs(left, timeout=0.5)
        left = marked(token)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return [p.pid for p in left]


__all__ = ["MARKER", "left_behind", "marked", "marked_env"]
