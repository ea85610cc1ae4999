"""Process hygiene of every audition process: actors die rather than linger, a fatal signal ends the
process (with its stacks), and a fork starts with plain signal handling.

* :func:`die_with_parent`, called by every actor: the kernel kills the actor when its parent
  dies, and a fatal signal (segfault, abort, ...) kills it instead of spinning in Thespian's
  Python-level handler (see ../shared/notes/thespian.md, "Signals").
"""

from __future__ import annotations

import ctypes
import faulthandler
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

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


def describe_on_signal(describe: Callable[[], str]) -> None:
    """On ``STACKS_SIGNAL``, after the stacks: ``describe()``'s text, what this actor waits for.

    Its stacks show an idle actor in ``select``, whatever it waits for; its own words say which message.
    The text is written by a Python-level handler that faulthandler's C-level one chains to: it runs once
    the main thread is back in Python (at once for an actor idle in its transport). A process whose main
    thread never gets back still shows its stacks. Not in the driver's own process (the in-process
    system's actors run there: the user's process keeps its handlers).
    """
    if in_driver_process():
        return

    def write_state(signum: int, frame: Any) -> None:
        try:
            text = describe()
        except Exception as exc:  # a diagnostic never ends the process
            text = f"(could not describe this actor: {exc!r})"
        fd = _stacks_fd
        if fd is not None:
            try:
                os.write(fd, f"--- state of pid {os.getpid()} ---\n{text}\n".encode("utf-8", "replace"))
            except OSError:
                pass

    dump_stacks_on_signal(then=write_state)


def dump_stacks_on_signal(then: Callable[[int, Any], None] | None = None) -> None:
    """On ``STACKS_SIGNAL``, write every thread's Python stack to the stderr this process started with
    (then run ``then``, a Python-level handler: ``describe_on_signal``).

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
        if then is not None:  # (installed first: faulthandler chains to the handler it finds)
            signal.signal(STACKS_SIGNAL, then)
        faulthandler.register(STACKS_SIGNAL, file=fd, all_threads=True, chain=then is not None)
    except (AttributeError, OSError, RuntimeError, ValueError):
        if fd != _stacks_fd:
            os.close(fd)
        return
    _stacks_fd = fd


__all__ = ["STACKS_SIGNAL", "describe_on_signal", "die_with_parent", "dump_stacks_on_signal", "in_driver_process",
           "plain_signals_in_forks", "restore_fatal_signals", "runs_in_process_system"]
