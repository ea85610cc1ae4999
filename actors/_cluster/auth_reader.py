"""The receive side of the authenticated transport: Thespian's ReceiveBuffer, reading frames defensively.

A length prefix that is not 1-20 ASCII digits, one over ``max_frame_bytes``, or one the process-wide
``max_buffered_bytes`` cannot hold is refused before a byte of the body is buffered, and no input can
make Thespian's loop raise. Only a frame whose tag verifies (``auth_codec``), that is fresh, addressed
to this process and not seen before is unpickled. The limits and the codec are the process's
``Installed`` state, set once by ``actors._cluster.auth.enable_authentication``.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors._cluster.auth_codec import KIND_ACK, KIND_HELLO, AuthError, ByteBudget, FrameAuth, Opened

_MAX_LENGTH_DIGITS = 20  # Thespian's b"<len>>" prefix; longer means garbage (stock Thespian buffers it forever)

log = logging.getLogger("audition.auth")


class Dropped:
    """Stands in for the message of a duplicate or hello frame: ACKed, then dropped by _processReceivedEnvelope."""


_REJECTED = object()
_UNSET = object()


@dataclass
class Installed:
    """The process's cluster key codec and limits; ``ack_frames`` filled when Thespian is patched."""

    auth: FrameAuth
    max_frame_bytes: int
    budget: ByteBudget
    ack_frames: dict[bytes, str]  # signed ACK bodies -> Thespian's ACK strings (public constants)
    warn_window_start: float = 0.0
    warn_count: int = 0


_state: Installed | None = None  # this process's, once authentication is enabled
_WARN_WINDOW_S = 10.0
_WARN_MAX = 20


def installed() -> Installed | None:
    """This process's authentication state, or None before ``enable_authentication``."""
    return _state


def install(state: Installed | None) -> None:
    """Set (or, after a failed patch, clear) the state every reader of this process uses."""
    global _state
    _state = state


def _reject(peer: str, reason: str) -> None:
    """Log a rejected frame with the peer address, rate-limited so a flood cannot flood the logs."""
    st = _state
    assert st is not None
    now = time.monotonic()
    if now - st.warn_window_start > _WARN_WINDOW_S:
        st.warn_window_start, st.warn_count = now, 0
    st.warn_count += 1
    if st.warn_count <= _WARN_MAX:
        log.warning("rejected frame from %s: %s; dropped unread, connection closed", peer, reason)
    elif st.warn_count == _WARN_MAX + 1:
        log.warning("more rejected frames; suppressing these warnings for %.0f s", _WARN_WINDOW_S)


def _addressed_here(opened: Opened, me: tuple[str, int] | None) -> bool:
    """Whether the frame names this process's listening address (Thespian's own address equality)."""
    if me is None:
        return False
    host, port = opened.recipient
    if port != me[1]:
        return False
    if host == me[0]:
        return True
    from thespian.system.transport.IPBase import thisSystem

    return bool(thisSystem.isSameSystem((host, port), me))


def _decode(body: bytearray, peer: str, deserialize: Callable[[Any], Any], me: tuple[str, int] | None) -> Any:
    st = _state
    assert st is not None
    if len(body) < 128:  # fast path: the two ACK bodies are constants
        ack = st.ack_frames.get(bytes(body))
        if ack is not None:
            return ack
    try:
        opened = st.auth.open(body)
    except AuthError as e:
        _reject(peer, str(e))
        return _REJECTED
    if opened.kind == KIND_ACK:
        _reject(peer, "signed ACK frame with unknown content")
        return _REJECTED
    if not _addressed_here(opened, me):
        host, port = opened.recipient
        _reject(peer, f"frame addressed to {host}:{port}, not to this process ({me[0]}:{me[1]}): a replay "
                      "or a misrouted frame" if me else "frame received outside a transport")
        return _REJECTED
    if opened.kind == KIND_HELLO:  # a worker checking that it may join: the ACK is the whole answer
        log.info("join check from %s: accepted", peer)
        return (None, Dropped())
    if not st.auth.first_time(opened):
        log.warning("duplicate frame from %s (a retransmission or a replay): acknowledged, dropped unread", peer)
        return (None, Dropped())
    return deserialize(opened.payload)


def peer_of(sock: Any) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        return "unknown peer"


def address_pair(address: Any) -> tuple[str, int] | None:
    """The (IP, port) of a Thespian TCP address (resolved by Thespian when the address was made)."""
    try:
        host, port = address.addressDetails.sockname[:2]
        return str(host), int(port)
    except (AttributeError, TypeError, ValueError):
        return None


