"""Authenticated mode for Thespian's TCP transport: no byte from a peer without the cluster key is unpickled.

Thespian 4.0.1 pickles every message and ACK (``system/transport/TCPTransport.py``) and unpickles every
complete frame it reads (``ReceiveBuffer.completed`` in ``streamBuffer.py``), so anyone who reaches an
admin or actor port can run code.  ``enable_authentication`` patches those points in the driver before
the actor system starts; the fork-started admin, logger and actors inherit the patch.

Frame body (Thespian's ``b"<len>>"`` length prefix is kept)::

    tag(32) | version(1)=1 | kind(1) b"D"|b"A" | unix ms(8) | nonce(8) | pickle

``tag = HMAC-SHA256(k, everything after the tag)`` with ``k`` derived from the cluster key.  The tag is
checked with ``hmac.compare_digest`` before anything else is looked at.  Data frames must be fresh
(Thespian's transmit timeout + clock skew) and a data frame seen before is acknowledged but dropped
(a retransmission after a lost ACK, or a replay) without being unpickled.  ACK frames are two signed
constants, compared byte for byte and never unpickled.  No encryption: see docs/security.md.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import logging
import os
import pickle
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

# the key's sources and rules live in _auth_keys; re-exported so ``actors._auth`` stays the one entry point
from actors._auth_keys import ENV_KEY, ENV_KEY_FILE, MIN_KEY_BYTES, check_key, load_cluster_key, load_key_file
from actors._errors import ConfigError

VERSION = 1
KIND_DATA = b"D"
KIND_ACK = b"A"
TAG_BYTES = 32
_HEADER = struct.Struct(">Bc Q 8s")  # version, kind, unix ms, nonce
_CONTEXT = b"audition/thespian-tcp/v1"
_MAX_LENGTH_DIGITS = 20  # Thespian's b"<len>>" prefix; longer means garbage (stock Thespian buffers it forever)

log = logging.getLogger("audition.auth")


class AuthError(Exception):
    """A frame failed authentication; the message says why (never includes the frame)."""


class Opened(NamedTuple):
    kind: bytes
    payload: bytes
    duplicate: bool


class FrameAuth:
    """Seal and open frame bodies with one cluster key; pure (no Thespian), so it is unit-testable."""

    def __init__(self, key: bytes, *, max_age_s: float, max_skew_s: float, replay_capacity: int = 200_000) -> None:
        check_key(key)
        self.mac_key = hmac.digest(key, _CONTEXT, "sha256")  # domain separation from other uses of the key
        self._template = hmac.new(self.mac_key, digestmod=hashlib.sha256)  # copy() skips the per-call key setup
        self.max_age_s = max_age_s
        self.max_skew_s = max_skew_s
        self.replay_capacity = replay_capacity
        self._seen: dict[bytes, float] = {}
        self._expiry: collections.deque[tuple[float, bytes]] = collections.deque()
        self._lock = threading.Lock()
        self._capacity_warned = False

    def reset_after_fork(self) -> None:
        """A forked child starts with a free lock (the parent's may have been held by another thread)."""
        self._lock = threading.Lock()

    def _tag(self, msg: bytes) -> bytes:
        h = self._template.copy()
        h.update(msg)
        return h.digest()

    def seal(self, payload: bytes, kind: bytes = KIND_DATA, now: float | None = None) -> bytes:
        if kind == KIND_ACK:  # constants: no timestamp, no nonce
            msg = _HEADER.pack(VERSION, KIND_ACK, 0, bytes(8)) + payload
        else:
            ms = int((time.time() if now is None else now) * 1000)
            msg = _HEADER.pack(VERSION, KIND_DATA, ms, os.urandom(8)) + payload
        return self._tag(msg) + msg

    def open(self, body: bytes, now: float | None = None) -> Opened:
        """Verify ``body``; raise AuthError for a bad or missing tag, a wrong version or a stale frame."""
        if len(body) < TAG_BYTES + _HEADER.size:
            raise AuthError(f"frame of {len(body)} bytes is too short to carry a tag")
        tag, msg = body[:TAG_BYTES], body[TAG_BYTES:]
        if not hmac.compare_digest(self._tag(msg), tag):
            raise AuthError("bad HMAC tag (peer without the cluster key, or a different key)")
        version, kind, ms, _nonce = _HEADER.unpack_from(msg)
        if version != VERSION:
            raise AuthError(f"unsupported auth frame version {version}")
        payload = msg[_HEADER.size:]
        if kind == KIND_ACK:
            return Opened(kind, payload, duplicate=False)
        if kind != KIND_DATA:
            raise AuthError(f"unknown frame kind {kind!r}")
        now = time.time() if now is None else now
        age = now - ms / 1000
        if age > self.max_age_s or age < -self.max_skew_s:
            raise AuthError(f"stale frame: sent {age:.1f} s ago (window -{self.max_skew_s:g}..{self.max_age_s:g} s)")
        return Opened(kind, payload, duplicate=self._seen_before(tag[:16], ms / 1000 + self.max_age_s, now))

    def _seen_before(self, key: bytes, expires: float, now: float) -> bool:
        with self._lock:
            while self._expiry and (self._expiry[0][0] < now or len(self._expiry) > self.replay_capacity):
                if self._expiry[0][0] >= now and not self._capacity_warned:
                    self._capacity_warned = True
                    log.warning("replay cache full (%d frames): older frames may be replayed within %.0f s",
                                self.replay_capacity, self.max_age_s)
                _, old = self._expiry.popleft()
                self._seen.pop(old, None)
            if key in self._seen:
                return True
            self._seen[key] = expires
            self._expiry.append((expires, key))
            return False


# ----------------------------------------------------------------------------------------------------
# Thespian glue


class _Replayed:
    """Stands in for the message of a duplicate frame; dropped by the patched _processReceivedEnvelope."""


_REJECTED = object()
_UNSET = object()


@dataclass
class _Installed:
    auth: FrameAuth
    max_frame_bytes: int
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


def _decode(buf: bytes, peer: str, deserialize: Callable[[bytes], Any]) -> Any:
    st = _state
    assert st is not None
    ack = st.ack_frames.get(buf) if len(buf) < 128 else None
    if ack is not None:  # fast path: the two ACK bodies are constants
        return ack
    try:
        opened = st.auth.open(buf)
    except AuthError as e:
        _reject(peer, str(e))
        return _REJECTED
    if opened.kind == KIND_ACK:
        _reject(peer, "signed ACK frame with unknown content")
        return _REJECTED
    if opened.duplicate:
        log.warning("duplicate frame from %s (a retransmission or a replay): acknowledged, dropped unread", peer)
        return (None, _Replayed())
    return deserialize(opened.payload)


def _peer_of(sock: Any) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError, ValueError):
        return "unknown peer"


