"""``result.json``: one trial's history, one JSON object per line, the source of truth.

``Tuner.restore`` and ``Result.metrics_history`` read it back; ``progress.csv``
(``storage._progress_csv``) is a view of the same rows. On local disk rows are appended as they
come. Object stores cannot append, so rows are buffered and the object rewritten whole at most
every ``flush_interval`` seconds (and on ``flush``/``close``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from storage._context import StorageContext
from storage._io import dumps_result, read_bytes, write_bytes
from storage._layout import ExperimentLayout
from storage._progress_csv import CsvWriter
from storage._retry import retrying
from storage._trial_file import TrialFileWriter, rewound_length

_log = logging.getLogger("storage")
ITERATION_KEY = "training_iteration"


def _parse_lines(data: bytes, url: str) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; a torn last line (crash mid-write) is dropped silently."""
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                _log.debug("ignoring torn last line of %s", url)
            else:
                _log.warning("skipping unreadable line %d of %s", number, url)
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def read_results(ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> list[dict[str, Any]]:
    """Every result row reported by a trial, oldest first; [] if it has reported nothing."""
    path = layout.result_file(trial_id)
    try:
        data = read_bytes(ctx, path, what="reading results")
    except FileNotFoundError:
        return []
    return _parse_lines(data, ctx.uri(path))


class JsonLinesWriter(TrialFileWriter):
    """Writes one trial's ``result.json``; owned by a single controller thread (not thread-safe)."""

    what = "result"

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str,
                 flush_interval: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(ctx, trial_id, layout.result_file(trial_id), flush_interval, clock)
        self._layout = layout
        # object-store mode only: every row as its JSON line, and its training_iteration (for
        # truncate), so a rewrite joins lines instead of encoding the whole history again
        self._lines: list[str] = []
        self._iterations: list[Any] = []

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Record rows; on local disk they are written now, elsewhere when a flush is due."""
        rows = self._rows(rows)
        if not rows:
            return
        self._load()
        if self._append_mode:
            lines = "".join(dumps_result(row) + "\n" for row in rows)
            path = self._path

            def append_lines() -> None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write(lines)

            retrying(append_lines, what="appending results", url=self.url)
        else:
            self._keep(rows)  # encoded now: callers may reuse their dicts
            self._dirty = True
            self.maybe_flush()

    def rows(self) -> list[dict[str, Any]]:
        """Every row written so far (read back on local disk)."""
        self._load()
        if self._append_mode:
            return read_results(self._ctx, self._layout, self._trial_id)
        return _parse_lines("".join(self._lines).encode("utf-8"), self.url)

    def truncate(self, max_iteration: int, lineage_only: bool = False) -> None:
        """Forget the last rows with ``training_iteration > max_iteration``, in storage too (trial rewound).

        Only the trailing ones of the last lineage: a PBT clone's rows go on from its source's checkpoint
        after its own higher iterations (as in Ray), and a rewind of the clone's run keeps those earlier
        rows (``storage._trial_file.rewound_length``, also for ``lineage_only``)."""
        self._check_open()
        self._load()
        if self._append_mode:
            rows = read_results(self._ctx, self._layout, self._trial_id)
            n = rewound_length([row.get(ITERATION_KEY) for row in rows], max_iteration, lineage_only)
            if n != len(rows):
                self._rewrite(rows[:n])
        else:
            n = rewound_length(self._iterations, max_iteration, lineage_only)
            if n != len(self._lines):
                self._lines, self._iterations = self._lines[:n], self._iterations[:n]
                self._dirty = True
                self.flush()

    # -- internals ----------------------------------------------------------------------------------
    def _write_buffer(self) -> None:
        write_bytes(self._ctx, self._path, "".join(self._lines).encode("utf-8"), what="writing results")

    def _keep(self, rows: list[dict[str, Any]]) -> None:
        self._lines.extend(dumps_result(row) + "\n" for row in rows)
        self._iterations.extend(row.get(ITERATION_KEY) for row in rows)

    def _load(self) -> None:
        """Pick up rows a previous controller wrote, repairing a torn tail left by a crash."""
        if self._loaded:
            return
        self._loaded = True
        try:
            data = read_bytes(self._ctx, self._path, what="reading results")
        except FileNotFoundError:
            data = b""
        rows = _parse_lines(data, self.url)
        if not self._append_mode:
            self._keep(rows)
        elif data and not data.endswith(b"\n"):
            self._rewrite(rows)

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        body = "".join(dumps_result(row) + "\n" for row in rows).encode("utf-8")
        write_bytes(self._ctx, self._path, body, what="writing results")


class ResultWriter:
    """Both files of one trial in step: ``result.json`` and the ``progress.csv`` view of it.

    The engine's logger callbacks write each file on its own; this pairing is for repairs (a
    restore truncating a rewound trial) and tools. On first use it rebuilds a CSV that a crash
    left out of step with ``result.json`` (killed between the two appends).
    """

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str,
                 flush_interval: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.json = JsonLinesWriter(ctx, layout, trial_id, flush_interval, clock)
        self.csv = CsvWriter(ctx, layout, trial_id, flush_interval, clock)
        self._checked = False

    @property
    def url(self) -> str:
        return self.json.url

    def _reconcile(self) -> None:
        if self._checked:
            return
        self._checked = True
        rows = self.json.rows()
        if self.csv.row_count != len(rows):
            self.csv.rebuild(rows)

    def append(self, rows: list[dict[str, Any]]) -> None:
        self._reconcile()
        self.json.append(rows)
        self.csv.append(list(rows))

    def maybe_flush(self) -> None:
        self.json.maybe_flush()
        self.csv.maybe_flush()

    def truncate(self, max_iteration: int, lineage_only: bool = False) -> None:
        self._reconcile()
        self.json.truncate(max_iteration, lineage_only)
        self.csv.truncate(max_iteration, lineage_only)

    def flush(self) -> None:
        self.json.flush()
        self.csv.flush()

    def close(self) -> None:
        self.json.close()
        self.csv.close()
