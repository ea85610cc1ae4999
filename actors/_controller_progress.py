"""What the controller tells the driver while it runs: progress rows and batched trial events.

Mixed into ``ControllerActor``. Both are built off the result path: progress about once a
second, events in batches of up to 500, so callbacks and the live table cost the trials nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from actors._trial import TrialStatus
from actors.messages import EventType, ExperimentProgress, ProgressRow, TrialEvent, TrialEvents


def error_summary(error: str | None, traceback: str | None, width: int = 80) -> str | None:
    """What the live table shows of a failure: the error's first line and where it was raised
    (the innermost ``File ..., line N, in f`` of the traceback); the rest is in ``error.txt``."""
    if not error:
        return None
    lines = [error.strip().splitlines()[0][:width]] if error.strip() else ["(empty error message)"]
    frames = [x.strip() for x in (traceback or "").splitlines() if x.strip().startswith("File ")]
    if frames:
        where = frames[-1]
        lines.append(where if len(where) <= width else "..." + where[-(width - 3):])
    return "\n".join(lines)


class ProgressMixin:
    """Uses the controller's ``spec``, ``table``, ``placement``, ``driver`` and ``started_at``."""

    spec: Any
    table: Any
    placement: Any
    driver: Any
    started_at: float
    events: list[TrialEvent]
    event_seq: int

    if TYPE_CHECKING:  # provided by the Thespian actor this is mixed into; never shadow it at run time
        def send(self, target: Any, msg: Any) -> None: ...

    def _progress(self) -> ExperimentProgress:
        assert self.spec is not None
        metric, mode = self.spec.metric, self.spec.mode
        counts: dict[str, int] = {}
        rows: list[ProgressRow] = []
        best, best_trial = None, None
        for rec in self.table.trials.values():
            counts[rec.status.value] = counts.get(rec.status.value, 0) + 1
            value = rec.last_result.get(metric) if metric else None
            if isinstance(value, (int, float)) and value == value and (
                    best is None or (value < best if mode == "min" else value > best)):
                best, best_trial = value, rec.trial_id
            if len(rows) < 40 and (rec.status is not TrialStatus.TERMINATED):
                rows.append(ProgressRow(rec.trial_id, rec.status, _short(rec.config), rec.iteration, value,
                                        str(rec.last_result.get("member") or self.placement.where.get(rec.trial_id)
                                            or ""), error_summary(rec.error, rec.traceback)))
        return ExperimentProgress(counts, tuple(rows), time.time() - self.started_at, metric, best, best_trial)

    def _event(self, kind: EventType, rec: Any, result: dict[str, Any] | None = None,
               checkpoint: str | None = None) -> None:
        if self.spec is None or not self.spec.forward_events:
            return
        self.events.append(TrialEvent(kind, rec.snapshot(), result, checkpoint))
        if len(self.events) >= 500:
            self._flush_events()

    def _flush_events(self) -> None:
        if self.events and self.driver is not None:
            self.event_seq += 1
            self.send(self.driver, TrialEvents(self.event_seq, tuple(self.events)))
        self.events = []


def _short(config: dict[str, Any]) -> dict[str, Any]:
    """Scalar config values only, for the progress table."""
    return {k: v for k, v in list(config.items())[:6] if isinstance(v, (int, float, str, bool))}


__all__ = ["ProgressMixin"]
