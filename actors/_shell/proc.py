"""Process hygiene: actor processes die rather than linger, and end with whoever started the system.

* :func:`die_with_parent`, called by every actor: the kernel kills the actor when its parent
  dies, and a fatal signal (segfault, abort, ...) kills it instead of spinning in Thespian's
  Python-level handler (see ../shared/notes/thespian.md, "Signals").
* :func:`watch_owner`, called in the driver or ``audition worker`` before it starts an actor
  system: the system's admin watches that process and, once it is gone (SIGKILL, a crash), asks
  for a clean shutdown and then kills every process of the system.  PR_SET_PDEATHSIG cannot do
  this: Thespian starts the admin detached (double fork, own session).
"""

from __future__ import annotations

import ctypes
import faulthandler
import multiprocessing
import multiprocessing.util
import os
import select
import signal
import sys
import threading
import time
from typing import Any

from thespian.actors import ChildActorExited

from actors._engine.watch import describe_exit
from actors._tempdirs import pid_runs

_PR_SET_PDEATHSIG = 1
# ``kill -USR2 <pid>`` of an actor process (or an admin) prints every thread's Python stack: see dump_stacks_on_signal
STACKS_SIGNAL = signal.SIGUSR2
_stacks_fd: int | None = None  # this process's stderr as it started, where the stacks go
# Thespian installs a Python-level handler for these; a real fault then re-runs the faulting
# instruction forever (100% CPU, the parent never hears of a death)
_FATAL_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")


_in_process_systems: set[int] = set()  # pids that started an in-process system (a fork inherits, but differs)


def runs_in_process_system() -> None:
    """Record that this process starts an in-process system: its actors run here, in the user's process."""
    _in_process_systems.add(os.getpid())


def in_driver_process() -> bool:
    """Whether this actor runs in the process that started its system (the in-process system), not forked:
    a script's main process, or a process of the user's own (a ``multiprocessing`` worker running ``fit()``)
    that started an in-process system."""
    return multiprocessing.current_process().name == "MainProcess" or os.getpid() in _in_process_systems


def die_with_parent() -> None:
    """Have the kernel SIGKILL this actor process when its parent process dies (Linux), and let a
    fatal signal end it (with the Python stacks on stderr) so its parent hears the death at once.

    Seen here: an actor whose creating process exited first was left running under
    init, idle in Thespian's loop, with nobody to tell it to exit.  Skipped in the
    main process (the in-process system runs actors in the driver itself).
    """
    if in_driver_process():
        return
    restore_fatal_signals()
    plain_signals_in_forks()
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    # A parent that died before the prctl sends no signal: an actor started while its system shut down
    # (seen: an experiment ended by its scheduler's error, under load) would idle under init for good.
    parent = multiprocessing.parent_process()
    if parent is not None and parent.pid is not None and os.getppid() != parent.pid:
        os.kill(os.getpid(), signal.SIGKILL)


_fork_hook = False  # (inherited by forked actors, as the hooks are)
_forking = threading.local()  # the forking thread's signal mask before the fork


def plain_signals_in_forks() -> None:
    """Processes this one forks (a trainable's ``multiprocessing.Pool``) start with a fresh interpreter's
    signal handlers, not the actor's.

    Thespian gives every actor process a Python-level handler for each signal, and a fork inherits them:
    a pool worker then survived the SIGTERM of ``Pool.terminate()`` (a ``with Pool(...)`` block's end), and
    the trainable waited in its ``join`` forever. The handled signals are blocked in the forking thread
    across the fork, so one sent to the child before it put the handlers back waits for them (else Python
    would drop it: it had been caught by a Python handler that is gone by the time it is run). Once per
    process tree: forked actors inherit the hooks."""
    global _fork_hook
    if not _fork_hook:
        os.register_at_fork(before=_block_handled, after_in_parent=_unblock,
                            after_in_child=_plain_signals_then_unblock)
        _fork_hook = True


def _python_handled() -> dict[int, Any]:
    """Each signal with a Python-level handler, and what a fresh interpreter has for it."""
    out: dict[int, Any] = {}
    for signum in range(1, signal.NSIG):
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if not callable(handler) or handler is signal.default_int_handler:
            continue  # SIG_DFL, SIG_IGN, or set in C (faulthandler's): as they are
        if signum == signal.SIGINT:
            out[signum] = signal.default_int_handler
        elif signum in (getattr(signal, "SIGPIPE", None), getattr(signal, "SIGXFSZ", None)):
            out[signum] = signal.SIG_IGN  # (ignored by Python at startup)
        else:
            out[signum] = signal.SIG_DFL
    return out


def _block_handled() -> None:
    """Before a fork, in the forking thread: what to reset in the child (read once, for both sides), blocked."""
    _forking.mask = None
    _forking.handled = handled = _python_handled()
    try:
        _forking.mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(handled))
    except (OSError, ValueError):
        pass


def _unblock() -> None:
    _forking.handled = None
    mask, _forking.mask = getattr(_forking, "mask", None), None
    if mask is not None:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except (OSError, ValueError):
            pass


def _plain_signals_then_unblock() -> None:
    """In a new child: each Python-level handler back to a fresh interpreter's (Thespian's children set
    their own after this), then the signals that arrived meanwhile are let in."""
    handled, _forking.handled = getattr(_forking, "handled", None), None
    for signum, fresh in (handled if handled is not None else _python_handled()).items():
        try:
            signal.signal(signum, fresh)
        except (OSError, RuntimeError, ValueError):
            pass
    _unblock()


