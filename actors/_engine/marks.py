"""Marks: what was done to a trial, and at which iteration, as the trial table saw it happen.

Result rows cannot say why a curve stops or bends (a pause resumed in the same process, or a stop
before the trainable's own end, leaves no trace in them), so ``TrialTable`` records each decision
when it takes effect, the experiment state persists the list, and ``audition plot`` draws it.
Marks are bookkeeping only: nothing in the engine reads them back to decide anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

# Per trial; the oldest go first, so a scheduler that pauses on every result keeps memory and
# the experiment state bounded.
MAX_MARKS = 1000


class MarkKind(Enum):
    PAUSE = "pause"  # a PAUSE took effect: the trial was parked (an exploit's own pause is EXPLOIT)
    STOP = "stop"  # a scheduler or stopper STOP ended the trial before its trainable finished
    EXPLOIT = "exploit"  # a clone replaced the trial's config and checkpoint with ``source``'s
    FAIL = "fail"  # a run raised or its process died (retried, or the trial ended in ERROR)


@dataclass(frozen=True)
class Mark:
    kind: MarkKind
    iteration: int  # the trial's training_iteration when it happened
    source: str | None = None  # EXPLOIT: the trial whose checkpoint was copied

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "iteration": self.iteration}
        if self.source is not None:
            out["source"] = self.source
        return out


def add_mark(marks: list[Mark], mark: Mark) -> None:
    """Append, dropping the oldest beyond ``MAX_MARKS``."""
    marks.append(mark)
    if len(marks) > MAX_MARKS:
        del marks[: len(marks) - MAX_MARKS]


def marks_from_rows(rows: Any) -> list[Mark]:
    """Marks from a saved state's ``marks`` entry; entries this version cannot read are skipped.

    Lenient on purpose: a state written before marks existed, or by a newer engine with more
    kinds, must still restore and plot.
    """
    out: list[Mark] = []
    if not isinstance(rows, list):
        return out
    kinds = {k.value: k for k in MarkKind}
    for row in rows[-MAX_MARKS:]:
        if not isinstance(row, dict) or row.get("kind") not in kinds:
            continue
        iteration, source = row.get("iteration"), row.get("source")
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            continue
        out.append(Mark(kinds[row["kind"]], iteration, source if isinstance(source, str) else None))
    return out


__all__ = ["MAX_MARKS", "Mark", "MarkKind", "add_mark", "marks_from_rows"]
