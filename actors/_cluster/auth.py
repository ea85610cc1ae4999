"""Authenticated mode for Thespian's TCP transport: no byte from a peer without the cluster key is unpickled.

Thespian 4.0.1 pickles every message and ACK (``system/transport/TCPTransport.py``) and unpickles every
complete frame it reads (``ReceiveBuffer.completed`` in ``streamBuffer.py``), so anyone who reaches an
admin or actor port can run code.  ``enable_authentication`` patches those points in the driver before
the actor system starts; the fork-started admin, logger and actors inherit the patch.

The frame codec (``actors/_cluster/auth_codec.py``): every frame carries an HMAC tag and names the address it
was sent to.  This module reads frames itself (``AuthReceiveBuffer``): a length prefix that is not
1-20 ASCII digits, one over ``max_frame_bytes``, or one the process-wide ``max_buffered_bytes`` cannot
hold is refused before a byte of the body is buffered, and no input can make Thespian's loop raise.
Only a frame whose tag verifies, that is fresh, addressed to this process and not seen before is
unpickled.  No encryption: see docs/security.md.
"""

from __future__ import annotations

import hmac
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors._cluster.auth_codec import KIND_ACK, KIND_HELLO, AuthError, ByteBudget, FrameAuth, Opened

# the key's sources and rules live in _auth_keys; re-exported so ``actors._cluster.auth`` stays the one entry point
from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE, MIN_KEY_BYTES, check_key, load_cluster_key, load_key_file
from actors._driver.errors import ConfigError

_MAX_LENGTH_DIGITS = 20  # Thespian's b"<len>>" prefix; longer means garbage (stock Thespian buffers it forever)

log = logging.getLogger("audition.auth")


# ----------------------------------------------------------------------------------------------------
# Thespian glue


class _Dropped:
    """Stands in for the message of a duplicate or hello frame: ACKed, then dropped by _processReceivedEnvelope."""


_REJECTED = object()
_UNSET = object()


@dataclass
class _Installed:
    auth: FrameAuth
    max_frame_bytes: int
    budget: ByteBudget
    ack_frames: dict[bytes, str]  # signed ACK bodies -> Thespian's ACK strings (public constants)
    warn_window_start: float = 0.0
    warn_count: int = 0


_state: _Installed | None = None
_install_lock = threading.Lock()
_WARN_WINDOW_S = 10.0
_WARN_MAX = 20


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
        return (None, _Dropped())
    if not st.auth.first_time(opened):
        log.warning("duplicate frame from %s (a retransmission or a replay): acknowledged, dropped unread", peer)
        return (None, _Dropped())
    return deserialize(opened.payload)


def _peer_of(sock: Any) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        return "unknown peer"


def _own_address(transport: Any) -> tuple[str, int] | None:
    try:
        host, port = transport.myAddress.addressDetails.sockname[:2]
        return str(host), int(port)
    except (AttributeError, TypeError, ValueError):
        return None


class _FrameReader:
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
            self._opened = _decode(self._body, self.peer, self._deserialize, _own_address(self.transport))
            self._body = bytearray()
            self._release()
        if self._opened is _REJECTED:
            return None
        return self._opened, self._extra


def enable_authentication(key: bytes, *, clock_skew_s: float = 60.0, max_frame_bytes: int = 256 << 20,
                          max_buffered_bytes: int = 512 << 20) -> None:
    """Make this process's Thespian TCP transport sign every frame and verify every frame before unpickling.

    Call it in the driver before the actor system starts (fork-started admin/actors inherit it).
    Idempotent for the same key; a different key raises ConfigError (running actors keep the old one).
    Frames older than Thespian's transmit timeout plus ``clock_skew_s`` are rejected.  A frame that
    announces more than ``max_frame_bytes``, or more than what is left of ``max_buffered_bytes`` (all
    frames of one process still being received, together), is refused before its body is read.
    """
    global _state
    from thespian.system.transport import DEFAULT_MAX_TRANSMIT_PERIOD

    if max_buffered_bytes < max_frame_bytes:
        raise ConfigError(f"max_buffered_bytes ({max_buffered_bytes}) must be at least max_frame_bytes "
                          f"({max_frame_bytes}), or no frame of the largest size could ever be received")
    auth = FrameAuth(key, max_age_s=DEFAULT_MAX_TRANSMIT_PERIOD.total_seconds() + clock_skew_s,
                     max_skew_s=clock_skew_s)
    with _install_lock:
        if _state is not None:
            if hmac.compare_digest(_state.auth.mac_key, auth.mac_key):
                return
            raise ConfigError("authentication is already enabled in this process with a different cluster key; "
                              "its actors keep the old key, so start a new process to use another one")
        budget = ByteBudget(max_buffered_bytes)
        _state = _Installed(auth, max_frame_bytes, budget, {})
        try:
            _patch_thespian(_state)
        except Exception:
            _state = None
            raise
        os.register_at_fork(after_in_child=auth.reset_after_fork)
        os.register_at_fork(after_in_child=budget.reset_after_fork)


def enable_from_environment() -> bool:
    """Enable authentication if $AUDITION_CLUSTER_KEY or $AUDITION_CLUSTER_KEY_FILE is set; True if enabled."""
    key = load_cluster_key()
    if key is None:
        return False
    enable_authentication(key)
    return True


def authentication_enabled() -> bool:
    return _state is not None


