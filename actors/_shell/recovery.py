"""Which checkpoint a retry or a restore resumes from: the newest one committed in storage.

A run can commit checkpoints the controller never hears of: its process dies after writing a
manifest but before the result that names it reaches the controller. Each manifest carries the
results of its run that were not acknowledged since the previous checkpoint (``results``), so the
history up to any such checkpoint can be completed from storage. ``choose`` picks the newest
checkpoint the history reaches without a gap; the rows it returns fill the history up to it, and
the resumed run reports the iterations after it. Pure: the callers do the I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    # newer than any the history reaches, or of a run the history does not continue
    unusable: list[CheckpointRef] = field(default_factory=list)


def found_from(info: Any) -> Found:
    """A ``storage.CheckpointInfo`` as a ``Found`` (its metadata is what the runner committed)."""
    meta = info.metadata
    ref = CheckpointRef(info.path, info.index, int(meta.get("iteration", 0)),
                        float(meta.get("time_total_s", 0.0)), dict(meta.get("metrics") or {}))
    rows = tuple(r for r in meta.get("results") or () if isinstance(r, dict) and _iteration(r) is not None)
    return Found(ref, rows)


def choose(found: list[Found], logged: int, history: Sequence[dict[str, Any]] = ()) -> Recovery:
    """The newest of ``found`` whose iteration the history (logged up to ``logged``) reaches.

    Rows after ``logged`` are taken from the manifests, each iteration once, in order, until the
    first missing one: a checkpoint past that gap would leave a hole in the history. ``history``:
    the logged rows of the trial's last lineage; a checkpoint whose rows (or its own result) differ
    from them at an iteration both hold was written by a run the history does not continue (one
    ended by force while its save was on the way, then run again from an older checkpoint): it is
    unusable, as resuming from it would join two runs' rows in one history.
    """
    mine = {it: r for r in history if (it := _iteration(r)) is not None}
    agreeing: list[Found] = []
    other: list[CheckpointRef] = []
    for f in found:
        if _agrees(f, mine):
            agreeing.append(f)
        else:
            other.append(f.ref)
    by_iteration: dict[int, dict[str, Any]] = {}
    for f in agreeing:
        for row in f.rows:
            it = _iteration(row)
            if it is not None and it > logged:
                by_iteration.setdefault(it, row)
    reach = logged
    while reach + 1 in by_iteration:
        reach += 1
    ordered = sorted((f.ref for f in agreeing), key=lambda c: c.index)
    reachable = [c for c in ordered if c.iteration <= reach]
    if not reachable:
        return Recovery(None, unusable=sorted([*ordered, *other], key=lambda c: c.index))
    chosen = reachable[-1]
    rows = [by_iteration[i] for i in range(logged + 1, chosen.iteration + 1)]
    return Recovery(chosen, rows, [c for c in ordered if c.index <= chosen.index],
                    sorted([*(c for c in ordered if c.index > chosen.index), *other], key=lambda c: c.index))


# what tells two runs' rows at one iteration apart (a retried run's rows repeat the iterations, not these)
RUN_KEYS = ("iterations_since_restore", "time_total_s")


def _agrees(found: Found, history: dict[int, dict[str, Any]]) -> bool:
    for row in (*found.rows, found.ref.metrics):
        it = _iteration(row)
        logged = history.get(it) if it is not None else None
        if logged is not None and any(k in row and k in logged and row[k] != logged[k] for k in RUN_KEYS):
            return False
    return True


def _iteration(row: dict[str, Any]) -> int | None:
    value = row.get(ITERATION)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


__all__ = ["Found", "Recovery", "choose", "found_from"]
