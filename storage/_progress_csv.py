"""``progress.csv``: one trial's history as a rectangular CSV, for spreadsheets and pandas.

The header is fixed by the first row; a row that brings new keys makes the whole file be rewritten
with the wider header (new columns at the end, earlier rows empty there), so the file is always a
valid CSV. Nested dicts become ``a/b`` columns. The writer never keeps a history of dicts: on local
disk it appends lines and only re-reads its own file when the header widens; on object stores
(no append) it keeps the rendered cells and rewrites the object at most every ``flush_interval``.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable
from typing import Any

from storage._context import StorageContext
from storage._io import read_bytes, write_bytes
from storage._layout import ExperimentLayout
from storage._retry import retrying
from storage._trial_file import TrialFileWriter, rewound_length

ITERATION_KEY = "training_iteration"


def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts to ``a/b`` keys, as Ray 2.60's ``flatten_dict`` makes its CSV columns: the flat
    keys first, then each level's nested keys after them (``{"n": {"d": {"x": 1}, "b": 2}}`` gives
    ``n/b`` before ``n/d/x``); an empty nested dict makes no column. A row without any is returned as it is."""
    if not any(isinstance(v, dict) for v in row.values()):
        return row
    flat: dict[str, Any] = {}
    nested: list[tuple[str, dict[str, Any]]] = []
    for key, value in row.items():
        if isinstance(value, dict):
            nested.append((key, value))
        else:
            flat[key] = value
    while nested:
        level, nested = nested, []
        for name, inner in level:
            for key, value in inner.items():
                if isinstance(value, dict):
                    nested.append((f"{name}/{key}", value))
                else:
                    flat[f"{name}/{key}"] = value
    return flat


def _cell(value: Any) -> str:
    """A value as Ray's ``csv.DictWriter`` writes it: ``str(value)``, empty for None (an array as
    ``[0 1 2]``, a tuple as ``(1, 'c')``, an object by its ``str``)."""
    if type(value) is str:
        return value  # type: ignore[no-any-return]
    return "" if value is None else str(value)


def columns_of(flat_rows: Iterable[dict[str, Any]], start: list[str] | None = None) -> list[str]:
    """``start`` extended by every key of ``flat_rows`` not in it yet, in first-seen order."""
    columns = list(start or [])
    seen = set(columns)
    for row in flat_rows:
        for key in row:
            if key not in seen:
                seen.add(key)
                columns.append(key)
    return columns


def _text(records: Iterable[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(records)
    return buffer.getvalue()


def _parse(data: bytes) -> list[list[str]]:
    """Records of a CSV file; a torn last line (crash mid-append) is dropped."""
    text = data.decode("utf-8", errors="replace")
    if text and not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    return list(csv.reader(io.StringIO(text)))


class CsvWriter(TrialFileWriter):
    """Writes one trial's ``progress.csv``; owned by a single controller thread (not thread-safe)."""

    what = "progress"

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str,
                 flush_interval: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(ctx, trial_id, layout.progress_file(trial_id), flush_interval, clock)
        self._columns: list[str] = []
        self._records: list[list[str]] = []  # object-store mode only: every data record, for rewrites
        self._body: str | None = None  # object-store mode: ``_records`` as CSV text, while it is known
        self._count = 0  # data records in the file (local) or in memory (object store)

    @property
    def row_count(self) -> int:
        self._load()
        return self._count

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Record rows; on local disk they are written now, elsewhere when a flush is due."""
        self._check_open()
        if not rows:
            return
        self._load()
        flat = [flatten(row) for row in rows]
        columns = columns_of(flat, self._columns)
        widened = columns != self._columns
        records = [[_cell(f.get(c)) for c in columns] for f in flat]
        if not self._append_mode:
            if widened:
                self._records = [r + [""] * (len(columns) - len(r)) for r in self._records]
                self._body = None
            elif self._body is not None:
                self._body += _text(records)
            self._columns = columns
            self._records += records
            self._count = len(self._records)
            self._dirty = True
            self.maybe_flush()
            return
        if widened:
            # New keys: rewrite the file with the wider header; earlier rows get empty cells there.
            old = self._read_records()
            self._columns = columns
            self._rewrite([r + [""] * (len(columns) - len(r)) for r in old] + records)
            return
        text = _text(records)
        path = self._path

        def append_lines() -> None:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(text)

        retrying(append_lines, what="appending progress", url=self.url)
        self._count += len(records)

    def truncate(self, max_iteration: int, lineage_only: bool = False) -> None:
        """Forget the last rows with ``training_iteration > max_iteration`` (the trial was rewound; a PBT
        clone's earlier rows past it are kept, see ``JsonLinesWriter.truncate``)."""
        self._check_open()
        self._load()
        records = self._records if not self._append_mode else self._read_records()
        at = self._columns.index(ITERATION_KEY) if ITERATION_KEY in self._columns else -1

        def iteration(record: list[str]) -> float | None:
            try:
                return None if at < 0 else float(record[at])
            except (IndexError, ValueError):
                return None

        kept = records[:rewound_length([iteration(r) for r in records], max_iteration, lineage_only)]
        if len(kept) == len(records):
            return
        if self._append_mode:
            self._rewrite(kept)
        else:
            self._records, self._count, self._dirty, self._body = kept, len(kept), True, None
            self.flush()

    def rebuild(self, rows: list[dict[str, Any]]) -> None:
        """Replace the whole file by ``rows`` (a restore found it out of step with result.json)."""
        self._check_open()
        self._loaded = True
        flat = [flatten(row) for row in rows]
        self._columns = columns_of(flat)
        records = [[_cell(f.get(c)) for c in self._columns] for f in flat]
        if self._append_mode:
            self._rewrite(records)
        else:
            self._records, self._count, self._dirty, self._body = records, len(records), True, None
            self.flush()

    # -- internals ----------------------------------------------------------------------------------
    def _write_buffer(self) -> None:
        if self._body is None:
            self._body = _text(self._records)
        header = _text([self._columns]) if self._columns else ""
        write_bytes(self._ctx, self._path, (header + self._body).encode("utf-8"), what="writing progress")

    def _read_all(self) -> tuple[bytes, list[list[str]]]:
        try:
            data = read_bytes(self._ctx, self._path, what="reading progress")
        except FileNotFoundError:
            return b"", []
        return data, _parse(data)

    def _read_records(self) -> list[list[str]]:
        return self._read_all()[1][1:]

    def _load(self) -> None:
        """Pick up what a previous controller wrote, dropping a line a crash tore."""
        if self._loaded:
            return
        self._loaded = True
        data, records = self._read_all()
        self._columns = records[0] if records else []
        body = records[1:]
        self._count = len(body)
        if not self._append_mode:
            self._records, self._body = body, None
        elif data and not data.endswith(b"\n"):
            self._rewrite(body)

    def _rewrite(self, records: list[list[str]]) -> None:
        self._write(records)
        self._count = len(records)

    def _write(self, records: list[list[str]]) -> None:
        header = [self._columns] if self._columns else []
        write_bytes(self._ctx, self._path, _text(header + records).encode("utf-8"), what="writing progress")


__all__ = ["CsvWriter", "columns_of", "flatten"]