def enable_authentication(key: bytes, *, clock_skew_s: float = 60.0, max_frame_bytes: int = 256 << 20) -> None:
    """Make this process's Thespian TCP transport sign every frame and verify every frame before unpickling.

    Call it in the driver before the actor system starts (fork-started admin/actors inherit it).
    Idempotent for the same key; a different key raises ConfigError (running actors keep the old one).
    Frames older than Thespian's transmit timeout plus ``clock_skew_s`` are rejected; frames announcing
    more than ``max_frame_bytes`` are refused before they are buffered.
    """
    global _state
    from thespian.system.transport import DEFAULT_MAX_TRANSMIT_PERIOD

    auth = FrameAuth(key, max_age_s=DEFAULT_MAX_TRANSMIT_PERIOD.total_seconds() + clock_skew_s,
                     max_skew_s=clock_skew_s)
    with _install_lock:
        if _state is not None:
            if hmac.compare_digest(_state.auth.mac_key, auth.mac_key):
                return
            raise ConfigError("authentication is already enabled in this process with a different cluster key; "
                              "its actors keep the old key, so start a new process to use another one")
        _state = _Installed(auth, max_frame_bytes, {})
        try:
            _patch_thespian(_state)
        except Exception:
            _state = None
            raise
        os.register_at_fork(after_in_child=auth.reset_after_fork)


def enable_from_environment() -> bool:
    """Enable authentication if $AUDITION_CLUSTER_KEY or $AUDITION_CLUSTER_KEY_FILE is set; True if enabled."""
    key = load_cluster_key()
    if key is None:
        return False
    enable_authentication(key)
    return True


def authentication_enabled() -> bool:
    return _state is not None


