"""The processes this test process forked: actor systems' admins and actors, running or leaked.

Thespian's admin daemonizes (its parent becomes init), so they are found by their command line (a fork
keeps its parent's), started after this process, and not this process itself. ``conftest.py``'s leak
checks and ``tests._stacks`` read them.
"""

from __future__ import annotations

import os

import psutil

_ME = psutil.Process(os.getpid())
_CMDLINE = _ME.cmdline()
_START = _ME.create_time()


def _forked_here(p: psutil.Process) -> bool:
    """A process with this session's command line, forked by this session (an actor system's admin
    or actor): a descendant of it, or an orphan of one (re-parented to init). Not one of another
    session running the same command at the same time: its own forks hang under its live root, a
    same-command process whose parent is not init (two suites at once must not count, or kill,
    each other's actor systems)."""
    top = p
    for ancestor in p.parents():  # nearest first
        if ancestor.pid == _ME.pid:
            return True
        if ancestor.cmdline() != _CMDLINE:
            break
        top = ancestor
    return top.ppid() == 1


def forked_processes() -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "create_time", "status"]):
        try:
            if (p.pid != _ME.pid and p.info["cmdline"] == _CMDLINE and p.info["create_time"] >= _START
                    and p.info["status"] != psutil.STATUS_ZOMBIE and _forked_here(p)):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


__all__ = ["forked_processes"]
