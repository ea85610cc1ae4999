"""Process hygiene for actor processes."""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel SIGKILL this actor process when its parent process dies (Linux).

    Seen here: an actor whose creating process exited first was left running under
    init, idle in Thespian's loop, with nobody to tell it to exit.  Skipped in the
    main process (the in-process system runs actors in the driver itself).
    """
    if not sys.platform.startswith("linux") or multiprocessing.current_process().name == "MainProcess":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


__all__ = ["die_with_parent"]