def current_auth() -> FrameAuth | None:
    """The codec of this process's cluster key, if authentication is enabled (the worker's join check)."""
    return None if _state is None else _state.auth


_PATCHED = ("TCPTransport.serializer", "TCPTransport._check_XMIT_4_done", "TCPTransport._processReceivedEnvelope",
            "TCPTransport._addedDataToIncoming", "TCPIncoming_Common.__init__", "ReceiveBuffer", "ackMsg",
            "ackDataErrMsg", "ackPacket", "toSendBuffer", "get_multiproc_context")


def _recipient_of(intent: Any) -> tuple[str, int] | None:
    """The (IP, port) the transport will dial for ``intent`` (resolved by Thespian when the address was made)."""
    try:
        host, port = intent.targetAddr.addressDetails.sockname[:2]
        return str(host), int(port)
    except (AttributeError, TypeError, ValueError):
        return None


def _patch_thespian(st: _Installed) -> None:
    """Replace the pickling points of thespian.system.transport.TCPTransport (4.0.1 internals) and allow only fork."""
    from thespian.system import multiprocCommon as mc
    from thespian.system.transport import TCPTransport as tt
    from thespian.system.transport.streamBuffer import ackDataErrPacket

    for name in _PATCHED:
        module: Any = mc if name == "get_multiproc_context" else tt
        owner = module
        for part in name.split("."):
            if not hasattr(owner, part):
                raise ConfigError(f"cannot enable authentication: {module.__name__}.{name} is missing "
                                  "(the patch targets Thespian 4.0.1's internals)")
            owner = getattr(owner, part)

    dumps = tt.serializer.dumps  # the module's pickle
    to_send = tt.toSendBuffer
    auth = st.auth
    for packet in (tt.ackPacket, ackDataErrPacket):
        st.ack_frames[auth.seal(dumps(packet), KIND_ACK)] = packet

    # Thespian's own class stays a base so isinstance checks on it hold; _FrameReader overrides all of it.
    reader = type("AuthReceiveBuffer", (_FrameReader, tt.ReceiveBuffer), {"__module__": __name__})

    def serializer(self: Any, intent: Any) -> bytes:
        recipient = _recipient_of(intent)
        return bytes(to_send((self.myAddress, intent.message), lambda obj: auth.seal(dumps(obj), recipient=recipient)))

    incoming_init = tt.TCPIncoming_Common.__init__

    def incoming_init_with_peer(self: Any, rmtAddr: Any, baseSock: Any, rcvBuf: Any = None) -> None:
        incoming_init(self, rmtAddr, baseSock, rcvBuf)
        if rcvBuf is None and isinstance(self._rData, _FrameReader):
            self._rData.peer = _peer_of(baseSock)

    check_ack = tt.TCPTransport._check_XMIT_4_done

    def check_ack_with_peer(self: Any, intent: Any, rcv: Any) -> Any:
        buf = getattr(intent, "ackbuf", None)
        if isinstance(buf, _FrameReader):
            buf.transport = self
            if buf.peer == _FrameReader.peer:
                buf.peer = f"{_peer_of(getattr(intent, 'socket', None))} (reply to {intent.targetAddr})"
        return check_ack(self, intent, rcv)

    added_data = tt.TCPTransport._addedDataToIncoming

    def added_data_knowing_recipient(self: Any, inc: Any, *args: Any, **kwargs: Any) -> Any:
        buf = getattr(inc, "_rData", None)
        if isinstance(buf, _FrameReader):
            buf.transport = self
        return added_data(self, inc, *args, **kwargs)

    process_envelope = tt.TCPTransport._processReceivedEnvelope

    def process_unless_dropped(self: Any, envelope: Any, has_exclusive_flag: bool = False) -> Any:
        if isinstance(envelope.message, _Dropped):
            return None
        return process_envelope(self, envelope, has_exclusive_flag=has_exclusive_flag)

    get_context = mc.get_multiproc_context

    def fork_only_context(capabilities: dict[str, Any]) -> Any:
        """Spawned/forkserver children re-import Thespian unpatched: they would accept any pickle."""
        ctx = get_context(capabilities)
        if ctx is None or ctx.get_start_method() != "fork":
            raise ConfigError("authenticated transport needs 'Process Startup Method': 'fork' (children started "
                              f"with {capabilities.get('Process Startup Method')!r} would not verify frames)")
        return ctx

    mc.get_multiproc_context = fork_only_context
    tt.ReceiveBuffer = reader
    tt.ackMsg, tt.ackDataErrMsg = (to_send(p, lambda obj: auth.seal(dumps(obj), KIND_ACK))
                                   for p in (tt.ackPacket, ackDataErrPacket))
    tt.TCPTransport.serializer = serializer
    tt.TCPTransport._check_XMIT_4_done = check_ack_with_peer
    tt.TCPTransport._addedDataToIncoming = added_data_knowing_recipient
    tt.TCPTransport._processReceivedEnvelope = process_unless_dropped
    tt.TCPIncoming_Common.__init__ = incoming_init_with_peer
    log.debug("Thespian TCP transport authentication enabled")


__all__ = ["ENV_KEY", "ENV_KEY_FILE", "MIN_KEY_BYTES", "AuthError", "FrameAuth", "authentication_enabled",
           "check_key", "current_auth", "enable_authentication", "enable_from_environment", "load_cluster_key",
           "load_key_file"]
