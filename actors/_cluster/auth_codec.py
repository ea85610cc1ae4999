"""The signed frame codec and the buffering budget of the authenticated transport; pure (no Thespian).

Frame body (inside Thespian's ``b"<len>>"`` length prefix)::

    tag(32) | version(1)=2 | kind(1) | unix ms(8) | nonce(8) | recipient port(2) | recipient IP(16) | payload

``tag = HMAC-SHA256(k, everything after the tag)`` with ``k`` derived from the cluster key.  Kinds:
``D`` data (a pickle), ``A`` ACK (two constants, no time, no nonce, no recipient), ``H`` hello (empty
payload: the worker's join check, answered by the transport and never delivered).  The recipient is
the listening address the sender dialled, so a frame captured on its way to one process is refused
by every other one (docs/security.md).  Split from ``actors/_cluster/auth.py`` (the Thespian glue).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import ipaddress
import logging
import os
import struct
import threading
import time
from typing import NamedTuple

from actors._cluster.auth_keys import check_key

VERSION = 2
KIND_DATA = b"D"
KIND_ACK = b"A"
KIND_HELLO = b"H"
TAG_BYTES = 32
HEADER = struct.Struct(">Bc Q 8s H 16s")  # version, kind, unix ms, nonce, recipient port, recipient IP
_CONTEXT = b"audition/thespian-tcp/v1"
_NO_IP = bytes(16)

log = logging.getLogger("audition.auth")


class AuthError(Exception):
    """A frame failed authentication; the message says why (never includes the frame)."""


class Opened(NamedTuple):
    kind: bytes
    payload: memoryview
    recipient: tuple[str, int]
    tag: bytes


def pack_ip(host: str) -> bytes:
    """16 bytes for an IPv4 or IPv6 address (IPv4 mapped into IPv6); zeros if ``host`` is not an address."""
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return _NO_IP
    return (ipaddress.IPv6Address(f"::ffff:{ip}") if ip.version == 4 else ip).packed


def unpack_ip(raw: bytes) -> str:
    ip = ipaddress.IPv6Address(raw)
    return str(ip.ipv4_mapped or ip)


class FrameAuth:
    """Seal and open frame bodies with one cluster key; unit-testable without Thespian."""

    def __init__(self, key: bytes, *, max_age_s: float, max_skew_s: float, replay_capacity: int = 200_000) -> None:
        check_key(key)
        self._setup(hmac.digest(key, _CONTEXT, "sha256"), max_age_s, max_skew_s, replay_capacity)

    @classmethod
    def from_mac_key(cls, mac_key: bytes, *, max_age_s: float, max_skew_s: float,
                     replay_capacity: int = 200_000) -> FrameAuth:
        """The codec another process built (``mac_key`` as derived there): for a process it starts afresh."""
        auth = cls.__new__(cls)
        auth._setup(mac_key, max_age_s, max_skew_s, replay_capacity)
        return auth

    def _setup(self, mac_key: bytes, max_age_s: float, max_skew_s: float, replay_capacity: int) -> None:
        self.mac_key = mac_key  # domain separation from other uses of the key
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

    def _tag(self, msg: bytes | memoryview) -> bytes:
        h = self._template.copy()
        h.update(msg)
        return h.digest()

    def seal(self, payload: bytes, kind: bytes = KIND_DATA, now: float | None = None,
             recipient: tuple[str, int] | None = None) -> bytes:
        """A signed body; data and hello frames name ``recipient`` (host, port), the address dialled."""
        if kind == KIND_ACK:  # constants: no timestamp, no nonce, no recipient
            msg = HEADER.pack(VERSION, KIND_ACK, 0, bytes(8), 0, _NO_IP) + payload
        else:
            host, port = recipient or ("", 0)
            ms = int((time.time() if now is None else now) * 1000)
            msg = HEADER.pack(VERSION, kind, ms, os.urandom(8), port & 0xFFFF, pack_ip(host)) + payload
        return self._tag(msg) + msg

    def open(self, body: bytes | bytearray | memoryview, now: float | None = None) -> Opened:
        """Verify ``body``; raise AuthError for a bad or missing tag, a wrong version or kind, a stale frame."""
        view = memoryview(body)
        if len(view) < TAG_BYTES + HEADER.size:
            raise AuthError(f"frame of {len(view)} bytes is too short to carry a tag")
        tag, msg = view[:TAG_BYTES], view[TAG_BYTES:]
        if not hmac.compare_digest(self._tag(msg), tag):
            raise AuthError("bad HMAC tag (peer without the cluster key, or a different key)")
        version, kind, ms, _nonce, port, ip = HEADER.unpack_from(msg)
        if version != VERSION:
            raise AuthError(f"unsupported auth frame version {version} (this process speaks {VERSION}: "
                            "run the same audition version on every host)")
        opened = Opened(kind, msg[HEADER.size:], (unpack_ip(ip), port), bytes(tag[:16]))
        if kind == KIND_ACK:
            return opened
        if kind not in (KIND_DATA, KIND_HELLO):
            raise AuthError(f"unknown frame kind {kind!r}")
        now = time.time() if now is None else now
        age = now - ms / 1000
        if age > self.max_age_s or age < -self.max_skew_s:
            raise AuthError(f"stale frame: sent {age:.1f} s ago (window -{self.max_skew_s:g}..{self.max_age_s:g} s; "
                            "are the hosts' clocks in sync?)")
        return opened

    def first_time(self, opened: Opened, now: float | None = None) -> bool:
        """False for a data frame this process accepted before (a retransmission after a lost ACK, or a replay)."""
        now = time.time() if now is None else now
        return not self._seen_before(opened.tag, now + self.max_age_s + self.max_skew_s, now)

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


class ByteBudget:
    """What all not-yet-verified frames of one process may hold together, so many connections that
    each send part of a large frame cannot exhaust memory: a frame reserves each chunk before it is
    buffered and gives it all back when it is verified, refused or dropped.  Only bytes actually held
    count, so a mere claim costs an attacker nothing and blocks nobody."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.generation = 0
        self._lock = threading.Lock()

    def reserve(self, n: int) -> int | None:
        """The generation to release into, or None if ``n`` more bytes would exceed the limit."""
        with self._lock:
            if self.used + n > self.limit:
                return None
            self.used += n
            return self.generation

    def release(self, n: int, generation: int) -> None:
        with self._lock:
            if generation == self.generation:  # a reservation made before a fork belongs to the parent
                self.used = max(0, self.used - n)

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self.used = 0
        self.generation += 1


__all__ = ["HEADER", "KIND_ACK", "KIND_DATA", "KIND_HELLO", "TAG_BYTES", "VERSION", "AuthError", "ByteBudget",
           "FrameAuth", "Opened", "pack_ip", "unpack_ip"]
