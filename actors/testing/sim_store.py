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
  anything but plain values is encoded at once (``plain_copy``: ``marshal`` would write a numpy scalar,
  which has a buffer, as bytes, so each copy is checked to read back equal).
  One difference: JSON lists a set's elements in the set's iteration order, which the copy keeps
  unless two elements collide in the set's hash table (the order is arbitrary in a real run too).
* ``SimExperimentIO`` writes each trial's ``params.json`` the same way (``put_json``).
* The trials' ``result.json`` and ``progress.csv`` are written the same way: ``sim_history``.
"""

from __future__ import annotations

import atexit
import marshal
import shutil
from io import BytesIO
from typing import Any

from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from actors._engine.lifecycle import TrialRecord
from actors._shell.experiment_io import ExperimentIO
from actors._tempdirs import owned_tempdir
from storage import ExperimentLayout, StateWriter, StorageContext, commit_checkpoint
from storage._checkpoint import write_manifest
from storage._io import dumps, key_sorted
from storage._retry import retrying


class SimMemoryFS(MemoryFileSystem):
    """``memory://`` with a direct ``pipe_file``; the store is fsspec's (shared by every instance)."""

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode != "overwrite" or kwargs:
            super().pipe_file(path, value, mode=mode, **kwargs)
            return
        self._put(self._strip_protocol(path), MemoryFile(self, None, value))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """fsspec's listing; names only (``detail=False``) without asking each file its size, which
        fsspec's own listing does (and which encodes a deferred file): the same names, in order."""
        if detail:
            return list(super().ls(path, detail=True, **kwargs))
        path = self._strip_protocol(path)
        if path in self.store:
            return [path]
        starter = path + "/"
        names: list[str] = []
        dirs: set[str] = set()
        for p2 in (*self.store, *self.pseudo_dirs):  # files, then directories their paths imply
            if p2.startswith(starter):
                rest = p2[len(starter):]
                if "/" not in rest and p2 in self.store:
                    names.append(p2)
                    continue
                child = p2 if "/" not in rest else starter + rest.split("/", 1)[0]
                if child not in dirs:
                    dirs.add(child)
                    names.append(child)
        if not names:
            if path in self.pseudo_dirs:
                return []
            raise FileNotFoundError(path)
        return sorted(names)

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


def plain_copy(value: Any) -> bytes | None:
    """A ``marshal`` copy of ``value`` if it holds plain values only, else None (the caller encodes now).

    ``marshal`` refuses most objects, but writes anything with a buffer (a numpy scalar from a user's
    curve, an array) as the bytes of that buffer, which JSON would then show as ``"b'...'"``: the copy
    must read back equal to the value. (A NaN never compares equal: such values are encoded at once.)
    """
    try:
        blob = marshal.dumps(value)
        same = marshal.loads(blob) == value
    except Exception:  # unmarshallable, or a comparison that raises (a numpy array's)
        return None
    return blob if same is True else None


def store(ctx: StorageContext, fs: SimMemoryFS, path: str, file: MemoryFile, what: str) -> None:
    """Put ``file`` at ``path``, as ``storage``'s writes do (through ``retrying``, which says what
    failed where). The memory store refuses a path the same way every time, so the first attempt is
    made directly and only a refusal goes through ``retrying`` (which meets it again)."""
    try:
        fs._put(path, file)
    except Exception:
        retrying(lambda: fs._put(path, file), what=what, url=ctx.uri(path))


def put_json(ctx: StorageContext, path: str, value: Any, indent: int | None, what: str) -> bool:
    """Store ``value`` at ``path`` as JSON encoded on its first read; False (nothing stored) unless
    ``ctx`` is the simulator's store and ``value`` holds plain values only: the caller writes it now."""
    fs = ctx.fs
    if not isinstance(fs, SimMemoryFS):  # RunConfig(storage=...) named other storage
        return False
    blob = plain_copy(value)
    if blob is None:  # not plain values only: encode now, as a real run does
        return False
    store(ctx, fs, path, _Deferred(fs, blob, indent), what)
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
        for row in rows:
            trial_id = row.get("trial_id") if type(row) is dict else None
            last = copies.get(trial_id) if isinstance(trial_id, str) else None
            copied = last[1] if last is not None and last[0] is row else plain_copy(row)
            if copied is None or trial_id is None:  # not plain values only: encoded now, as a real run does
                return False
            kept[trial_id] = (row, copied)
            blobs.append(copied)
        blob = plain_copy(dict(value, trials=None))
        if blob is None:
            return False
        self._row_copies = kept
        file = _DeferredState(fs, blob, blobs)
        store(self.ctx, fs, path, file, what)
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
                 r.name, r.dirname, r.dirname_custom, r.resources)
        last = self._rows.get(trial_id)
        if last is not None and last[0] == shows:  # (the same objects, or equal values: the same row)
            return last[1]
        row = super()._row(r)
        self._rows[trial_id] = (shows, row)
        return row

    def write_params(self, rec: TrialRecord) -> None:
        if not put_json(self.ctx, self.layout.params_file(rec.trial_id), key_sorted(rec.config), 2,
                        "writing JSON"):
            super().write_params(rec)


_empty_dir: str | None = None


def _empty() -> str:
    """One empty local directory per process: what a simulated checkpoint uploads (only its manifest)."""
    global _empty_dir
    if _empty_dir is None:
        # (named for actors._tempdirs.sweep: a pool worker's process ends without running atexit)
        _empty_dir = owned_tempdir("sim")
        atexit.register(shutil.rmtree, _empty_dir, True)
    return _empty_dir


def commit_empty(ctx: StorageContext, dest: str, meta: dict[str, Any]) -> None:
    """Commit a checkpoint with no files: the manifest, written last as always, is the checkpoint
    (stored as a copy, encoded when first read, as the simulator's states are)."""
    commit_checkpoint(ctx, dest, _empty(), meta, put_manifest=_put_manifest)


def _put_manifest(ctx: StorageContext, path: str, manifest: dict[str, Any]) -> None:
    if not put_json(ctx, path, manifest, 2, "writing checkpoint manifest"):
        write_manifest(ctx, path, manifest)


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


__all__ = ["SimExperimentIO", "SimMemoryFS", "SimStateWriter", "commit_empty", "forget_tree", "put_json", "store",
           "use_sim_storage"]
