"""The cluster key: where it comes from (environment, ``--key-file``) and what makes it acceptable.

Split from ``actors/_cluster/auth.py`` (the signed frame codec and the Thespian transport patch) because the
CLI and worker read and validate a key without touching the transport.  Problems are ConfigErrors
naming the variable or the path, raised before any actor system starts.  Warnings go to the
``audition.auth`` logger, like the rest of authentication.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping

from actors._driver.errors import ConfigError

ENV_KEY = "AUDITION_CLUSTER_KEY"
ENV_KEY_FILE = "AUDITION_CLUSTER_KEY_FILE"
MIN_KEY_BYTES = 16

log = logging.getLogger("audition.auth")


def check_key(key: bytes) -> None:
    if not isinstance(key, bytes):
        raise ConfigError(f"cluster key must be bytes, got {type(key).__name__}")
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"cluster key is {len(key)} bytes; use at least {MIN_KEY_BYTES} "
                          "(e.g. python -c 'import secrets; print(secrets.token_hex(32))')")


def refuse_empty(environ: Mapping[str, str] | None = None) -> None:
    """A key variable set to "" (or blanks) is a mistake, never "no key": ``export AUDITION_CLUSTER_KEY=$KEY``
    with ``$KEY`` unset would otherwise run the cluster without authentication."""
    env = os.environ if environ is None else environ
    for name in (ENV_KEY, ENV_KEY_FILE):
        if name in env and not env[name].strip():
            what = "the path of the cluster key file" if name == ENV_KEY_FILE else "the cluster key"
            raise ConfigError(f"${name} is set but empty: set it to {what} (the same key on every host), or unset "
                              "it to run without a key (loopback only); see docs/security.md")


def load_cluster_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key from $AUDITION_CLUSTER_KEY (its UTF-8 bytes) or the file named by $AUDITION_CLUSTER_KEY_FILE.

    None when neither is set; a variable set to an empty value is refused.  The file must not be
    readable by group or others (like ssh keys); trailing whitespace is stripped so ``echo KEY > file`` works.
    """
    env = os.environ if environ is None else environ
    refuse_empty(env)
    value, path = env.get(ENV_KEY), env.get(ENV_KEY_FILE)
    if value and path:
        raise ConfigError(f"set only one of ${ENV_KEY} and ${ENV_KEY_FILE}")
    if value:
        key = value.encode("utf-8")
    elif path:
        try:
            mode = os.stat(path).st_mode
            with open(path, "rb") as f:
                key = f.read().rstrip()
        except OSError as e:
            raise ConfigError(f"${ENV_KEY_FILE}={path!r}: cannot read the cluster key file: {e}") from e
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"${ENV_KEY_FILE}={path!r} is accessible by group/others; run: chmod 600 {path}")
    else:
        return None
    check_key(key)
    return key


def load_key_file(path: str, *, option: str = "--key-file") -> bytes:
    """The cluster key in the file at ``path`` (trailing whitespace stripped), for a ``--key-file`` option.

    Every problem is a ConfigError naming the path: missing, not a regular file, unreadable, empty or
    too short.  A file readable or writable by anyone but its owner (mode wider than 0600) is used,
    with a warning to ``chmod 600`` it.  Setting $AUDITION_CLUSTER_KEY or $AUDITION_CLUSTER_KEY_FILE
    as well is refused, so only one key can be in effect.
    """
    where = f"{option} {path!r}"
    for name in (ENV_KEY, ENV_KEY_FILE):
        if name in os.environ:
            empty = " (to an empty value)" if not os.environ[name].strip() else ""
            raise ConfigError(f"{where}: ${name} is also set{empty}; give the cluster key only one way")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such cluster key file") from None
    except OSError as e:
        raise ConfigError(f"{where}: cannot read the cluster key file: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{where}: not a regular file")
    try:
        with open(path, "rb") as f:
            key = f.read().rstrip()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read the cluster key file: {e.strerror or e}") from None
    if not key:
        raise ConfigError(f"{where}: the cluster key file is empty")
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"{where}: the cluster key is {len(key)} bytes; use at least {MIN_KEY_BYTES} "
                          "(e.g. python -c 'import secrets; print(secrets.token_hex(32))' > FILE)")
    if st.st_mode & 0o177:
        log.warning("%s: permissions %03o are wider than 0600; anyone who can read the key can run code on "
                    "every host of the cluster: run chmod 600 %s", where, stat.S_IMODE(st.st_mode), path)
    return key


__all__ = ["ENV_KEY", "ENV_KEY_FILE", "MIN_KEY_BYTES", "check_key", "load_cluster_key", "load_key_file", "refuse_empty"]
