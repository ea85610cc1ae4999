"""Temp directories a process makes for its own use, named so that those a killed process leaves are swept.

A trial process removes its temp directories itself (``Checkpoint.from_dict``'s by ``weakref.finalize``,
a save's scratch directory in a ``finally``), but not when it is killed: SIGKILL, a stop's grace
expiring, a crash. Such a directory is named ``audition-<pid>-<where>-<what>-<random>`` in the system
temp dir (``tempfile.gettempdir()``: ``$TMPDIR`` or ``tempfile.tempdir``), and ``sweep`` (run at the end
of ``fit()`` and of ``audition worker``, once their processes are down) removes those whose process no
longer runs. ``<where>`` tells this machine's processes from those of another container sharing the
temp dir (whose pids this one cannot see): only directories made where the sweep runs are touched.
Directories handed to the user (``Checkpoint.to_directory()``) are not made here: they are theirs to keep.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile

PREFIX = "audition-"
_NAME = re.compile(r"^audition-(\d+)-([0-9a-f]{8})-")


def _where() -> str:
    """This machine and pid namespace, as 8 hex digits: pids are only comparable within one."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:  # (not Linux)
        ns = ""
    return hashlib.sha1(f"{socket.gethostname()}|{ns}".encode()).hexdigest()[:8]


def owned_tempdir(what: str) -> str:
    """A new temp directory for this process's own use (it removes it; ``sweep`` does if it is killed)."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{_where()}-{what}-")


def pid_runs(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's; (a number no pid can be): not ours to judge
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def sweep(root: str | None = None) -> list[str]:
    """Remove from ``root`` (default: the system temp dir) the directories ``owned_tempdir`` made, on this
    machine and as this user, for processes that no longer run; return their paths. Anything else
    (another name, a live process's, another machine's, a symlink, a file) is left alone."""
    root = root if root is not None else tempfile.gettempdir()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    here, uid, removed = _where(), os.getuid(), []
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None or m.group(2) != here:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
        except OSError:
            continue
        pid = int(m.group(1))
        if pid_runs(pid):  # (this process's own too)
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


__all__ = ["owned_tempdir", "pid_runs", "sweep"]
