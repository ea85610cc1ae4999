"""Per-trial result files: ``result.json`` (one JSON object per line) and ``progress.csv``.

``result.json`` is the source of truth; ``progress.csv`` is a convenience view rebuilt from it when
needed. CSV header choice: it is fixed by the first row written; when a later row brings new keys
the whole CSV is rewritten with the extended header (new columns at the end, earlier rows empty
there), so the file is always a valid rectangular CSV. Nested dicts become ``a/b`` columns.

On local disk rows are appended as they come. Object stores cannot append, so rows are buffered and
the objects rewritten whole at most every ``flush_interval`` seconds (and on ``flush``/``close``).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from storage._context import StorageContext
from storage._errors import StorageError
from storage._io import dumps, read_bytes, write_bytes
from storage._layout import ExperimentLayout
from storage._retry import retrying

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


def flatten(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts to ``a/b`` keys, for CSV columns."""
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)):
        return str(value)
    return dumps(value)


def _columns(flat_rows: Iterable[dict[str, Any]], start: list[str] | None = None) -> list[str]:
    columns = list(start or [])
    seen = set(columns)
    for row in flat_rows:
        for key in row:
            if key not in seen:
                seen.add(key)
                columns.append(key)
    return columns


def _csv_text(columns: list[str], flat_rows: Iterable[dict[str, Any]], header: bool) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(columns)
    for row in flat_rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


class ResultWriter:
    """Writes one trial's rows; owned by a single controller thread (not thread-safe)."""

    def __init__(
        self,
        ctx: StorageContext,
        layout: ExperimentLayout,
        trial_id: str,
        flush_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if flush_interval < 0:
            raise ValueError(f"flush_interval must be >= 0 seconds, got {flush_interval!r}")
        self._ctx = ctx
        self._layout = layout
        self._trial_id = trial_id
        self._result_path = layout.result_file(trial_id)
        self._progress_path = layout.progress_file(trial_id)
        self._flush_interval = flush_interval
        self._clock = clock
        self._append_mode = ctx.is_local
        self._loaded = False
        self._closed = False
        self._columns: list[str] = []
        self._rows: list[dict[str, Any]] = []  # object-store mode only: everything, for rewrites
        self._dirty = False
        self._last_flush = -math.inf

    @property
    def url(self) -> str:
        return self._ctx.uri(self._result_path)

    # -- public API -------------------------------------------------------------------------------
    def append(self, rows: list[dict[str, Any]]) -> None:
        """Record rows; on local disk they are written now, elsewhere when a flush is due."""
        self._check_open()
        rows = list(rows)
        for row in rows:
            if not isinstance(row, dict):
                raise TypeError(f"result rows must be dicts, got {type(row).__name__} for trial "
                                f"{self._trial_id!r}")
        if not rows:
            return
        self._load()
        if self._append_mode:
            self._append_local(rows)
        else:
            self._rows.extend(dict(row) for row in rows)  # copies: callers may reuse their dicts
            self._dirty = True
            self.maybe_flush()

    def maybe_flush(self) -> None:
        """Flush if ``flush_interval`` has passed since the last flush (call it from a periodic tick)."""
        if self._dirty and self._clock() - self._last_flush >= self._flush_interval:
            self.flush()

    def truncate(self, max_iteration: int) -> None:
        """Forget rows with ``training_iteration > max_iteration``, in storage too (trial rewound)."""
        self._check_open()
        self._load()

        def keep(row: dict[str, Any]) -> bool:
            value = row.get(ITERATION_KEY)
            return not isinstance(value, (int, float)) or value <= max_iteration

        if self._append_mode:
            rows = read_results(self._ctx, self._layout, self._trial_id)
            kept = [row for row in rows if keep(row)]
            if len(kept) != len(rows):
                self._rewrite(kept)
        else:
            kept = [row for row in self._rows if keep(row)]
            if len(kept) != len(self._rows):
                self._rows = kept
                self._dirty = True
                self.flush()

    def flush(self) -> None:
        """Make every appended row durable in storage."""
        if not self._append_mode and self._dirty:
            self._rewrite(self._rows)
            self._dirty = False
        self._last_flush = self._clock()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True

    # -- internals ----------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"result writer for trial {self._trial_id!r} at {self.url} is closed: "
                               "create a new ResultWriter to write more rows", url=self.url)

    def _load(self) -> None:
        """Pick up rows a previous controller wrote, repairing a torn tail left by a crash."""
        if self._loaded:
            return
        self._loaded = True
        ctx = self._ctx
        try:
            data = read_bytes(ctx, self._result_path, what="reading results")
        except FileNotFoundError:
            data = b""
        rows = _parse_lines(data, self.url)
        self._columns = _columns(flatten(row) for row in rows)
        if not self._append_mode:
            self._rows = rows
            return
        torn = bool(data) and not data.endswith(b"\n")
        if torn or not self._csv_matches(len(rows)):
            self._rewrite(rows)

    def _csv_matches(self, n_rows: int) -> bool:
        try:
            data = read_bytes(self._ctx, self._progress_path, what="reading progress")
        except FileNotFoundError:
            return n_rows == 0
        if data and not data.endswith(b"\n"):
            return False
        records = list(csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))))
        if not records:
            return n_rows == 0
        return records[0] == self._columns and len(records) - 1 == n_rows

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        flat = [flatten(row) for row in rows]
        self._columns = _columns(flat, self._columns)
        body = "".join(dumps(row) + "\n" for row in rows).encode("utf-8")
        write_bytes(self._ctx, self._result_path, body, what="writing results")
        csv_text = _csv_text(self._columns, flat, header=bool(self._columns))
        write_bytes(self._ctx, self._progress_path, csv_text.encode("utf-8"), what="writing progress")

    def _append_local(self, rows: list[dict[str, Any]]) -> None:
        lines = "".join(dumps(row) + "\n" for row in rows)
        flat = [flatten(row) for row in rows]
        new_columns = _columns(flat, self._columns)
        path = self._result_path

        def append_lines() -> None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(lines)

        retrying(append_lines, what="appending results", url=self.url)
        if new_columns != self._columns:
            # New keys: rewrite the CSV with the wider header (result.json already holds every row).
            self._columns = new_columns
            all_rows = read_results(self._ctx, self._layout, self._trial_id)
            text = _csv_text(self._columns, (flatten(r) for r in all_rows), header=True)
            write_bytes(self._ctx, self._progress_path, text.encode("utf-8"), what="writing progress")
            return
        csv_lines = _csv_text(self._columns, flat, header=False)
        progress = self._progress_path

        def append_csv() -> None:
            with open(progress, "a", encoding="utf-8") as handle:
                handle.write(csv_lines)

        retrying(append_csv, what="appending progress", url=self._ctx.uri(progress))
