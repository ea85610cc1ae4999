"""What the controller tells the driver while it runs: progress rows and batched trial events.

Mixed into ``ControllerActor``. Both are built off the result path: progress about once a
second, events in batches of up to 500 sent at most ``EVENTS_DELAY_S`` after the first of them,
so callbacks hear of results promptly and the live table costs the trials nothing.
"""

from __future__ import annotations

import datetime
import heapq
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from actors._engine.trial import TrialStatus, trial_name
from actors.messages import (
    EventType,
    ExperimentProgress,
    ProgressRow,
    TrialEvent,
    TrialEvents,
    TrialOutput,
    TrialOutputBatch,
)


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


class _Row(Protocol):
    @property
    def status(self) -> TrialStatus: ...
    @property
    def last_result(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Row)

# the live table's row order: what needs attention (running, failed, waiting) before what is done
SHOWN_FIRST = (TrialStatus.RUNNING, TrialStatus.ERROR, TrialStatus.PAUSED, TrialStatus.PENDING)


def choose_rows(trials: Iterable[R], limit: int, metric: str | None,
                mode: str | None) -> tuple[list[R], dict[str, int]]:
    """The trials the live table shows (at most ``limit``) and how many of each status it hides.

    Order: RUNNING, ERROR, PAUSED, PENDING (each in table order, i.e. oldest first), then
    TERMINATED best first by ``metric`` (lowest for ``mode`` "min", else highest, like the title's
    best; trials without the metric last). When the unfinished trials fill every row, the last one
    still goes to the best TERMINATED trial that has the metric (if ``limit`` >= 2), so the
    finished best stays in view.
    Runs about once a second over the whole trial table: one pass keeping at most ``limit`` per
    unfinished status plus a bounded heap over the terminated ones, O(n log limit), no full sort.
    """
    firsts: dict[TrialStatus, list[R]] = {s: [] for s in SHOWN_FIRST}
    done: list[tuple[int, R]] = []
    counts: dict[TrialStatus, int] = {}
    for i, rec in enumerate(trials):
        counts[rec.status] = counts.get(rec.status, 0) + 1
        if rec.status is TrialStatus.TERMINATED:
            done.append((i, rec))
        elif len(bucket := firsts.setdefault(rec.status, [])) < limit:
            bucket.append(rec)

    def rank(item: tuple[int, R]) -> tuple[int, float, int]:
        value = item[1].last_result.get(metric) if metric else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return (1, 0.0, item[0])
        return (0, value if mode == "min" else -value, item[0])

    shown = [rec for bucket in firsts.values() for rec in bucket][:limit]
    best = heapq.nsmallest(max(limit - len(shown), 1), done, key=rank)
    if len(shown) == limit and limit >= 2 and best and rank(best[0])[0] == 0:
        shown = shown[:-1]
    shown += [rec for _, rec in best[:limit - len(shown)]]
    for rec in shown:
        counts[rec.status] -= 1
    return shown, {s.value: n for s, n in counts.items() if n}


EVENTS_DELAY_S = 0.05  # longest an event for the driver's callbacks waits to be batched
EVENTS_TICK = "events"  # the payload of the wake-up that sends them


class ProgressMixin:
    """Uses the controller's ``spec``, ``table``, ``placement``, ``driver`` and ``started_at``."""

    spec: Any
    table: Any
    placement: Any
    driver: Any
    started_at: float
    events: list[TrialEvent]
    event_seq: int
    console_out: list[TrialOutput]
    finished: bool

    output_batches = 0  # TrialOutputBatch messages sent (ExperimentFinished tells the driver)

    events_tick = False  # a wake-up with EVENTS_TICK is pending

    if TYPE_CHECKING:  # provided by the Thespian actor this is mixed into; never shadow it at run time
        def send(self, target: Any, msg: Any) -> None: ...
        def wakeupAfter(self, period: datetime.timedelta, payload: Any = None) -> None: ...

    def _progress(self) -> ExperimentProgress:
        assert self.spec is not None
        metric, mode = self.spec.metric, self.spec.mode
        # the table's status index holds the counts; only the best needs a pass over the trials
        counts = {s.value: n for s in TrialStatus if (n := self.table.count(s))}
        best, best_trial = None, None
        for rec in self.table.trials.values():
            value = rec.last_result.get(metric) if metric else None
            if isinstance(value, (int, float)) and value == value and (
                    best is None or (value < best if mode == "min" else value > best)):
                best, best_trial = value, rec.trial_id
        chosen, hidden = choose_rows(self.table.trials.values(), self.spec.max_progress_rows, metric, mode)
        rows = tuple(ProgressRow(rec.trial_id, rec.status, _short(rec.config), rec.iteration,
                                 rec.last_result.get(metric) if metric else None,
                                 str(rec.last_result.get("member") or self.placement.where.get(rec.trial_id) or ""),
                                 error_summary(rec.error, rec.traceback),
                                 trial_name(rec.trial_id, self.spec.trainable_name, rec.config, rec.name))
                     for rec in chosen)
        return ExperimentProgress(counts, rows, time.time() - self.started_at, metric, best, best_trial, hidden)

    def _event(self, kind: EventType, rec: Any, result: dict[str, Any] | None = None,
               checkpoint: str | None = None) -> None:
        if self.spec is None or not self.spec.forward_events:
            return
        self.events.append(TrialEvent(kind, rec.snapshot(), result, checkpoint))
        if len(self.events) >= 500:
            self._flush_events()
        elif not self.events_tick:
            self.events_tick = True
            self.wakeupAfter(datetime.timedelta(seconds=EVENTS_DELAY_S), payload=EVENTS_TICK)

    def receiveMsg_TrialOutput(self, msg: TrialOutput, sender: Any) -> None:
        """A trial's printed lines (already rate-bounded in its process): sent on with the events."""
        if self.spec is None or self.finished or not self.spec.log_to_driver:
            return
        self.console_out.append(msg)
        if not self.events_tick:
            self.events_tick = True
            self.wakeupAfter(datetime.timedelta(seconds=EVENTS_DELAY_S), payload=EVENTS_TICK)

    def _flush_events(self) -> None:
        if self.events and self.driver is not None:
            self.event_seq += 1
            self.send(self.driver, TrialEvents(self.event_seq, tuple(self.events)))
        self.events = []
        if self.console_out and self.driver is not None:
            self.output_batches += 1
            self.send(self.driver, TrialOutputBatch(tuple(self.console_out)))
        self.console_out = []


def _short(config: dict[str, Any]) -> dict[str, Any]:
    """Scalar config values only, for the progress table."""
    return {k: v for k, v in list(config.items())[:6] if isinstance(v, (int, float, str, bool))}


__all__ = ["ProgressMixin", "choose_rows", "error_summary"]