_PATCHED = ("TCPTransport.serializer", "TCPTransport._check_XMIT_4_done", "TCPTransport._processReceivedEnvelope",
            "TCPIncoming_Common.__init__", "ReceiveBuffer", "ackMsg", "ackDataErrMsg", "ackPacket",
            "toSendBuffer", "get_multiproc_context")


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
    base_buffer = tt.ReceiveBuffer
    to_send = tt.toSendBuffer
    auth = st.auth
    for packet in (tt.ackPacket, ackDataErrPacket):
        st.ack_frames[auth.seal(dumps(packet), KIND_ACK)] = packet

    class AuthReceiveBuffer(base_buffer):  # type: ignore[misc, valid-type]
        """Thespian's ReceiveBuffer, but ``completed()`` unpickles only frames whose tag verifies."""

        peer = "unknown peer"

        def __init__(self, serializer: Callable[[bytes], Any] = pickle.loads) -> None:
            super().__init__(serializer)
            self._opened: Any = _UNSET
            self._refused = False

        def addMore(self, buf: bytes) -> None:
            if self._refused:
                return
            try:
                super().addMore(buf)
            except ValueError:  # stock Thespian raises; while awaiting an ACK that aborts the send silently
                self._refuse("unreadable frame length")
                return
            if self._size is None and len(self._buf) > _MAX_LENGTH_DIGITS:
                self._refuse("no frame length in the first bytes")
            elif self._size is not None and self._size > st.max_frame_bytes:
                self._refuse(f"frame announces {self._size} bytes (limit {st.max_frame_bytes})")

        def _refuse(self, reason: str) -> None:
            self._refused = True
            self._buf = self._extra = b""
            _reject(self.peer, reason)

        def isDone(self) -> bool:
            return self._refused or bool(super().isDone())

        def completed(self) -> Any:
            # None makes Thespian drop the frame: incoming -> ACK+DATAERR and close; awaiting an ACK -> retry.
            if self._refused or self._size is None or self._blen != self._size:
                return None
            if self._opened is _UNSET:  # memoized: the ACK path calls completed() twice on one buffer
                self._opened = _decode(self._buf, self.peer, self._deserialize)
            if self._opened is _REJECTED:
                return None
            return self._opened, self._extra

    def serializer(self: Any, intent: Any) -> bytes:
        return bytes(to_send((self.myAddress, intent.message), lambda obj: auth.seal(dumps(obj))))

    incoming_init = tt.TCPIncoming_Common.__init__

    def incoming_init_with_peer(self: Any, rmtAddr: Any, baseSock: Any, rcvBuf: Any = None) -> None:
        incoming_init(self, rmtAddr, baseSock, rcvBuf)
        if rcvBuf is None and isinstance(self._rData, AuthReceiveBuffer):
            self._rData.peer = _peer_of(baseSock)

    check_ack = tt.TCPTransport._check_XMIT_4_done

    def check_ack_with_peer(self: Any, intent: Any, rcv: Any) -> Any:
        buf = getattr(intent, "ackbuf", None)
        if isinstance(buf, AuthReceiveBuffer) and buf.peer == AuthReceiveBuffer.peer:
            buf.peer = f"{_peer_of(getattr(intent, 'socket', None))} (reply to {intent.targetAddr})"
        return check_ack(self, intent, rcv)

    process_envelope = tt.TCPTransport._processReceivedEnvelope

    def process_unless_replayed(self: Any, envelope: Any, has_exclusive_flag: bool = False) -> Any:
        if isinstance(envelope.message, _Replayed):
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
    tt.ReceiveBuffer = AuthReceiveBuffer
    tt.ackMsg, tt.ackDataErrMsg = (to_send(p, lambda obj: auth.seal(dumps(obj), KIND_ACK))
                                   for p in (tt.ackPacket, ackDataErrPacket))
    tt.TCPTransport.serializer = serializer
    tt.TCPTransport._check_XMIT_4_done = check_ack_with_peer
    tt.TCPTransport._processReceivedEnvelope = process_unless_replayed
    tt.TCPIncoming_Common.__init__ = incoming_init_with_peer
    log.debug("Thespian TCP transport authentication enabled")


__all__ = ["ENV_KEY", "ENV_KEY_FILE", "MIN_KEY_BYTES", "AuthError", "FrameAuth", "authentication_enabled",
           "check_key", "enable_authentication", "enable_from_environment", "load_cluster_key", "load_key_file"]
