"""Routes a trial's stdout/stderr into ``stdout.txt``/``stderr.txt`` in its trial directory.

Two modes, chosen by the controller (``RunTrial.capture_fds``), never guessed:

- Multi-process systems: the trial actor is a process of its own running one trial at a time, so
  fd 1/2 are redirected to pipes (``actors/_worker/fdcapture.py``) and *everything* the process writes
  while a run is current is the trial's: any thread, C extensions, ``os.write(1, ...)``,
  subprocesses. A Python write first drains the pipe, then goes straight to the capture: the exact
  order of the two kinds is kept without a syscall per print. Pipes feed one capture at a time: a reused
  actor's next trial gets only its own output, and what is written between runs goes to the old fds.
- ``simpleSystemBase``: trials are threads of the driver's (or test runner's) process, which owns
  the real streams, so fds are left alone. ``sys.stdout``/``sys.stderr`` get a proxy that looks up
  the writing thread: a trial's worker thread writes into that trial's buffer, every other thread
  passes straight through (threads the trainable starts and fd-level writes are not captured).

With ``RunConfig(log_to_driver=True)`` (the default) every write is also fed to a
:class:`~actors._driver.console.ConsoleTee`, which the trial actor empties for the driver's console.

Buffers reach storage only on :meth:`OutputCapture.flush` (at a report when ``FLUSH_EVERY_S`` has
passed, at saves and at the run's end; it first drains the pipes), so a print never costs a
storage call, and a storage failure while saving output never fails the trial.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from typing import Any, TextIO

from actors._driver.console import ConsoleTee
from actors._worker import fdcapture as _fdcapture
from storage import StorageContext, read_bytes, retrying, write_bytes

FLUSH_EVERY_S = 0.5  # how far captured output may lag behind the trial's reports
_lock = threading.Lock()
_routes: dict[int, OutputCapture] = {}  # thread ident -> the capture its writes belong to
_STREAMS = ("stdout", "stderr")


def _forget_routes_after_fork() -> None:
    """A forked child (an actor process) keeps none of its parent's threads, but thread idents
    are addresses and get reused: an inherited route could claim a new thread's output."""
    _routes.clear()


os.register_at_fork(after_in_child=_forget_routes_after_fork)


class _RoutingStream:
    """Stands in for ``sys.stdout``/``sys.stderr``; anything not overridden goes to the original."""

    def __init__(self, name: str, original: TextIO) -> None:
        self._name = name
        self._original = original

    def _capture(self) -> OutputCapture | None:
        return _routes.get(threading.get_ident())

    def _captured(self) -> bool:
        return self._capture() is not None or _fdcapture.current() is not None

    def write(self, text: str) -> int:
        cap = self._capture()
        if cap is not None:
            cap.add(self._name, text)
        elif _fdcapture.installed():  # a process of one trial: any thread, unbuffered through the fd
            _fdcapture.write(self._name, text)
        else:
            return self._original.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._captured():  # a trial's flush is a no-op: its buffer goes out at report time
            self._original.flush()

    def isatty(self) -> bool:
        return False if self._captured() else self._original.isatty()

    def fileno(self) -> int:
        if _fdcapture.installed():  # e.g. subprocess.run(stdout=sys.stdout)
            return _fdcapture.fileno(self._name)
        return self._original.fileno()

    @property
    def buffer(self) -> Any:
        return _fdcapture.binary(self._name) if _fdcapture.installed() else self._original.buffer

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

    def __init__(self, ctx: StorageContext, paths: dict[str, str], capture_fds: bool = False,
                 console: ConsoleTee | None = None) -> None:
        self.ctx = ctx
        self.console = console  # RunConfig(log_to_driver): lines also go to the driver's console
        self.paths = paths  # stream name -> path within ctx.fs
        # never in the main process: it is the driver's or the test runner's, whatever the caller says
        self.capture_fds = capture_fds and multiprocessing.current_process().name != "MainProcess"
        self._fd_attached = False
        self._pending: dict[str, list[str]] = {name: [] for name in _STREAMS}
        self._written: dict[str, bytes | None] = {name: None for name in _STREAMS}  # object stores only
        self._buf_lock = threading.Lock()
        self._last_flush = time.monotonic()

    def feed(self, name: str, text: str) -> None:
        """Buffer ``text`` (the fd pumps call this, holding their lock)."""
        with self._buf_lock:
            self._pending[name].append(text)
        if self.console is not None:
            self.console.feed(1 if name == "stdout" else 2, text)

    def add(self, name: str, text: str) -> None:
        """Buffer ``text`` after everything already written to the fds (e.g. a failure's traceback)."""
        self._drain()
        self.feed(name, text)

    def start(self) -> None:
        """Capture from now on: the whole process's fds if ``capture_fds``, else the calling thread."""
        with _lock:
            _install()
            if self.capture_fds:
                try:
                    _fdcapture.attach(self)
                    self._fd_attached = True
                    return
                except OSError as exc:  # e.g. out of file descriptors: fall back to this thread only
                    try:
                        _fdcapture.detach(self)  # if one stream got as far as attaching
                    except OSError:
                        pass
                    _warn(f"audition: capturing only the trial's thread: {exc}\n")
            _routes[threading.get_ident()] = self

    def stop(self) -> None:
        """Stop capturing (saving what the fds still held); restore the streams if nothing captures."""
        with _lock:
            if self._fd_attached:
                self._fd_attached = False
                try:
                    _fdcapture.detach(self)
                except OSError:
                    pass
            _routes.pop(threading.get_ident(), None)
            if not _routes and not _fdcapture.installed():  # fd capture keeps the proxy for good
                _uninstall()
        if any(self._pending.values()):
            self.flush()

    def _drain(self) -> None:
        if self._fd_attached:
            try:
                _fdcapture.drain()
            except OSError:
                pass

    def maybe_flush(self) -> None:
        """At a report: flush if ``FLUSH_EVERY_S`` passed since the last flush.

        Not at every report: draining the pipes is a syscall that hands the GIL to the trial
        actor's thread, which then sends each result alone instead of in batches (2-3x fewer
        results/s in ``bench_throughput``). Output may lag by that long; a run's end flushes all.
        """
        now = time.monotonic()
        if now - self._last_flush >= FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Append what was written since the last flush; a storage failure never fails the trial."""
        self._last_flush = time.monotonic()
        self._drain()
        for name in _STREAMS:
            with self._buf_lock:
                chunks, self._pending[name] = self._pending[name], []
            if not chunks:
                continue
            data = "".join(chunks).encode("utf-8", errors="replace")
            try:
                self._append(name, data)
            except Exception as exc:
                _warn(f"audition: could not save trial {name} to {self.ctx.uri(self.paths[name])}: {exc}\n")

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


def _warn(text: str) -> None:
    """Tell the real stderr (not a trial's file), whichever mode captures."""
    fd = _fdcapture.original_fd("stderr")
    if fd is not None:  # fd 2 is our pipe: the warning would land in the trial's own stderr.txt
        try:
            os.write(fd, text.encode("utf-8", errors="replace"))
        except OSError:
            pass
        return
    err: Any = sys.stderr
    while isinstance(err, _RoutingStream):
        err = err._original
    err.write(text)


__all__ = ["OutputCapture"]
