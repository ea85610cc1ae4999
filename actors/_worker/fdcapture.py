"""File-descriptor capture for a process that runs one trial at a time (multi-process systems).

While a run is current, fd 1 and 2 are ``dup2``'ed onto pipes (made once per process) and one
daemon thread moves the bytes of both to that run's sink (its OutputCapture). That catches C
extensions, ``os.write(1, ...)`` and subprocesses (they inherit fd 1/2) as well as Python. When the
run ends, the pipe is drained into its sink and the original fds are put back, so a reused actor's
next trial never gets the previous one's bytes, and what the process writes outside runs (or as it
exits) is not lost in a pipe. (A subprocess that outlives its run still holds the pipe: what it
writes later goes to whichever run is current then, or to the original fds.)
:func:`drain` reads exactly what sits in the pipe when it is called (FIONREAD), under the same lock
as the reader, so every write completed before it is delivered; it never waits for a writer.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import select
import struct
import sys
import termios
import threading
from typing import BinaryIO, Protocol

_STREAM_FDS = (("stdout", 1), ("stderr", 2))
_CHUNK = 65536


class Sink(Protocol):
    def feed(self, name: str, text: str) -> None: ...


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def queued_bytes(fd: int) -> int | None:
    """Bytes waiting in the pipe, or None where the platform cannot tell."""
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return None
    return int(struct.unpack("i", raw)[0])


class _Pump:
    """One stream: ``fd`` writes into a pipe whose other end the pump thread (``_serve``) empties."""

    def __init__(self, name: str, fd: int) -> None:
        self.name, self.fd = name, fd
        self.original = os.dup(fd)  # not inheritable: children get the pipe, not the terminal
        try:
            self.read_end, self.write_end = os.pipe()
        except OSError:
            os.close(self.original)
            raise
        os.set_blocking(self.read_end, False)
        self.alive = False
        self.lock = threading.RLock()  # re-entrant: a signal handler may print while it is held
        self.sink: Sink | None = None
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write_text(self, text: str) -> None:
        """A Python-level write: straight to the sink after what the pipe holds (exact order, and no
        syscall but FIONREAD); through the fd while no run is current."""
        with self.lock:
            if self.sink is not None:
                if queued_bytes(self.read_end) != 0:
                    self._drain_locked()
                self.sink.feed(self.name, text)
                return
        _write_all(self.fd, text.encode("utf-8", errors="replace"))  # not under the lock: may block

    def close(self) -> None:
        for fd in (self.original, self.read_end, self.write_end):
            os.close(fd)

    def finish(self) -> None:
        """Nobody empties the pipe any more: writers must not block on it once it is full."""
        with self.lock:
            self.alive = False
            try:
                os.dup2(self.original, self.fd)
            except OSError:
                pass

    def _read(self, limit: int | None, once: bool = False) -> bool:
        """Deliver up to ``limit`` bytes (None: until the pipe is empty); False at end of file."""
        while limit is None or limit > 0:
            try:
                data = os.read(self.read_end, _CHUNK if limit is None else min(limit, _CHUNK))
            except BlockingIOError:
                return True
            if not data:
                return False
            self._deliver(data)
            if once:
                return True
            if limit is not None:
                limit -= len(data)
        return True

    def _deliver(self, data: bytes) -> None:
        if self.sink is None:
            try:
                _write_all(self.original, data)
            except OSError:
                pass  # the original stream is gone: drop, never block the pipe
            return
        text = self.decoder.decode(data)
        if text:
            try:
                self.sink.feed(self.name, text)
            except Exception:  # never let a sink kill the reader (the pipe would fill and block)
                pass

    def _drain_locked(self) -> None:
        self._read(queued_bytes(self.read_end))

    def drain(self) -> None:
        with self.lock:
            self._drain_locked()

    def switch(self, new: Sink | None, only_from: Sink | None = None) -> None:
        """Hand the stream to ``new`` (if ``only_from``: only while that is the sink); pending bytes
        go to the sink they were written for."""
        with self.lock:
            if only_from is not None and self.sink is not only_from:
                return
            self._drain_locked()
            tail = self.decoder.decode(b"", final=True)
            if tail and self.sink is not None:
                self.sink.feed(self.name, tail)
            self.decoder.reset()
            self.sink = new
            # fd 1/2 point at the pipe only while a run is current: between runs, and as the
            # process exits, they are the original ones again (nothing is left in a dead pipe)
            if self.alive:
                os.dup2(self.write_end if new is not None else self.original, self.fd)


def _serve(pumps: list[_Pump]) -> None:
    """One daemon thread empties every pipe: a trial process starts one thread for this, not two
    (a thread start is most of what capture costs a short trial)."""
    live = {pump.read_end: pump for pump in pumps}
    try:
        while live:
            ready, _, _ = select.select(list(live), [], [])
            for fd in ready:
                pump = live[fd]
                with pump.lock:  # one chunk per turn: a flood never starves drain()
                    more = pump._read(_CHUNK, once=True)
                if not more:
                    del live[fd]
                    pump.finish()
    finally:
        for pump in pumps:
            pump.finish()


_pumps: dict[str, _Pump] = {}
_setup_lock = threading.Lock()


def _flush_python_streams() -> None:
    """Push what Python buffered to the fds now, so it goes where it was meant to."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _ensure_installed() -> None:
    with _setup_lock:
        if _pumps:
            return
        _flush_python_streams()
        made: dict[str, _Pump] = {}
        try:  # allocate every fd first: a failure (EMFILE) leaves the process as it was
            for name, fd in _STREAM_FDS:
                made[name] = _Pump(name, fd)
        except OSError:
            for pump in made.values():
                pump.close()
            raise
        for pump in made.values():
            pump.alive = True
        threading.Thread(target=_serve, args=(list(made.values()),), name="audition-output-pump",
                         daemon=True).start()
        _pumps.update(made)


def installed() -> bool:
    return bool(_pumps)


def attach(sink: Sink) -> None:
    """Send everything written to fd 1/2 from now on to ``sink`` (raises OSError if impossible)."""
    _ensure_installed()
    _flush_python_streams()
    for pump in _pumps.values():
        pump.switch(sink)


def detach(sink: Sink) -> None:
    """Deliver what ``sink`` is owed and send later output to the original fds."""
    for pump in _pumps.values():
        pump.switch(None, only_from=sink)


def drain() -> None:
    """Deliver every byte written to fd 1/2 before this call."""
    for pump in _pumps.values():
        pump.drain()


def current() -> Sink | None:
    pump = _pumps.get("stdout")
    return pump.sink if pump is not None else None


def write(name: str, text: str) -> None:
    """A Python-level write, in order with what C code and subprocesses wrote to the fd before it."""
    _pumps[name].write_text(text)


def fileno(name: str) -> int:
    return _pumps[name].fd


_binary: dict[str, BinaryIO] = {}


def binary(name: str) -> BinaryIO:
    """An unbuffered binary file on the stream's fd (what ``sys.stdout.buffer`` stands for)."""
    if name not in _binary:
        _binary[name] = open(_pumps[name].fd, "wb", buffering=0, closefd=False)
    return _binary[name]


def original_fd(name: str) -> int | None:
    pump = _pumps.get(name)
    return pump.original if pump is not None else None


__all__ = ["Sink", "attach", "binary", "current", "detach", "drain", "fileno", "installed", "original_fd",
           "queued_bytes", "write"]