class AuthFrameReader:
    """Thespian's ReceiveBuffer interface, read defensively: every input ends in a complete frame or a refusal.

    The length prefix must be 1-20 ASCII digits then ``>`` (Thespian's ``toSendBuffer``); the body is
    read only after the announced size was reserved from the process's ``ByteBudget``, into a
    ``bytearray`` (linear in the size, where Thespian's ``bytes +=`` was quadratic).  ``remainingAmount``
    is never below 1, so Thespian never calls ``recv`` with a negative size.  ``completed()`` returns
    None for a refused or rejected frame, which Thespian treats as a bad frame: ACK+DATAERR, close.
    """

    peer = "unknown peer"
    transport: Any = None  # set by the patched transport before completed(); the recipient check needs it

    def __init__(self, serializer: Callable[[Any], Any] = pickle.loads) -> None:
        self._deserialize = serializer
        self._buf = b""  # the length prefix until its ">" arrives
        self._body = bytearray()
        self._blen = 0
        self._size: int | None = None
        self._extra = b""
        self._opened: Any = _UNSET
        self._refused = False
        self._reserved = 0
        self._generation = 0

    def addMore(self, buf: Any) -> None:
        if self._refused or not buf:
            return
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise TypeError(f"frame data must be bytes, not {type(buf).__name__}")  # Thespian catches and drops
        if self._size is None:
            self._read_prefix(bytes(buf))
        else:
            self._take(buf)

    def _read_prefix(self, data: bytes) -> None:
        st = _state
        assert st is not None
        data = self._buf + data
        mark = data.find(b">")
        if mark < 0:
            self._buf, self._blen = data, 1  # _blen non-zero: "some input received", as in Thespian
            if len(data) > _MAX_LENGTH_DIGITS:
                self._refuse("no frame length in the first bytes")
            return
        digits = data[:mark]
        if not digits or len(digits) > _MAX_LENGTH_DIGITS or not digits.isdigit():
            self._refuse("unreadable frame length")
            return
        size = int(digits)
        if size > st.max_frame_bytes:
            self._refuse(f"frame announces {size} bytes (limit {st.max_frame_bytes})")
            return
        if size > st.budget.limit - st.budget.used:
            self._refuse(f"frame announces {size} bytes, more than the {st.budget.limit - st.budget.used} bytes "
                         f"left of the {st.budget.limit} that frames not yet verified may hold together")
            return
        self._buf, self._size = b"", size
        self._take(data[mark + 1:])

    def _take(self, data: Any) -> None:
        assert self._size is not None and _state is not None
        want = self._size - len(self._body)
        if want > 0 and data:
            chunk = data[:want]
            generation = _state.budget.reserve(len(chunk))  # bytes held, not bytes announced: a claim costs nothing
            if generation is None:
                self._refuse(f"{_state.budget.limit} bytes are already held by frames not yet verified")
                return
            self._reserved, self._generation = self._reserved + len(chunk), generation
            self._body += chunk
        if len(data) > want:
            self._extra += bytes(data[max(want, 0):])
        self._blen = len(self._body)

    def _release(self) -> None:
        if self._reserved and _state is not None:
            _state.budget.release(self._reserved, self._generation)
        self._reserved = 0

    def _refuse(self, reason: str) -> None:
        self._refused = True
        self._buf, self._body, self._extra = b"", bytearray(), b""
        self._release()
        _reject(self.peer, reason)

    def __del__(self) -> None:
        self._release()

    def is_empty(self) -> bool:
        return self._blen == 0 and self._size is None

    def remainingAmount(self) -> int:
        if self._refused:
            return 1
        if self._size is None:
            return max(1, _MAX_LENGTH_DIGITS + 1 - len(self._buf))
        return max(1, self._size - self._blen)

    def isDone(self) -> bool:
        return self._refused or (self._size is not None and self._blen == self._size)

    def removeExtra(self) -> None:
        self._extra = b""

    def completed(self) -> Any:
        if self._refused or self._size is None or self._blen != self._size:
            return None
        if self._opened is _UNSET:  # memoized: the ACK path calls completed() twice on one buffer
            own = address_pair(getattr(self.transport, "myAddress", None))
            self._opened = _decode(self._body, self.peer, self._deserialize, own)
            self._body = bytearray()
            self._release()
        if self._opened is _REJECTED:
            return None
        return self._opened, self._extra


__all__ = ["AuthFrameReader", "Dropped", "Installed", "install", "installed", "peer_of"]
