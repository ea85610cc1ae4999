"""The simulator's storage: fsspec's ``memory://`` store, written more cheaply, with the same files.

A simulated experiment writes a few hundred objects (params, result histories rewritten at each
state write, about one experiment state per simulated second). Through fsspec's
``MemoryFileSystem.pipe_file`` each write is an ``open()`` and a walk over every parent (~40 us),
and each experiment state is ~25 KB of JSON (150-250 us to encode, most of a simulated run's state
writes). Neither is what the simulation is about, so here:

* ``SimMemoryFS`` is fsspec's memory filesystem (the same global store: ``fit()``'s readers, the
  ``ResultGrid``, ``Tuner.restore`` and ``audition`` read it with fsspec's own class) whose
  ``pipe_file`` stores the object directly, with the same checks (no file above it, not a directory).
* ``SimStateWriter`` is ``storage.StateWriter`` (the same versions, pointer and pruning) that keeps a
  state as ``marshal`` bytes, an exact copy of its plain values taken at write time, and encodes the
  JSON the first time the object is read. The bytes read are those a real run writes: a restore of an
  aborted simulation, or a fault test that reads storage, sees exactly the real state. A state holding
  anything but plain values (``marshal`` refuses subclasses such as numpy scalars) is encoded at once.
  One difference: JSON lists a set's elements in the set's iteration order, which the copy keeps
  unless two elements collide in the set's hash table (the order is arbitrary in a real run too).
* ``SimExperimentIO`` writes each trial's ``params.json`` the same way (``put_json``).
* ``DeferredHistory`` stands in for the ``result.json`` and ``progress.csv`` writers: it keeps a copy
  of each batch of rows (and each truncation) and the file holds what the real writer
  (``JsonLinesWriter``, ``CsvWriter``) makes of them, run when the file is first read. It writes when
  the real writer would (the same flush interval, clock and ``flush`` calls).
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

from actors._driver.loggers import CSVLoggerCallback, JsonLoggerCallback, LoggerCallback, _no_config
from actors._engine.lifecycle import TrialRecord
from actors._engine.trial import TrialSnapshot
from actors._shell.experiment_io import ExperimentIO
from storage import CsvWriter, ExperimentLayout, JsonLinesWriter, StateWriter, StorageContext
from storage._io import dumps, read_bytes
from storage._retry import retrying
from storage._trial_file import TrialFileWriter


class SimMemoryFS(MemoryFileSystem):
    """``memory://`` with a direct ``pipe_file``; the store is fsspec's (shared by every instance)."""

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode != "overwrite" or kwargs:
            super().pipe_file(path, value, mode=mode, **kwargs)
            return
        self._put(self._strip_protocol(path), MemoryFile(self, None, value))

    def _put(self, path: str, file: MemoryFile) -> None:
        """``_open(path, "wb")``'s checks, then commit: a directory or a file above it refuses."""
        if path in self.pseudo_dirs:
            raise IsADirectoryError(path)
        store = self.store
        parent = path
        while len(parent) > 1:
            parent = parent.rsplit("/", 1)[0] if "/" in parent[1:] else ""
            if parent in store:
                raise FileExistsError(parent)
            if not parent:
                break
        file.path = path
        file.commit()


class _Deferred(MemoryFile):
    """A JSON object encoded on its first read, from a ``marshal`` copy of the value made at write time."""

    def __init__(self, fs: MemoryFileSystem, blob: bytes, indent: int | None) -> None:
        super().__init__(fs, None, None)
        self._blob = blob
        self._indent = indent
        self._encoded = False

    def _value(self) -> Any:
        return marshal.loads(self._blob)

    def _encode(self) -> None:
        if not self._encoded:
            self._encoded = True
            BytesIO.write(self, dumps(self._value(), indent=self._indent).encode("utf-8"))
            BytesIO.seek(self, 0)
            del self._blob

    def getbuffer(self) -> memoryview:
        self._encode()
        return BytesIO.getbuffer(self)

    def getvalue(self) -> bytes:
        self._encode()
        return BytesIO.getvalue(self)

    def seek(self, *args: Any) -> int:
        self._encode()
        return BytesIO.seek(self, *args)

    def read(self, *args: Any) -> bytes:
        self._encode()
        return BytesIO.read(self, *args)


class _DeferredState(_Deferred):
    """An experiment state kept as a copy of everything but its trial rows, and a copy of each row
    (an unchanged trial's row copied once, for every state that holds it)."""

    def __init__(self, fs: MemoryFileSystem, blob: bytes, rows: list[bytes]) -> None:
        super().__init__(fs, blob, None)
        self._row_blobs = rows

    def _value(self) -> Any:
        state = marshal.loads(self._blob)
        state["trials"] = [marshal.loads(b) for b in self._row_blobs]  # (the key keeps its place)
        del self._row_blobs
        return state


