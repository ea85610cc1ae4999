"""The trial worker's side of direct decisions (``actors/_engine/direct.py``): one socket round trip
to the scheduler actor per result, in place of four Thespian hops.

Frames are a 4-byte length and a pickle, both ways; the server side (``actors/_shell/decision_server.py``)
uses the same ``frame`` and ``FrameReader``.
"""

from __future__ import annotations

import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any

from actors.messages import DecideResult, ResultDecided

_LEN = struct.Struct("!I")


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
    decision). It never waits forever: while ``stopping()`` it gives up and answers False, and a
    broken connection (the scheduler actor is gone, and with it the experiment) answers False for
    good, so the worker falls back to the controller's messages, which end the run.
    """

    def __init__(self, address: str, stopping: Callable[[], bool], poll_s: float = 0.5) -> None:
        self.address = address
        self.stopping = stopping
        self.poll_s = poll_s
        self.sock: socket.socket | None = None
        self.reader = FrameReader()
        self.broken = False

    def ask(self, msg: DecideResult) -> bool:
        if self.broken:
            return False
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(self.address)
                self.sock.settimeout(self.poll_s)
            self.sock.sendall(frame(msg))
            while True:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    if self.stopping():
                        self.close()  # the answer may still come: never read it as the next one's
                        self.broken = True
                        return False
                    continue
                if not data:
                    raise ConnectionError("the scheduler actor closed its decision socket")
                got = self.reader.feed(data)
                if got:
                    answer = got[0]
                    return isinstance(answer, ResultDecided) and answer.go_on
        except (OSError, pickle.UnpicklingError, EOFError):
            self.close()
            self.broken = True
            return False

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None


__all__ = ["DecisionClient", "FrameReader", "frame"]
