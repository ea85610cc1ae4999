"""The worker's join check: before its actor system starts, one frame to the leader's admin port.

Thespian's member registration fails silently: a worker whose frames the leader rejects (no key,
another key) or that dials a port where nothing listens just retries forever.  So ``audition worker``
first sends one frame of its own and reads the one answer Thespian's transport always gives:

* keyed worker: a signed *hello* frame (``actors/_cluster/auth_codec.py``, kind ``H``), naming the leader's
  address.  A leader with the same key answers the signed ACK and drops the hello unread; a leader
  with another key answers an ACK+DATAERR signed with *its* key; a leader without a key answers an
  unsigned ACK+DATAERR (its pickle cannot read a signed frame).
* worker without a key: a plain Thespian frame the leader's admin discards.  A keyless leader answers
  the plain ACK; a keyed one answers its signed ACK+DATAERR.

The answer is compared byte for byte, never unpickled.  Every failure is a ConfigError naming the fix,
raised before any process is started.
"""

from __future__ import annotations

import pickle
import socket
import time
from collections.abc import Callable

from actors._cluster.auth_codec import HEADER, KIND_ACK, KIND_HELLO, TAG_BYTES, FrameAuth
from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE
from actors._driver.errors import ConfigError

_REPLY_TIMEOUT_S = 5.0
_PROBE_MESSAGE = "audition join check (discarded)"


def _frame(body: bytes) -> bytes:
    return b"%d>" % len(body) + body


def _read_reply(sock: socket.socket, limit: int = 4096) -> bytes:
    """The first frame body the peer sends, or what it sent before closing (b"" if nothing)."""
    data = b""
    while len(data) < limit:
        chunk = sock.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
        head, mark, rest = data.partition(b">")
        if mark and head.isdigit() and len(rest) >= int(head):
            return rest[:int(head)]
    head, mark, rest = data.partition(b">")
    return rest if mark else data


def _looks_sealed(body: bytes) -> bool:
    """A signed audition frame (any key, any version): tag, then a version byte and kind ``A``."""
    return len(body) >= TAG_BYTES + 2 and body[TAG_BYTES] in (1, 2) and body[TAG_BYTES + 1:TAG_BYTES + 2] == KIND_ACK


def _pickles(name: str) -> set[bytes]:
    """``name`` as any pickle protocol a peer's Python may use by default."""
    return {pickle.dumps(name, protocol=p) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)}


def _plain(body: bytes) -> str | None:
    """Thespian's unsigned ACK strings, recognized by their pickles (never unpickled)."""
    for name in ("ACK+DATAERR", "ACK"):
        if body in _pickles(name):
            return name
    return None


def _resolve(host: str, port: int) -> tuple[str, int]:
    """The IPv4 address Thespian will dial for ``host`` (it resolves the convention address the same way)."""
    try:
        info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"--leader {host}:{port}: cannot resolve {host!r} ({exc.strerror})") from None
    return str(info[0][4][0]), port


def check_leader(host: str, port: int, auth: FrameAuth | None, wait_s: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
    """Return if the leader at ``host:port`` accepts this process's frames; else a ConfigError saying why.

    A refused connection is retried for ``wait_s`` seconds (the leader may still be starting).
    """
    where = f"{host}:{port}"
    ip, port = _resolve(host, port)
    key_hint = f"--key-file PATH or ${ENV_KEY_FILE} (or ${ENV_KEY})"
    if auth is not None:
        probe = _frame(auth.seal(b"", KIND_HELLO, recipient=(ip, port)))
    else:
        probe = _frame(pickle.dumps((None, _PROBE_MESSAGE)))
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with socket.create_connection((ip, port), timeout=_REPLY_TIMEOUT_S) as sock:
                sock.sendall(probe)
                reply = _read_reply(sock)
            break
        except (ConnectionRefusedError, ConnectionResetError) as exc:
            if time.monotonic() >= deadline:
                raise ConfigError(f"no audition leader listens on {where} (tried for {wait_s:g} s: {exc.strerror}); "
                                  "start the experiment first (RunConfig(system='tcp://HOST:PORT')) and give "
                                  "--leader that HOST:PORT") from None
            sleep(0.5)
        except TimeoutError:
            raise ConfigError(f"{where} accepted the connection but did not answer within {_REPLY_TIMEOUT_S:g} s; "
                              "is it the leader's admin port (RunConfig(system='tcp://HOST:PORT'))?") from None
        except OSError as exc:
            raise ConfigError(f"cannot reach the leader at {where}: {exc.strerror or exc}") from None
    _judge(reply, auth, where, key_hint)


def _judge(reply: bytes, auth: FrameAuth | None, where: str, key_hint: str) -> None:
    plain = _plain(reply)
    if auth is None:
        if plain == "ACK":
            return
        if _looks_sealed(reply):
            raise ConfigError(f"the leader at {where} requires a cluster key and this worker has none: give it the "
                              f"leader's key with {key_hint} (docs/security.md)")
    else:
        if len(reply) >= TAG_BYTES + HEADER.size and _accepted(auth, reply):
            return
        if plain is not None:
            raise ConfigError(f"the leader at {where} runs without a cluster key, but this worker has one: start the "
                              f"driver with the same ${ENV_KEY_FILE} or ${ENV_KEY} (a key is needed beyond loopback), "
                              "or start this worker without a key (loopback only); see docs/security.md")
        if _looks_sealed(reply):
            if _signed_by(auth, reply):
                raise ConfigError(f"the leader at {where} holds the same cluster key but refused this worker's frame: "
                                  "the two clocks differ by more than 60 s (run NTP), or the leader knows itself by "
                                  "another address (give --leader the HOST:PORT of its RunConfig(system=...))")
            raise ConfigError(f"the leader at {where} uses a different cluster key: give this worker the leader's key "
                              f"with {key_hint} (docs/security.md)")
    raise ConfigError(f"{where} answered, but not as an audition leader would ({len(reply)} bytes); is it the "
                      "leader's admin port (RunConfig(system='tcp://HOST:PORT'))?")


def _signed_by(auth: FrameAuth, body: bytes) -> bool:
    try:
        auth.open(body)
    except Exception:
        return False
    return True


def _accepted(auth: FrameAuth, body: bytes) -> bool:
    """The leader's answer is the ACK signed with this worker's key."""
    try:
        opened = auth.open(body)
    except Exception:
        return False
    return opened.kind == KIND_ACK and bytes(opened.payload) in _pickles("ACK")


__all__ = ["check_leader"]
