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
"""

from __future__ import annotations

import marshal
from io import BytesIO
from typing import Any

from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

from storage import StateWriter, StorageContext
from storage._io import dumps
from storage._retry import retrying


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
        self._blob: bytes | None = blob
        self._indent = indent

    def _encode(self) -> None:
        if self._blob is not None:
            blob, self._blob = self._blob, None
            BytesIO.write(self, dumps(marshal.loads(blob), indent=self._indent).encode("utf-8"))
            BytesIO.seek(self, 0)

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


class SimStateWriter(StateWriter):
    """``StateWriter`` whose files are encoded when read (see the module's docstring)."""

    def _put(self, path: str, value: dict[str, Any], indent: int | None, what: str) -> None:
        fs = self.ctx.fs
        if not isinstance(fs, SimMemoryFS):  # RunConfig(storage=...) named other storage
            super()._put(path, value, indent, what)
            return
        try:
            blob = marshal.dumps(value)
        except ValueError:  # not plain values only: encode now, as a real run does
            super()._put(path, value, indent, what)
            return
        retrying(lambda: fs._put(path, _Deferred(fs, blob, indent)), what=what, url=self.ctx.uri(path))


def use_sim_storage(ctx: StorageContext) -> None:
    """Make ``ctx`` (a ``memory://`` context) write through ``SimMemoryFS``; other storage is left alone."""
    if ctx.is_process_local:
        ctx.use_filesystem(SimMemoryFS())


__all__ = ["SimMemoryFS", "SimStateWriter", "use_sim_storage"]
