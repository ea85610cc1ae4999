"""What the per-trial history writers share: one file, appended locally, rewritten elsewhere.

On local disk rows are appended as they come. Object stores cannot append, so a writer keeps what
it needs in memory and rewrites the object whole at most every ``flush_interval`` seconds (and on
``flush``/``close``). Subclasses say how a rewrite is done (``_write_buffer``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from storage._context import StorageContext
from storage._errors import StorageError


class TrialFileWriter:
    """One trial's file; owned by a single controller thread (not thread-safe)."""

    what = "history"

    def __init__(self, ctx: StorageContext, trial_id: str, path: str, flush_interval: float,
                 clock: Callable[[], float]) -> None:
        if flush_interval < 0:
            raise ValueError(f"flush_interval must be >= 0 seconds, got {flush_interval!r}")
        self._ctx = ctx
        self._trial_id = trial_id
        self._path = path
        self._flush_interval = flush_interval
        self._clock = clock
        self._append_mode = ctx.is_local
        self._loaded = False
        self._closed = False
        self._dirty = False  # object-store mode: memory holds rows the object does not
        self._last_flush = -math.inf

    @property
    def url(self) -> str:
        return self._ctx.uri(self._path)

    def _write_buffer(self) -> None:
        """Object-store mode: rewrite the object from memory."""
        raise NotImplementedError

    def maybe_flush(self) -> None:
        """Flush if ``flush_interval`` has passed since the last flush (call it from a periodic tick)."""
        if self._dirty and self._clock() - self._last_flush >= self._flush_interval:
            self.flush()

    def flush(self) -> None:
        """Make every appended row durable in storage."""
        if not self._append_mode and self._dirty:
            self._write_buffer()
            self._dirty = False
        self._last_flush = self._clock()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"{self.what} writer for trial {self._trial_id!r} at {self.url} is closed: "
                               f"create a new {type(self).__name__} to write more rows", url=self.url)

    def _rows(self, rows: Any) -> list[dict[str, Any]]:
        """The rows to append, checked: an open writer, and dicts only (a row of another type would
        be written as garbage and break every later read)."""
        self._check_open()
        rows = list(rows)
        for row in rows:
            if not isinstance(row, dict):
                raise TypeError(f"result rows must be dicts, got {type(row).__name__} for trial "
                                f"{self._trial_id!r}")
        return rows


def rewound_length(iterations: list[Any], max_iteration: int, lineage_only: bool = False) -> int:
    """How many rows a rewind to ``max_iteration`` keeps: all but the trailing ones past it, back to the
    first row of their lineage at most. A PBT clone's rows go on from its source's checkpoint after the
    trial's own (a row whose iteration does not follow the one before begins the clone's lineage), and
    rewinding the clone's run never drops the trial's own rows. ``lineage_only``: the rows past it are
    dropped only if they begin a lineage of their own (else they are the trial's own, kept)."""
    n = len(iterations)
    while n and isinstance(iterations[n - 1], (int, float)) and iterations[n - 1] > max_iteration:
        n -= 1
        before = iterations[n - 1] if n else None
        if isinstance(before, (int, float)) and before != iterations[n] - 1:
            return n  # the row just dropped began its lineage
    return len(iterations) if lineage_only else n


__all__ = ["TrialFileWriter", "rewound_length"]
