"""The trials' ``result.json`` and ``progress.csv`` on the simulator's store (``sim_store``): the same
files, written more cheaply.

``DeferredHistory`` stands in for the ``result.json`` and ``progress.csv`` writers: it keeps a copy of
each batch of rows (and each truncation) and the file holds what the real writer (``JsonLinesWriter``,
``CsvWriter``) makes of them, run when the file is first read. It writes when the real writer would
(the same flush interval, clock and ``flush`` calls). ``defer_histories`` swaps the built-in JSON and
CSV loggers for ones writing through it; the CSV logger takes the JSON logger's copy of the same rows
and leaves the config out when the file is made, as the real one leaves it out of each row.
"""

from __future__ import annotations

import copy
import itertools
import marshal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from io import BytesIO
from typing import Any

from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from actors._driver.loggers import (
    CONTROLLER_FLUSH_INTERVAL,
    CSVLoggerCallback,
    JsonLoggerCallback,
    LoggerCallback,
    _no_config,
)
from actors._engine.trial import TrialSnapshot
from actors.testing.sim_store import SimMemoryFS, _Deferred, plain_copy, store
from storage import CsvWriter, ExperimentLayout, JsonLinesWriter, StorageContext
from storage._io import read_bytes
from storage._trial_file import TrialFileWriter

Op = tuple[str, Any]  # ("append" or "append_without_config", a copy of the rows) or ("truncate", max_iteration)


def _copy(rows: list[dict[str, Any]]) -> Any:
    """The rows as they are now, whatever the caller changes later."""
    blob = plain_copy(rows)
    if blob is not None:
        return blob
    try:  # not plain values only (numpy scalars, objects)
        return copy.deepcopy(rows)
    except Exception:  # cannot be copied: the values as they are (json/csv would str() them)
        return [dict(r) for r in rows]


def _rows(copied: Any) -> list[dict[str, Any]]:
    return marshal.loads(copied) if isinstance(copied, bytes) else copy.deepcopy(copied)


class _Replayed(MemoryFile):
    """A history file whose bytes are what a real writer makes of ``base`` and ``ops``, on first read."""

    def __init__(self, fs: MemoryFileSystem, real: type[TrialFileWriter], path_of: Callable[..., str],
                 base: bytes | None, ops: list[Op]) -> None:
        super().__init__(fs, None, None)
        # ``ops`` is the writer's own list, which only grows: the file holds its first ``upto``
        self._todo: tuple[Any, ...] | None = (real, path_of, base, ops)
        self.upto = len(ops)

    @property
    def pending(self) -> bool:
        """Not read yet: a later flush may just move ``upto`` on."""
        return self._todo is not None

    def _encode(self) -> None:
        if self._todo is None:
            return
        (real, path_of, base, ops), self._todo = self._todo, None
        ops = ops[:self.upto]
        fs = MemoryFileSystem(global_store=False, skip_instance_cache=True)
        ctx = StorageContext("memory://replay")
        ctx.use_filesystem(fs)
        layout = ExperimentLayout(ctx, "replay")
        path = path_of(layout, "t")
        if base is not None:
            fs.pipe_file(path, base)
        writer: Any = real(ctx, layout, "t", flush_interval=float("inf"))
        for op, arg in ops:
            if op == "append":
                writer.append(_rows(arg))
            elif op == "append_without_config":  # (CSVLoggerCallback's rows, the config left out)
                writer.append([_no_config(r) for r in _rows(arg)])
            else:
                writer.truncate(arg)
        writer.close()
        BytesIO.write(self, fs.cat_file(path))
        BytesIO.seek(self, 0)

    getbuffer = _Deferred.getbuffer
    getvalue = _Deferred.getvalue
    seek = _Deferred.seek
    read = _Deferred.read


