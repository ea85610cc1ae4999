"""Routes a trial's stdout/stderr into ``stdout.txt``/``stderr.txt`` in its trial directory.

Several trials may run as threads of one process (the in-process "simple" system), and the test
runner or the driver own the real streams, so redirecting file descriptors is not an option.
Instead ``sys.stdout``/``sys.stderr`` get a proxy that looks up the writing thread: a trial's
worker thread writes into that trial's buffer, every other thread passes straight through.
Buffers reach storage only on :meth:`OutputCapture.flush` (at each report, checkpoint and run end),
so a print never costs a storage call. Threads the trainable starts itself are not routed.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO

from storage import StorageContext, read_bytes, retrying, write_bytes

_lock = threading.Lock()
_routes: dict[int, OutputCapture] = {}  # thread ident -> the capture its writes belong to
_STREAMS = ("stdout", "stderr")


class _RoutingStream:
    """Stands in for ``sys.stdout``/``sys.stderr``; anything not overridden goes to the original."""

    def __init__(self, name: str, original: TextIO) -> None:
        self._name = name
        self._original = original

    def _capture(self) -> OutputCapture | None:
        return _routes.get(threading.get_ident())

    def write(self, text: str) -> int:
        cap = self._capture()
        if cap is None:
            return self._original.write(text)
        cap.add(self._name, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._capture() is None:  # a trial's flush is a no-op: its buffer goes out at report time
            self._original.flush()

    def isatty(self) -> bool:
        return False if self._capture() is not None else self._original.isatty()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._original, attr)


def _install() -> None:
    """Put a proxy on top of whatever the streams are now (pytest and others swap them)."""
    for name in _STREAMS:
        current = getattr(sys, name)
        if not isinstance(current, _RoutingStream):
            setattr(sys, name, _RoutingStream(name, current))


def _uninstall() -> None:
    """Give the streams back once no trial in this process captures any more."""
    for name in _STREAMS:
        current = getattr(sys, name)
        if isinstance(current, _RoutingStream):
            setattr(sys, name, current._original)


class OutputCapture:
    """One run's captured output; appends to what earlier runs (pause/resume, retries) wrote."""

    def __init__(self, ctx: StorageContext, paths: dict[str, str]) -> None:
        self.ctx = ctx
        self.paths = paths  # stream name -> path within ctx.fs
        self._pending: dict[str, list[str]] = {name: [] for name in _STREAMS}
        self._written: dict[str, bytes | None] = {name: None for name in _STREAMS}  # object stores only
        self._buf_lock = threading.Lock()

    def add(self, name: str, text: str) -> None:
        with self._buf_lock:
            self._pending[name].append(text)

    def start(self) -> None:
        """Route the calling thread's output here."""
        with _lock:
            _install()
            _routes[threading.get_ident()] = self

    def stop(self) -> None:
        """Stop routing the calling thread; restore the streams if this was the last capture."""
        with _lock:
            _routes.pop(threading.get_ident(), None)
            if not _routes:
                _uninstall()

    def flush(self) -> None:
        """Append what was buffered since the last flush; a storage failure never fails the trial."""
        for name in _STREAMS:
            with self._buf_lock:
                chunks, self._pending[name] = self._pending[name], []
            if not chunks:
                continue
            data = "".join(chunks).encode("utf-8", errors="replace")
            try:
                self._append(name, data)
            except Exception as exc:
                _original_stderr().write(f"audition: could not save trial {name} to "
                                         f"{self.ctx.uri(self.paths[name])}: {exc}\n")

    def _append(self, name: str, data: bytes) -> None:
        path = self.paths[name]
        if self.ctx.is_local:
            def append() -> None:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "ab") as handle:
                    handle.write(data)

            retrying(append, what=f"appending {name}", url=path)
            return
        # No append on object stores: keep the whole (small) file and rewrite it.
        if self._written[name] is None:
            try:
                self._written[name] = read_bytes(self.ctx, path, what=f"reading {name}")
            except FileNotFoundError:
                self._written[name] = b""
        whole = (self._written[name] or b"") + data
        write_bytes(self.ctx, path, whole, what=f"writing {name}")
        self._written[name] = whole


def _original_stderr() -> TextIO:
    err: Any = sys.stderr
    while isinstance(err, _RoutingStream):
        err = err._original
    return err  # type: ignore[no-any-return]


__all__ = ["OutputCapture"]
