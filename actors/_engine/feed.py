"""What the core tells the driver while the experiment runs: progress rows and batched trial events.

Both are built off the result path: progress about once a second, events in batches of up to 500
sent at most ``EVENTS_DELAY_S`` after the first of them, so callbacks hear of results promptly and
the live table costs the trials nothing.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from actors._engine.lifecycle import TrialTable
from actors._engine.signals import DRIVER, Command, Send, Tick, WakeAfter
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialSnapshot, TrialStatus, trial_name
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
EVENTS_BATCH = 500
# longest the experiment's end waits for printed lines a run sent before its end that have not come yet
# (the transport does not keep the order: a run's last TrialOutput can arrive after its TrialEnded)
OUTPUT_WAIT_S = 2.0


class DriverFeed:
    """Trial events for the driver's callbacks and trial output for its console, batched."""

    def __init__(self, forward_events: bool, log_to_driver: bool) -> None:
        self.forward_events = forward_events
        self.log_to_driver = log_to_driver
        self.driver_present = True  # False once the driver is gone: nothing is sent to it
        self.events: list[TrialEvent] = []
        self.console_out: list[TrialOutput] = []
        self.event_seq = 0  # TrialEvents sent (ExperimentFinished tells the driver)
        self.output_batches = 0  # TrialOutputBatch sent
        self.tick_pending = False
        # per trial, its current run and the TrialOutput messages received from it (one entry a trial: a run
        # whose process died never sends its end, and the next run's first chunk replaces it)
        self._chunks: dict[str, tuple[int, int]] = {}
        self._late: dict[tuple[str, int], int] = {}  # an ended run's TrialOutput messages still on the way
        self._late_since: float | None = None  # when the end first waited for them

    def event(self, kind: EventType, trial: TrialSnapshot, result: dict[str, Any] | None = None,
              checkpoint: str | None = None) -> list[Command]:
        if not self.forward_events:
            return []
        self.events.append(TrialEvent(kind, trial, result, checkpoint))
        return self._arm()  # (a full batch is sent once the message that filled it is handled: ``flush_full``)

    def flush_full(self) -> list[Command]:
        """Send a full batch now. Called between messages, never inside one: a result event must still be
        here when its decision is held for the driver's answer (``ask_answer``), later in the same message."""
        return self.flush() if len(self.events) >= EVENTS_BATCH else []

    def output(self, msg: TrialOutput) -> list[Command]:
        """A trial's printed lines sent while it ran (already rate-bounded in its process): sent on with
        the events, and counted, so that the end can wait for those that its ``TrialEnded`` overtook."""
        if not self.log_to_driver:
            return []
        key = (msg.trial_id, msg.run_id)
        late = self._late.get(key)
        if late is None:
            run, n = self._chunks.get(msg.trial_id, (msg.run_id, 0))
            self._chunks[msg.trial_id] = (msg.run_id, n + 1 if run == msg.run_id else 1)
        elif late > 1:
            self._late[key] = late - 1
        else:
            del self._late[key]
        return self._pass(msg)

    def run_ended(self, trial_id: str, run_id: int, last: TrialOutput | None, sent: int) -> list[Command]:
        """A run's end: ``last``, its final lines (in the end's message), and ``sent``, how many
        ``TrialOutput`` it sent before; those not received yet are awaited (``output_due``)."""
        if not self.log_to_driver:
            return []
        run, got = self._chunks.pop(trial_id, (run_id, 0))
        missing = sent - (got if run == run_id else 0)
        if missing > 0:
            self._late[(trial_id, run_id)] = missing
        return self._pass(last) if last is not None else []

    @property
    def awaiting_output(self) -> bool:
        """Some ended run's printed lines are still on the way."""
        return bool(self._late)

    def output_due(self, now: float) -> bool:
        """Whether the experiment's end waits for lines still on the way: at most ``OUTPUT_WAIT_S`` from
        when it first would have ended (a chunk the transport lost must not hold the end for ever)."""
        if not self._late or not self.driver_present:
            self._late_since = None
            return False
        if self._late_since is None:
            self._late_since = now
        return now - self._late_since < OUTPUT_WAIT_S

    def _pass(self, msg: TrialOutput) -> list[Command]:
        self.console_out.append(msg)
        return self._arm()

    def ask_answer(self, trial_id: str, run_id: int, batch: int) -> bool:
        """Mark the trial's latest result event as needing the driver's ``CallbackAnswer``."""
        for i in range(len(self.events) - 1, -1, -1):
            ev = self.events[i]
            if ev.kind is EventType.RESULT and ev.trial.trial_id == trial_id:
                self.events[i] = replace(ev, answer_run=run_id, answer_batch=batch)
                return True
        return False

    def _arm(self) -> list[Command]:
        if self.tick_pending:
            return []
        self.tick_pending = True
        return [WakeAfter(EVENTS_DELAY_S, Tick.EVENTS)]

    def tick(self) -> list[Command]:
        self.tick_pending = False
        return self.flush()

    def flush(self) -> list[Command]:
        out: list[Command] = []
        if self.events and self.driver_present:
            self.event_seq += 1
            out.append(Send(DRIVER, TrialEvents(self.event_seq, tuple(self.events))))
        self.events = []
        if self.console_out and self.driver_present:
            self.output_batches += 1
            out.append(Send(DRIVER, TrialOutputBatch(tuple(self.console_out))))
        self.console_out = []
        return out


def progress_report(spec: ExperimentSpec, table: TrialTable, where: dict[str, str],
                    elapsed_s: float) -> ExperimentProgress:
    """The live table's message: status counts, the best value, the rows shown."""
    metric, mode = spec.metric, spec.mode
    counts = {s.value: n for s in TrialStatus if (n := table.count(s))}  # the table's status index
    best, best_trial = None, None
    for rec in table.trials.values():
        value = rec.last_result.get(metric) if metric else None
        if isinstance(value, (int, float)) and value == value and (
                best is None or (value < best if mode == "min" else value > best)):
            best, best_trial = value, rec.trial_id
    chosen, hidden = choose_rows(table.trials.values(), spec.max_progress_rows, metric, mode)
    trainable = spec.trainable_name
    rows = tuple(ProgressRow(rec.trial_id, rec.status, _short(rec.config), rec.iteration,
                             last.get(metric) if metric else None,
                             str(last.get("member") or where.get(rec.trial_id) or ""),
                             error_summary(rec.error, rec.traceback) if rec.error else None,
                             trial_name(rec.trial_id, trainable, rec.config, rec.name))
                 for rec in chosen for last in (rec.last_result,))
    return ExperimentProgress(counts, rows, elapsed_s, metric, best, best_trial, hidden)


_SCALARS = (int, float, str, bool)


def _short(config: dict[str, Any]) -> dict[str, Any]:
    """Scalar config values only (of the first six), for the progress table."""
    items = config.items() if len(config) <= 6 else itertools.islice(config.items(), 6)
    return {k: v for k, v in items if isinstance(v, _SCALARS)}


__all__ = ["EVENTS_DELAY_S", "OUTPUT_WAIT_S", "DriverFeed", "choose_rows", "error_summary", "progress_report"]