class DeferredHistory(TrialFileWriter):
    """A trial's ``result.json`` or ``progress.csv`` on the simulator's store (see the module's docstring)."""

    def __init__(self, real: type[JsonLinesWriter] | type[CsvWriter], path_of: Callable[..., str],
                 ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> None:
        # as the controller's loggers open theirs
        super().__init__(ctx, trial_id, path_of(layout, trial_id), CONTROLLER_FLUSH_INTERVAL, time.monotonic)
        self.what = real.what
        self._real, self._path_of = real, path_of
        self._base: bytes | None = None  # the file as a previous run left it
        self._ops: list[Op] = []
        self._file: _Replayed | None = None  # the object last put in the store

    def append(self, rows: list[dict[str, Any]], copied: Any = None, without_config: bool = False) -> None:
        """``copied``: ``_copy(rows)`` taken already (by the JSON logger, for the same rows);
        ``without_config``: the file holds each row without its ``config`` (``progress.csv``)."""
        rows = self._rows(rows)
        if not rows:
            return
        self._load()
        self._ops.append(("append_without_config" if without_config else "append",
                          _copy(rows) if copied is None else copied))
        self._dirty = True
        self.maybe_flush()

    def truncate(self, max_iteration: int) -> None:
        """Rewritten at once, as the real writer does when rows go (also when none do: same rows)."""
        self._check_open()
        self._load()
        self._ops.append(("truncate", max_iteration))
        self._dirty = True
        self.flush()

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        fs = self._ctx.fs
        if isinstance(fs, SimMemoryFS) and self._path not in fs.store and self._path not in fs.pseudo_dirs:
            self._base = None  # nothing there yet (most trials): no read, no FileNotFoundError to catch
            return
        try:
            self._base = read_bytes(self._ctx, self._path, what=f"reading {self.what}")
        except FileNotFoundError:
            self._base = None

    def _write_buffer(self) -> None:
        fs, path = self._ctx.fs, self._path
        assert isinstance(fs, SimMemoryFS)
        file = self._file
        if file is not None and file.pending and fs.store.get(path) is file:
            # nobody read the object since the last flush: it now ends at the newest op (a flush is
            # the same object rewritten, as before, without building a new one each time)
            file.upto = len(self._ops)
            file.modified = datetime.now(tz=UTC)
            return
        file = self._file = _Replayed(fs, self._real, self._path_of, self._base, self._ops)
        store(self._ctx, fs, path, file, f"writing {self.what}")


class _SimJsonLogger(JsonLoggerCallback):
    """The JSON logger on the simulator's store; the CSV logger called right after it for the same
    rows (``partner``) takes the copy of them it made."""

    partner: _SimCsvLogger | None = None

    def _open(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> Any:
        if not isinstance(ctx.fs, SimMemoryFS):
            return super()._open(ctx, layout, trial_id)
        return DeferredHistory(JsonLinesWriter, ExperimentLayout.result_file, ctx, layout, trial_id)

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        w = self._writer(trial.trial_id)
        if not isinstance(w, DeferredHistory):
            w.append(results)
            return
        copied = _copy(results)
        w.append(results, copied)
        if self.partner is not None:
            self.partner.handed = (results, copied)


class _SimCsvLogger(CSVLoggerCallback):
    handed: tuple[list[dict[str, Any]], Any] | None = None  # (rows, their copy) from the JSON logger

    def _open(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> Any:
        if not isinstance(ctx.fs, SimMemoryFS):
            return super()._open(ctx, layout, trial_id)
        return DeferredHistory(CsvWriter, ExperimentLayout.progress_file, ctx, layout, trial_id)

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        w = self._writer(trial.trial_id)
        handed, self.handed = self.handed, None
        if not isinstance(w, DeferredHistory):
            super().log_trial_results(iteration, trial, results)
            return
        # the config is left out when the file is made (the real logger leaves it out here)
        w.append(results, handed[1] if handed is not None and handed[0] is results else None, without_config=True)


def defer_histories(loggers: list[LoggerCallback], ctx: StorageContext, layout: ExperimentLayout) -> None:
    """Swap the built-in JSON and CSV loggers in ``loggers`` (not a user's subclass of them) for ones
    whose files are encoded when read; each is set up as the one it replaces was."""
    swap: dict[type, type[LoggerCallback]] = {JsonLoggerCallback: _SimJsonLogger, CSVLoggerCallback: _SimCsvLogger}
    for i, lg in enumerate(loggers):
        sim = swap.get(type(lg))
        if sim is not None:
            loggers[i] = sim()
            loggers[i].setup(ctx, layout)
    for first, then in itertools.pairwise(loggers):
        # called one right after the other (ControllerLoggers): nothing can change the rows between
        if isinstance(first, _SimJsonLogger) and isinstance(then, _SimCsvLogger):
            first.partner = then


__all__ = ["DeferredHistory", "defer_histories"]
