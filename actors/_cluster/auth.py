"""Authenticated mode for Thespian's TCP transport: no byte from a peer without the cluster key is unpickled.

Thespian 4.0.1 pickles every message and ACK and unpickles every complete frame it reads, so anyone who
reaches an admin or actor port can run code.  ``enable_authentication`` is the one entry point: it
installs this process's key and limits and patches those points in the driver before the actor system
starts; the fork-started admin, logger and actors inherit the patch.  The pieces:

* ``auth_codec``: every frame carries an HMAC tag and names the address it was sent to;
* ``auth_keys``: where the cluster key comes from and what a key must be;
* ``auth_reader``: the receive side (``AuthReceiveBuffer``), which refuses a bad length prefix before
  buffering a byte of the body and unpickles only a frame whose tag verifies, that is fresh, addressed
  to this process and not seen before;
* ``auth_patch``: the Thespian internals replaced.

No encryption: see docs/security.md.
"""

from __future__ import annotations

import hmac
import os
import threading
from typing import Any

from actors._cluster import auth_reader
from actors._cluster.auth_codec import AuthError, ByteBudget, FrameAuth

# the key's sources and rules live in auth_keys; re-exported so ``actors._cluster.auth`` stays the one entry point
from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE, MIN_KEY_BYTES, check_key, load_cluster_key, load_key_file
from actors._cluster.auth_patch import patch_thespian
from actors._cluster.auth_reader import Installed
from actors._driver.errors import ConfigError

_install_lock = threading.Lock()


def enable_authentication(key: bytes, *, clock_skew_s: float = 60.0, max_frame_bytes: int = 256 << 20,
                          max_buffered_bytes: int = 512 << 20) -> None:
    """Make this process's Thespian TCP transport sign every frame and verify every frame before unpickling.

    Call it in the driver before the actor system starts (fork-started admin/actors inherit it).
    Idempotent for the same key; a different key raises ConfigError (running actors keep the old one).
    Frames older than Thespian's transmit timeout plus ``clock_skew_s`` are rejected.  A frame that
    announces more than ``max_frame_bytes``, or more than what is left of ``max_buffered_bytes`` (all
    frames of one process still being received, together), is refused before its body is read.
    """
    from thespian.system.transport import DEFAULT_MAX_TRANSMIT_PERIOD

    if max_buffered_bytes < max_frame_bytes:
        raise ConfigError(f"max_buffered_bytes ({max_buffered_bytes}) must be at least max_frame_bytes "
                          f"({max_frame_bytes}), or no frame of the largest size could ever be received")
    auth = FrameAuth(key, max_age_s=DEFAULT_MAX_TRANSMIT_PERIOD.total_seconds() + clock_skew_s,
                     max_skew_s=clock_skew_s)
    _install(auth, max_frame_bytes, max_buffered_bytes)


def _install(auth: FrameAuth, max_frame_bytes: int, max_buffered_bytes: int) -> None:
    with _install_lock:
        current = auth_reader.installed()
        if current is not None:
            if hmac.compare_digest(current.auth.mac_key, auth.mac_key):
                return
            raise ConfigError("authentication is already enabled in this process with a different cluster key; "
                              "its actors keep the old key, so start a new process to use another one")
        budget = ByteBudget(max_buffered_bytes)
        state = Installed(auth, max_frame_bytes, budget, {})
        auth_reader.install(state)
        try:
            patch_thespian(state)
        except Exception:
            auth_reader.install(None)
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


def authentication_settings() -> dict[str, Any] | None:
    """This process's authentication, for a process it starts afresh (the actor system's own interpreter,
    ``actors._driver.fresh_system``): the derived MAC key and the limits, never the key. None: not enabled."""
    state = auth_reader.installed()
    if state is None:
        return None
    return {"mac_key": state.auth.mac_key.hex(), "max_age_s": state.auth.max_age_s,
            "max_skew_s": state.auth.max_skew_s, "replay_capacity": state.auth.replay_capacity,
            "max_frame_bytes": state.max_frame_bytes, "max_buffered_bytes": state.budget.limit}


def enable_with_settings(settings: dict[str, Any]) -> None:
    """Enable what ``authentication_settings`` returned in the process that started this one."""
    auth = FrameAuth.from_mac_key(bytes.fromhex(settings["mac_key"]), max_age_s=float(settings["max_age_s"]),
                                  max_skew_s=float(settings["max_skew_s"]),
                                  replay_capacity=int(settings["replay_capacity"]))
    _install(auth, int(settings["max_frame_bytes"]), int(settings["max_buffered_bytes"]))


def authentication_enabled() -> bool:
    return auth_reader.installed() is not None


def current_auth() -> FrameAuth | None:
    """The codec of this process's cluster key, if authentication is enabled (the worker's join check)."""
    state = auth_reader.installed()
    return None if state is None else state.auth


__all__ = ["ENV_KEY", "ENV_KEY_FILE", "MIN_KEY_BYTES", "AuthError", "FrameAuth", "authentication_enabled",
           "authentication_settings", "enable_with_settings",
           "check_key", "current_auth", "enable_authentication", "enable_from_environment", "load_cluster_key",
           "load_key_file"]