def put_json(ctx: StorageContext, path: str, value: Any, indent: int | None, what: str) -> bool:
    """Store ``value`` at ``path`` as JSON encoded on its first read; False (nothing stored) unless
    ``ctx`` is the simulator's store and ``value`` holds plain values only: the caller writes it now."""
    fs = ctx.fs
    if not isinstance(fs, SimMemoryFS):  # RunConfig(storage=...) named other storage
        return False
    try:
        blob = marshal.dumps(value)
    except ValueError:  # not plain values only: encode now, as a real run does
        return False
    retrying(lambda: fs._put(path, _Deferred(fs, blob, indent)), what=what, url=ctx.uri(path))
    return True


class SimStateWriter(StateWriter):
    """``StateWriter`` whose files are encoded when read (see the module's docstring). A state's
    trial rows are copied one by one: a row that is the very object of the last state's reuses that
    row's copy (``SimExperimentIO._row`` hands out the same object only while the trial is unchanged;
    a row is never changed after it was written)."""

    def __init__(self, ctx: StorageContext, layout: ExperimentLayout, **kwargs: Any) -> None:
        super().__init__(ctx, layout, **kwargs)
        self._row_copies: dict[str, tuple[dict[str, Any], bytes]] = {}  # trial id -> (row, its copy)

    def _put(self, path: str, value: dict[str, Any], indent: int | None, what: str) -> None:
        if not (self._put_state(path, value, indent, what) or put_json(self.ctx, path, value, indent, what)):
            super()._put(path, value, indent, what)

    def _put_state(self, path: str, value: dict[str, Any], indent: int | None, what: str) -> bool:
        """Store a state (a dict with a ``trials`` list of rows) as ``_DeferredState``; False if
        ``value`` is not one, or is not plain values only."""
        fs, rows = self.ctx.fs, value.get("trials")
        if not isinstance(fs, SimMemoryFS) or indent is not None or type(rows) is not list:
            return False
        copies, kept = self._row_copies, {}
        blobs = []
        try:
            for row in rows:
                trial_id = row["trial_id"]
                last = copies.get(trial_id)
                blob = last[1] if last is not None and last[0] is row else marshal.dumps(row)
                kept[trial_id] = (row, blob)
                blobs.append(blob)
            blob = marshal.dumps(dict(value, trials=None))
        except (ValueError, TypeError, KeyError):  # not plain values only: encoded now, as a real run does
            return False
        self._row_copies = kept
        file = _DeferredState(fs, blob, blobs)
        retrying(lambda: fs._put(path, file), what=what, url=self.ctx.uri(path))
        return True


class SimExperimentIO(ExperimentIO):
    """``ExperimentIO`` on the simulator's store: ``params.json`` is encoded when read (as
    ``storage.write_json`` encodes it), and a state reuses the row of a trial that did not change
    since the last state (the engine replaces a trial's ``config``, ``last_result`` and checkpoint,
    never changes them in place, so the same objects still hold the same values)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rows: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}  # trial id -> (what it shows, row)

    def _row(self, r: TrialRecord) -> dict[str, Any]:
        trial_id = r.trial_id
        shows = (r.status, r.config, r.last_result, r.checkpoint, r.num_failures, r.error, r.traceback,
                 self.logged_iter.get(trial_id, 0), self.max_index.get(trial_id, -1), tuple(r.marks),
                 r.name, r.dirname)
        last = self._rows.get(trial_id)
        if last is not None and last[0] == shows:  # (the same objects, or equal values: the same row)
            return last[1]
        row = super()._row(r)
        self._rows[trial_id] = (shows, row)
        return row

    def write_params(self, rec: TrialRecord) -> None:
        if not put_json(self.ctx, self.layout.params_file(rec.trial_id), rec.config, 2, "writing JSON"):
            super().write_params(rec)


Op = tuple[str, Any]  # ("append" or "append_without_config", a copy of the rows) or ("truncate", max_iteration)


def _copy(rows: list[dict[str, Any]]) -> Any:
    """The rows as they are now, whatever the caller changes later."""
    try:
        return marshal.dumps(rows)
    except ValueError:  # not plain values only (numpy scalars, objects)
        try:
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
        super().__init__(ctx, trial_id, path_of(layout, trial_id), 2.0, time.monotonic)  # the real defaults
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
        retrying(lambda: fs._put(path, file), what=f"writing {self.what}", url=self.url)


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


def forget_tree(ctx: StorageContext) -> None:
    """Delete everything under ``ctx``'s root of the ``memory://`` store, as ``fs.rm(root, recursive=True)``
    does, without reading the files (fsspec's ``rm`` asks each for its size: a deferred one would be encoded)."""
    store, dirs = MemoryFileSystem.store, MemoryFileSystem.pseudo_dirs
    root = MemoryFileSystem._strip_protocol(ctx.root)
    prefix = root.rstrip("/") + "/"
    for path in [p for p in store if p == root or p.startswith(prefix)]:
        del store[path]
    dirs[:] = [d for d in dirs if not (d == root or d.startswith(prefix))]


def use_sim_storage(ctx: StorageContext) -> None:
    """Make ``ctx`` (a ``memory://`` context) write through ``SimMemoryFS``; other storage is left alone."""
    if ctx.is_process_local:
        ctx.use_filesystem(SimMemoryFS())


__all__ = ["DeferredHistory", "SimExperimentIO", "SimMemoryFS", "SimStateWriter", "defer_histories", "forget_tree",
           "put_json", "use_sim_storage"]
