"""Experiment state that survives a crash at any point, without needing an atomic rename.

Each save writes a new, never-overwritten version file and only then moves the small pointer
``experiment_state.json`` to it. A crash before the pointer moves leaves the previous state in
force; a lost or corrupt pointer falls back to the newest version that still parses.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from storage._context import StorageContext
from storage._errors import StorageError
from storage._io import basename, dumps, exists, list_dir, read_bytes, remove_file, write_bytes
from storage._layout import STATE_DIR_NAME, STATE_POINTER_NAME, ExperimentLayout

_log = logging.getLogger("storage")
KEEP_VERSIONS = 3


def _versions(ctx: StorageContext, layout: ExperimentLayout) -> list[tuple[int, str]]:
    """(seq, path) of every state version, oldest first."""
    found = []
    for entry in list_dir(ctx, layout.state_dir):
        seq = ExperimentLayout.parse_state_version(entry["name"])
        if seq is not None and entry.get("type") != "directory":
            found.append((seq, entry["name"]))
    return sorted(found)


def _read_object(ctx: StorageContext, path: str) -> dict[str, Any] | None:
    """Parsed JSON object, or None when missing or unreadable (the caller falls back)."""
    try:
        data = read_bytes(ctx, path, what="reading experiment state")
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def write_experiment_state(
    ctx: StorageContext,
    layout: ExperimentLayout,
    state: dict[str, Any],
    *,
    keep: int = KEEP_VERSIONS,
    clock: Callable[[], float] = time.time,
) -> str:
    """Save ``state`` as a new version, point to it, prune old versions; return the version's path."""
    return StateWriter(ctx, layout, keep=keep, clock=clock).write(state)


class StateWriter:
    """Writes one experiment's state versions, as ``write_experiment_state`` does, for its only writer
    (the controller): after its first write it knows which versions exist, so later writes skip
    listing them and reading the pointer (a LIST and a GET per write on an object store)."""

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, *, keep: int = KEEP_VERSIONS,
                 clock: Callable[[], float] = time.time) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.ctx, self.layout, self.keep, self.clock = ctx, layout, keep, clock
        self._versions: list[tuple[int, str]] | None = None  # None: look in storage at the next write

    def write(self, state: dict[str, Any]) -> str:
        """Save ``state`` as a new version, point to it, prune old versions; return the version's path."""
        ctx, layout = self.ctx, self.layout
        if not isinstance(state, dict):
            raise StorageError(f"experiment state for {ctx.uri(layout.experiment_dir)} must be a dict, got "
                               f"{type(state).__name__}", url=ctx.uri(layout.experiment_dir))
        versions, self._versions = self._versions, None  # a failure below: look again next time
        if versions is None:
            versions = _versions(ctx, layout)
            last = max([seq for seq, _ in versions] + [_pointer_seq(_read_object(ctx, layout.state_pointer))],
                       default=-1)
        else:
            last = max([seq for seq, _ in versions], default=-1)
        seq = last + 1
        path = layout.state_version(seq, secrets.token_hex(4))
        self._put(path, state, None, "writing experiment state")
        self._put(layout.state_pointer, {"latest": basename(path), "seq": seq, "written_at": self.clock()}, 2,
                  "writing experiment state pointer")
        self._versions = _prune(ctx, [*versions, (seq, path)], self.keep, current=path)
        return path

    def _put(self, path: str, value: dict[str, Any], indent: int | None, what: str) -> None:
        """Write ``value`` as JSON at ``path`` (the simulator's writer stores it without encoding it
        until it is read: ``actors.testing.sim_store``)."""
        write_bytes(self.ctx, path, dumps(value, indent=indent).encode("utf-8"), what=what)


def _pointer_seq(pointer: dict[str, Any] | None) -> int:
    seq = (pointer or {}).get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else -1


def _prune(ctx: StorageContext, versions: list[tuple[int, str]], keep: int,
           current: str) -> list[tuple[int, str]]:
    """Drop all but the newest ``keep`` versions; failures only cost disk space, so just log them.
    Returns the versions left (those that could not be deleted are tried again next time)."""
    ordered = sorted(versions)
    left = ordered[-keep:]
    for version in ordered[:-keep]:
        if version[1] == current:
            left.append(version)
            continue
        try:
            remove_file(ctx, version[1], attempts=1)
        except Exception as exc:
            _log.warning("could not prune old experiment state %s: %s", ctx.uri(version[1]), exc)
            left.append(version)
    return sorted(left)


def read_experiment_state(ctx: StorageContext, layout: ExperimentLayout) -> dict[str, Any] | None:
    """The current state; None when no state was ever saved here.

    Falls back (with a warning) to the newest readable version when the pointer or the version it
    names is missing or corrupt. StorageError if versions exist but none is readable. A save
    running meanwhile (another process) can move the pointer between our reads, so nothing is
    called corrupted before a second look.
    """
    latest: Any = None
    tried: list[str] = []
    for _ in range(2):
        pointer = _read_object(ctx, layout.state_pointer)
        latest = (pointer or {}).get("latest")
        if isinstance(latest, str) and ExperimentLayout.parse_state_version(latest) is not None:
            state = _read_object(ctx, f"{layout.state_dir}/{latest}")
            if state is not None:
                return state
        versions = _versions(ctx, layout)
        if not versions and pointer is None and not exists(ctx, layout.state_pointer):
            return None
        tried = []
        for _, path in reversed(versions):
            state = _read_object(ctx, path)
            if state is not None:
                _log.warning("experiment state pointer %s is missing or names an unreadable version; "
                             "using %s instead", ctx.uri(layout.state_pointer), ctx.uri(path))
                return state
            tried.append(basename(path))
    where = ctx.uri(layout.experiment_dir)
    names = ", ".join(tried) or "none"
    raise StorageError(
        f"corrupted experiment state at {where}: the pointer {STATE_POINTER_NAME} names {latest!r} and "
        f"no version in {STATE_DIR_NAME}/ is readable (tried: {names}). "
        "Restore the directory from a backup, or start a new experiment under another name",
        url=where,
    )


def has_experiment_state(ctx: StorageContext, layout: ExperimentLayout) -> bool:
    """True if an experiment saved its state here (a pointer or a version), readable or not."""
    return exists(ctx, layout.state_pointer) or bool(_versions(ctx, layout))


def list_experiment(ctx: StorageContext, layout: ExperimentLayout) -> list[str]:
    """Trial ids that have a directory in the experiment, sorted."""
    trials = []
    for entry in list_dir(ctx, layout.experiment_dir):
        name = basename(entry["name"])
        if entry.get("type") == "directory" and not name.startswith("."):
            trials.append(name)
    return sorted(trials)
