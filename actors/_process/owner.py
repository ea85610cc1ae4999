"""The admin watches the process that started its system (the driver or ``audition worker``).

:func:`watch_owner`, called before the system starts: once that process is gone (SIGKILL, a crash), the
admin asks for a clean shutdown and then kills every process of the system. PR_SET_PDEATHSIG cannot do
this: Thespian starts the admin detached (double fork, own session).
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Any

from actors._process.children import ends_children, live_processes, pid_alive
from actors._process.hygiene import dump_stacks_on_signal

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
        try:
            return original(self)
        finally:  # the system has shut down (Thespian's admin loop returned)
            end_group_leftovers()

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


def end_group_leftovers() -> list[int]:
    """As the admin exits, once its system has shut down: SIGKILL what is left in the system's process group (its
    own session, which every actor process shares). A trial process killed by the kernel when its parent exited
    first (``die_with_parent``) ends none of its children (``end_children`` runs in its exit path): a child its
    trainable left running stayed under init, in this group (seen in the suite, 1 run in 3). Skipped when
    ``RAY_kill_child_processes_on_worker_exit`` is false (such children are kept, as Ray keeps them) and when
    the admin shares its starter's group. Returns the pids signalled."""
    if not _owner or os.getpgrp() == _owner.get("pgid") or not ends_children():
        return []
    me, group = os.getpid(), os.getpgrp()
    left = [pid for pid, _, pgid in live_processes() if pgid == group and pid != me]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return left


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


__all__ = ["watch_owner"]
