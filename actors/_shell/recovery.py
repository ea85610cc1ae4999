"""Which checkpoint a retry or a restore resumes from: the newest one committed in storage.

A run can commit checkpoints the controller never hears of: its process dies after writing a
manifest but before the result that names it reaches the controller. Each manifest carries the
results of its run that were not acknowledged since the previous checkpoint (``results``), so the
history up to any such checkpoint can be completed from storage. ``choose`` picks the newest
checkpoint the history reaches without a gap; the rows it returns fill the history up to it, and
the resumed run reports the iterations after it. Pure: the callers do the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.messages import CheckpointRef

ITERATION = "training_iteration"


@dataclass(frozen=True)
class Found:
    """A committed checkpoint newer than every one the controller knows, with its manifest's rows."""

    ref: CheckpointRef
    rows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Recovery:
    checkpoint: CheckpointRef | None  # resume from this (None: nothing newer is usable)
    rows: list[dict[str, Any]] = field(default_factory=list)  # history after ``logged``, up to it
    usable: list[CheckpointRef] = field(default_factory=list)  # found ones up to the chosen, oldest first
    unusable: list[CheckpointRef] = field(default_factory=list)  # newer than any the history reaches


def found_from(info: Any) -> Found:
    """A ``storage.CheckpointInfo`` as a ``Found`` (its metadata is what the runner committed)."""
    meta = info.metadata
    ref = CheckpointRef(info.path, info.index, int(meta.get("iteration", 0)),
                        float(meta.get("time_total_s", 0.0)), dict(meta.get("metrics") or {}))
    rows = tuple(r for r in meta.get("results") or () if isinstance(r, dict) and _iteration(r) is not None)
    return Found(ref, rows)


def choose(found: list[Found], logged: int) -> Recovery:
    """The newest of ``found`` whose iteration the history (logged up to ``logged``) reaches.

    Rows after ``logged`` are taken from the manifests, each iteration once, in order, until the
    first missing one: a checkpoint past that gap would leave a hole in the history.
    """
    by_iteration: dict[int, dict[str, Any]] = {}
    for f in found:
        for row in f.rows:
            it = _iteration(row)
            if it is not None and it > logged:
                by_iteration.setdefault(it, row)
    reach = logged
    while reach + 1 in by_iteration:
        reach += 1
    ordered = sorted((f.ref for f in found), key=lambda c: c.index)
    reachable = [c for c in ordered if c.iteration <= reach]
    if not reachable:
        return Recovery(None, unusable=ordered)
    chosen = reachable[-1]
    rows = [by_iteration[i] for i in range(logged + 1, chosen.iteration + 1)]
    return Recovery(chosen, rows, [c for c in ordered if c.index <= chosen.index],
                    [c for c in ordered if c.index > chosen.index])


def _iteration(row: dict[str, Any]) -> int | None:
    value = row.get(ITERATION)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["Found", "Recovery", "choose", "found_from"]
