"""The trial worker's side of direct decisions (``actors/_engine/direct.py``): one socket round trip
to the scheduler actor per result, in place of four Thespian hops.

Frames are a 4-byte length and a pickle, both ways; the server side (``actors/_shell/decision_server.py``)
uses the same ``frame`` and ``FrameReader``. Requests are numbered per run and sent again (on a new
connection if the old one broke) when no answer came within ``resend_after_s``; the server answers a
repeated request from its record instead of deciding it again, so a lost frame costs time, never a
decision.
"""

from __future__ import annotations

import logging
import pickle
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from actors.messages import DecideResult, ResultDecided

_LEN = struct.Struct("!I")
log = logging.getLogger("audition")


def frame(msg: Any) -> bytes:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


class FrameReader:
    """Splits what arrives on a stream socket into the messages framed on it."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buf += data
        out: list[Any] = []
        while len(self.buf) >= _LEN.size:
            (n,) = _LEN.unpack_from(self.buf)
            if len(self.buf) < _LEN.size + n:
                break
            out.append(pickle.loads(bytes(self.buf[_LEN.size:_LEN.size + n])))
            del self.buf[:_LEN.size + n]
        return out


class DecisionClient:
    """Asks the scheduler actor at ``address`` to decide each result; connects on first use.

    ``ask`` answers True (go on at once) or False (hold until the controller has applied the
    decision). It never waits forever: while ``stopping()`` it gives up and answers False, and when
    it cannot reach the scheduler actor at all (it is gone, and with it the experiment) it answers
    False for good, so the worker falls back to the controller's messages, which end the run.
    """

    def __init__(self, address: str, stopping: Callable[[], bool], poll_s: float = 0.25,
                 resend_after_s: float = 5.0, connect_attempts: int = 3) -> None:
        self.address = address
        self.stopping = stopping
        self.poll_s = poll_s
        self.resend_after_s = resend_after_s
        self.connect_attempts = connect_attempts
        self.sock: socket.socket | None = None
        self.reader = FrameReader()
        self.broken = False
        self.seq = 0
        self.resent = 0  # requests sent again (a frame lost on the way, or a slow hook)

    def ask(self, msg: DecideResult) -> bool:
        if self.broken:
            return False
        self.seq += 1
        request = DecideResult(msg.trial_id, msg.run_id, msg.result, self.seq)
        failures = 0
        while True:
            try:
                if self.sock is None:
                    self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    self.sock.settimeout(self.poll_s)
                    self.sock.connect(self.address)
                    self.reader = FrameReader()
                self.sock.sendall(frame(request))
                answer = self._wait(request.seq)
            except (OSError, pickle.UnpicklingError, EOFError, ConnectionError):
                self.close()
                failures += 1
                if failures >= self.connect_attempts:
                    self.broken = True
                    return False
                continue
            if answer is not None:
                return answer.go_on
            if self.broken:  # stopping
                return False
            self.resent += 1
            log.warning("trial %s: no decision from the scheduler for iteration %s within %.1f s; asking again",
                        msg.trial_id, msg.result.get("training_iteration"), self.resend_after_s)

    def _wait(self, seq: int) -> ResultDecided | None:
        """The answer to request ``seq``; None when it is time to send it again (or to stop)."""
        assert self.sock is not None
        deadline = time.monotonic() + self.resend_after_s
        while True:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if self.stopping():
                    self.close()
                    self.broken = True
                    return None
                if time.monotonic() >= deadline:
                    return None
                continue
            if not data:
                raise ConnectionError("the scheduler actor closed its decision socket")
            for answer in self.reader.feed(data):
                if isinstance(answer, ResultDecided) and answer.seq == seq:
                    return answer  # (an earlier request's late answer is skipped)

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None


__all__ = ["DecisionClient", "FrameReader", "frame"]
