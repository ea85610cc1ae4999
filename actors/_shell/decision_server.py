"""The scheduler actor's socket for direct decisions (``actors/_engine/direct.py``).

A Unix stream socket (Linux: in the abstract namespace, so a killed actor leaves no file behind),
one connection per trial worker. The actor watches ``filenos()`` through Thespian's
``ThespianWatch`` and calls ``ready`` with the descriptors that woke it; each request is answered
on the connection it came from. Thespian also wakes the actor for descriptors that are no longer
readable, or already closed (``benchmarks/probe_thespian_watch.py``: from 15 to ~9,800 stale wake-ups per
6,000 reads across runs, and up to hundreds after a close): every read
and accept is non-blocking, so such a wake-up costs nothing instead of stopping the scheduler until
that trial sends again. The newest answer per trial is kept: a request the worker sent
again (``DecideResult.seq``, ``actors/_worker/decide.py``) is answered from it, never decided twice.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import uuid
from typing import Any

from actors._worker.decide import FrameReader, frame
from actors.messages import DecideResult, ResultDecided


class DecisionServer:
    def __init__(self) -> None:
        self.tmpdir: str | None = None
        if sys.platform.startswith("linux"):
            self.address = f"\0audition-decide-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        else:
            self.tmpdir = tempfile.mkdtemp(prefix="audition-decide-")
            self.address = os.path.join(self.tmpdir, "s")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(128)
        self.listener.setblocking(False)  # (accepted connections are blocking: answers are sent whole)
        self.conns: dict[int, tuple[socket.socket, FrameReader]] = {}
        self.answered: dict[str, tuple[int, int, ResultDecided]] = {}  # trial -> (run, seq, answer)
        self.repeats = 0  # requests answered again from the record

    def filenos(self) -> list[int]:
        return [self.listener.fileno(), *self.conns]

    def ready(self, fds: list[Any]) -> list[tuple[socket.socket, DecideResult]]:
        """Accept new workers and read what the ready connections sent: the requests, in order."""
        out: list[tuple[socket.socket, DecideResult]] = []
        for fd in fds:
            if fd == self.listener.fileno():
                try:
                    conn, _ = self.listener.accept()
                except OSError:  # (BlockingIOError: a stale wake-up)
                    continue
                self.conns[conn.fileno()] = (conn, FrameReader())
                continue
            entry = self.conns.get(fd)
            if entry is None:
                continue
            conn, reader = entry
            try:
                data = conn.recv(1 << 20, socket.MSG_DONTWAIT)
            except BlockingIOError:  # a stale wake-up: nothing to read after all
                continue
            except OSError:
                data = b""
            if not data:  # the worker's run ended (or its process did)
                self._drop(fd)
                continue
            for m in reader.feed(data):
                if not isinstance(m, DecideResult):
                    continue
                last = self.answered.get(m.trial_id)
                if last is not None and last[0] == m.run_id and m.seq <= last[1]:
                    if m.seq == last[1]:  # sent again: its answer was lost, or came late
                        self.repeats += 1
                        self._send(conn, last[2])
                    continue
                if any((r.trial_id, r.run_id, r.seq) == (m.trial_id, m.run_id, m.seq) for _, r in out):
                    continue  # the first copy is about to be decided and answered
                out.append((conn, m))
        return out

    def answer(self, conn: socket.socket, request: DecideResult, msg: ResultDecided) -> None:
        self.answered[request.trial_id] = (request.run_id, request.seq, msg)
        self._send(conn, msg)

    def _send(self, conn: socket.socket, msg: ResultDecided) -> None:
        fd = conn.fileno()
        try:
            conn.sendall(frame(msg))
        except OSError:  # the worker is gone; its run's end reaches the controller anyway
            self._drop(fd)

    def _drop(self, fd: int) -> None:
        entry = self.conns.pop(fd, None)
        if entry is not None:
            try:
                entry[0].close()
            except OSError:
                pass

    def close(self) -> None:
        for fd in list(self.conns):
            self._drop(fd)
        try:
            self.listener.close()
        except OSError:
            pass
        if self.tmpdir is not None:
            try:
                os.unlink(self.address)
                os.rmdir(self.tmpdir)
            except OSError:
                pass


__all__ = ["DecisionServer"]