def restore_fatal_signals() -> None:
    """Default dispositions for the fatal signals, then ``faulthandler`` (it dumps, then re-raises)."""
    for name in _FATAL_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    try:
        faulthandler.enable(all_threads=True)
    except (AttributeError, OSError, RuntimeError, ValueError):  # no usable stderr: the default still kills
        pass
    dump_stacks_on_signal()


def dump_stacks_on_signal() -> None:
    """On ``STACKS_SIGNAL``, write every thread's Python stack to the stderr this process started with.

    How to see where a run that seems stuck waits (and how the test suite shows it when a test times
    out: ``tests/_stacks.py``). faulthandler writes from its C-level handler, so a thread spinning in a
    C call while it holds the GIL does not keep the dump back. A trial's fd 2 is a pipe to its run's
    captured output while the run is current (``_worker.fdcapture``): the stacks go to a copy of the
    fd taken before that (inherited from the actor's parent), the driver's terminal, not into the trial's output.
    """
    global _stacks_fd
    fd = _stacks_fd
    if fd is None:
        try:
            fd = os.dup(2)  # (not inheritable)
        except OSError:  # no stderr at all: nothing to write to
            return
    try:
        # again in each actor: a forked one inherits the fd and faulthandler's record of its handler, but
        # Thespian replaced the handler itself (register() alone would only change the file)
        faulthandler.unregister(STACKS_SIGNAL)
        faulthandler.register(STACKS_SIGNAL, file=fd, all_threads=True, chain=False)
    except (AttributeError, OSError, RuntimeError, ValueError):
        if fd != _stacks_fd:
            os.close(fd)
        return
    _stacks_fd = fd


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


def direct_children(parent: int | None = None) -> list[int]:
    """The live (not zombie) processes whose parent is ``parent`` (this process), from /proc."""
    me = os.getpid() if parent is None else parent
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: nothing to tell
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):  # gone meanwhile
            continue
        if int(ppid) == me and state != "Z":
            found.append(int(entry))
    return found


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


# ---------------------------------------------------------------------- the admin watches its owner
_owner: dict[str, Any] = {}  # set by watch_owner in the starting process; the forked admin inherits it
POLL_S = 0.25


def watch_owner(shutdown_after_s: float, kill_after_s: float, stuck_shutdown_s: float = 5.0) -> None:
    """The admin of the next actor system started by this process ends with this process.

    Once this process is gone, the admin asks itself for a clean shutdown after
    ``shutdown_after_s`` (unless one is already under way: a leader's controller does its own,
    writing the experiment's final state first), and kills its whole process group (itself, its
    logger, every actor) ``kill_after_s`` after the death, or ``stuck_shutdown_s`` after any
    shutdown began, whichever comes first: an actor stuck in a C call never confirms its exit.
    """
    _owner.update(pid=os.getpid(), pgid=os.getpgrp(), soft=float(shutdown_after_s), hard=float(kill_after_s),
                  stuck=float(stuck_shutdown_s))
    from thespian.system import multiprocCommon

    admin_class: Any = multiprocCommon.MultiProcAdmin
    if getattr(admin_class, "_audition_watched", False):
        return
    original = admin_class.run

    def run(self: Any) -> Any:
        _in_admin(self)
        return original(self)

    admin_class.run = run
    admin_class._audition_watched = True


def _in_admin(admin: Any) -> None:
    """Runs in the admin process as it starts: plain signal dispositions, and the watch thread."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the driver's deferring handlers are not the admin's
    signal.signal(signal.SIGINT, signal.default_int_handler)
    dump_stacks_on_signal()
    if not _owner:
        return
    port = int((getattr(admin, "capabilities", None) or {}).get("Admin Port") or 0)
    threading.Thread(target=_watch, args=(admin, dict(_owner), port), name="audition-owner-watch",
                     daemon=True).start()


def _watch(admin: Any, owner: dict[str, Any], port: int) -> None:
    pidfd: int | None = None
    gone_at: float | None = None
    try:
        pidfd = os.pidfd_open(owner["pid"])
    except ProcessLookupError:
        gone_at = time.monotonic()
    except (AttributeError, OSError):
        pidfd = None
    poller = None
    if pidfd is not None:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
    shut_at: float | None = None
    asked = False
    while True:
        if poller is not None and gone_at is None:
            if poller.poll(POLL_S * 1000):
                gone_at = time.monotonic()
        else:
            time.sleep(POLL_S)
            if gone_at is None and not pid_alive(owner["pid"]):
                gone_at = time.monotonic()
        now = time.monotonic()
        if shut_at is None and hasattr(admin, "_exiting"):  # Thespian's mark of a shutdown under way
            shut_at = now
        if gone_at is not None and shut_at is None and not asked and now - gone_at >= owner["soft"] and port:
            asked = True
            from actors._driver.system import shutdown_orphaned_system

            try:
                shutdown_orphaned_system(port)
            except OSError:
                pass
        if ((gone_at is not None and now - gone_at >= owner["hard"])
                or (shut_at is not None and now - shut_at >= owner["stuck"])):
            group = os.getpgrp()
            if group != owner["pgid"]:  # never the starter's own group (no setsid: nothing to do)
                os.killpg(group, signal.SIGKILL)
            return


__all__ = ["CHILDREN_ENV", "STACKS_SIGNAL", "describe_exit", "die_with_parent", "direct_children",
           "dump_stacks_on_signal", "end_children", "end_children_at_exit", "ends_children", "exit_status_of",
           "pid_alive", "plain_signals_in_forks", "record_child_exits", "restore_fatal_signals",
           "runs_in_process_system", "watch_owner"]
