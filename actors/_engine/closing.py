"""The storage steps of an experiment's end, each on its own: what one of them cannot write is told, and
never keeps the others (or the driver's answer) from happening. The phase changes around them stay the
core's (``ExperimentCore._abort`` and ``_finish``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors._engine.lifecycle import TrialTable
from actors._engine.store import ExperimentStore

Explain = Callable[[BaseException], "str | None"]


def freeze_for_abort(io: ExperimentStore, table: TrialTable, searcher: Any, progress: Any, tag: int | None,
                     reason: str, explain: Explain) -> str | None:
    """Freeze the table as the abort found it (written with the scheduler's state answering ``tag``).

    None if frozen; else the abort's reason with what failed (a searcher's ``save()`` raising, storage). Then
    no later table may be written, or the trials the abort halts would be saved as ended and never resumed:
    the state saved before stays the restore point."""
    try:
        io.freeze(table, searcher, progress, tag)
    except Exception as exc:
        why = explain(exc) or repr(exc)
        also = "" if why in reason else f"\nand the experiment's state as it stopped could not be saved: {why}"
        return f"{reason}{also}\n(the experiment's state saved before this, if any, is kept for Tuner.restore)"
    return None


def final_writes(steps: list[Callable[[], None]], error: str | None, explain: Explain) -> str | None:
    """Run the end's writes in order, each whatever the one before did; ``error`` with each failure added."""
    for step in steps:
        try:
            step()
        except Exception as exc:
            error = (error + "\n" if error else "") + f"writing the final results failed: {explain(exc) or repr(exc)}"
    return error


__all__ = ["final_writes", "freeze_for_abort"]
