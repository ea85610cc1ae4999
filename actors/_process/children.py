"""A process's children: ending those a trainable left running (Ray's rule), and hearing how each child
actor died (Thespian drops some deaths unreported, and never says how)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
import time
from typing import Any

from thespian.actors import ChildActorExited

from actors._engine.watch import describe_exit
from actors._process.hygiene import in_driver_process
from actors._tempdirs import pid_runs

# Ray's switch for the same rule, read as Ray reads it (default true)
CHILDREN_ENV = "RAY_kill_child_processes_on_worker_exit"
CHILDREN_GRACE_S = 1.0  # SIGTERM, then SIGKILL for a child still running after this long


def end_children_at_exit() -> None:
    """When this actor process exits, end the processes it started (its direct children): what a
    trainable or its libraries started and left running (joblib's loky workers, a ``subprocess`` the
    code never waited for) would otherwise outlive the run under init, as they would not in Ray, whose
    workers do the same at exit (``RAY_kill_child_processes_on_worker_exit``, default true; false here
    keeps them too). Not recursive, as Ray's; a process killed with SIGKILL ends none. Never in the
    driver's own process (the in-process system)."""
    if ends_children():
        # at priority 0: before multiprocessing's exit joins a non-daemonic child the code left running
        multiprocessing.util.Finalize(None, end_children, exitpriority=0)


def ends_children() -> bool:
    """Whether this process ends its children as it exits (``end_children_at_exit``). The actor also calls
    ``end_children`` as it is asked to exit: its parent may exit first, and then the kernel kills this
    process (``die_with_parent``) before any exit code runs."""
    return not in_driver_process() and os.environ.get(CHILDREN_ENV, "true").strip().lower() not in ("false", "0")


def live_processes() -> list[tuple[int, int, int]]:
    """``(pid, parent pid, process group)`` of every live (not zombie) process, from /proc ([] without one)."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: nothing to tell
        return []
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                state, ppid, pgid = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # gone meanwhile
            continue
        if state != "Z":
            found.append((int(entry), int(ppid), int(pgid)))
    return found


def direct_children(parent: int | None = None) -> list[int]:
    """The live (not zombie) processes whose parent is ``parent`` (this process), from /proc."""
    me = os.getpid() if parent is None else parent
    return [pid for pid, ppid, _ in live_processes() if ppid == me]


def end_children(grace_s: float = CHILDREN_GRACE_S) -> list[int]:
    """SIGTERM to each direct child, SIGKILL to those still running ``grace_s`` later. Returns their pids."""
    children = direct_children()
    for pid in children:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    running = children
    while running and time.monotonic() < deadline:
        time.sleep(0.01)
        running = [pid for pid in running if pid_alive(pid)]
    for pid in running:
        _signal(pid, signal.SIGKILL)
    for pid in children:  # (one still dying is reaped by init once this process is gone)
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):  # reaped elsewhere (subprocess, multiprocessing)
            pass
    return children


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped, counts as dead)."""
    return pid_runs(pid)


# ---------------------------------------------------------------------- how a child actor died
_exits: list[tuple[Any, int | None]] = []  # (child address, exit code), newest last, in this process


def record_child_exits() -> None:
    """In this process and those it forks, keep the exit status of each child actor Thespian reaps,
    and hear of every child that dies.

    ``ChildActorExited`` carries only the address; the status (a signal, an exit code) is what
    tells a segfault from the OOM killer.  Called before a multi-process system starts (in the
    driver, in ``audition worker``: the admins fork from there and reap a member's trials) and by the
    controller as it starts.

    Thespian 4.0.1 loses a notice when two children die close together: handling the first one's
    ``ChildActorExited``, ``_childExited`` drops *every* child found dead from its list, and the
    second one's SIGCHLD then finds nobody to report.  Its run was found only by the liveness check
    two seconds later, and the actor, still counting the child, kept its exit (and the system's
    shutdown) waiting 10 s.  Here the children that call drops are reported as ``childDied`` reports
    them.
    """
    from thespian.system import multiprocCommon
    from thespian.system.addressManager import CannotPickleAddress
    from thespian.system.transport import TransmitIntent

    cls: Any = multiprocCommon.MultiProcReplicator
    if getattr(cls, "_audition_exits", False):
        return
    original = cls._checkChildLiveness

    def checked(child: Any) -> bool:
        alive = bool(original(child))
        if not alive:
            proc = getattr(child, "childProc", None)
            _exits.append((getattr(child, "childRealAddr", child.childAddr), getattr(proc, "exitcode", None)))
            del _exits[:-200]
        return alive

    def child_exited(self: Any, child_addr: Any) -> None:
        alive: list[Any] = []
        dead: list[Any] = []
        for child in getattr(self, "_child_procs", []):
            (alive if checked(child) else dead).append(child)
        self._child_procs = alive
        for child in dead:
            addr = getattr(child, "childRealAddr", child.childAddr)
            if addr == child_addr:
                continue
            try:
                self.transport.scheduleTransmit(None, TransmitIntent(self.transport.myAddress, ChildActorExited(addr)))
            except CannotPickleAddress:  # not started far enough to have an address: nothing waits for it
                pass

    cls._checkChildLiveness = staticmethod(checked)
    cls._childExited = child_exited
    cls._audition_exits = True


def exit_status_of(addr: Any) -> int | None:
    """The exit code recorded for the child actor at ``addr`` (negative: the signal), or None."""
    for a, code in reversed(_exits):
        if a == addr:  # addresses compare by == only (not hashable)
            return code
    return None


def process_exit(pid: int) -> tuple[bool, int | None]:
    """(gone, exit code) of process ``pid`` from ``/proc``: gone if it no longer exists or is a zombie.

    The code follows ``multiprocessing``'s convention (negative: killed by that signal) and is read
    from a zombie's ``exit_code`` field; None when unknown (already reaped, or not Linux).  Used when
    Thespian's ``ChildActorExited`` did not come: seen for one of two trial processes that died at
    the same moment (their SIGCHLDs merge).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except FileNotFoundError:
        return True, None
    except OSError:
        return False, None
    fields = data[data.rindex(")") + 2:].split()
    if not fields or fields[0] != "Z":
        return False, None
    try:
        status = int(fields[49])
    except (IndexError, ValueError):
        return True, None
    return True, -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


def gone_processes(procs: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, int, int | None], ...]:
    """Of ``(trial_id, run_id, pid)``, those whose process is gone, with its exit status if known: the answer
    to a liveness check of this machine's trial processes (the controller's ``CheckProcesses``, a member
    probe's ``ProbeCheck``)."""
    return tuple((t, r, code) for t, r, pid in procs for dead, code in [process_exit(pid)] if dead)


__all__ = ["CHILDREN_ENV", "describe_exit", "direct_children", "end_children", "end_children_at_exit", "ends_children",
           "exit_status_of", "gone_processes", "live_processes", "pid_alive", "process_exit", "record_child_exits"]
