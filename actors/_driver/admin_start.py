"""Starting a multi-process actor system's admin on a port, and making sure the admin is this start's own.

Thespian's ``ActorSystem("multiprocTCPBase", {"Admin Port": P})`` starts an admin on P, or, when an admin
already answers there, silently attaches to it. For audition that second case is never wanted: a run, a
multi-host leader or an ``audition worker`` that attached to another run's admin would place its actors
in that run's system and, at its end, shut that system down. That happened once in CI: a multi-host test's
leader found its port held by another pytest worker's multi-host test (its leader or one of its members) and
joined it; both tests timed out.
So every start here checks that the port is free first, and afterwards that the admin which answers
carries the nonce this start gave it.
"""

from __future__ import annotations

import logging
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from actors._driver.errors import ConfigError

log = logging.getLogger("audition")

# PendingActorResponse.ERROR_ActorSystem_Shutting_Down: a create that raced the system's own shutdown
_SHUTTING_DOWN = 0xE01

# The capability that marks an admin as one start's own (a fresh value for every start)
START_CAP = "audition.admin_start"

# How long an admin that did not answer within Thespian's 5 s may take to bind its port
ADMIN_LATE_S = 20.0

# How long the admin may take to answer the status request that proves it is this start's own
OWN_CHECK_S = 30.0

# Starts on a port audition chose: another draw after a port that turned out taken
CHOSEN_PORT_ATTEMPTS = 3


class PortTaken(ConfigError):
    """The port named for a new admin is held by another process (where audition chose it: choose again)."""


class ShutdownNoise(logging.Filter):
    """Drops Thespian's "Pending Actor create for ... failed (3585)" lines.

    3585 is Thespian's "actor system shutting down" answer to an actor create still pending when
    a multi-host run ends; nothing is lost by it, and an ERROR line at every end would teach users
    to ignore errors. Every other failed create is still logged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()  # records from actor processes arrive already formatted
        except Exception:
            return True
        return not (text.startswith("Pending Actor create for") and f" failed ({_SHUTTING_DOWN}):" in text)


def _log_defs() -> dict[str, Any]:
    """Thespian's own logging: warnings and above to stderr of the admin (not the user's root logger)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"shutdown": {"()": f"{__name__}.ShutdownNoise"}},
        "handlers": {"h": {"class": "logging.StreamHandler", "level": "WARNING", "filters": ["shutdown"]}},
        "root": {"handlers": ["h"], "level": "WARNING"},
    }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, below the kernel's ephemeral range when there is room.

    A port the kernel hands out for ``bind(0)`` lies in that range, and once released it may go to
    any process's next ``bind(0)`` or outgoing connection: Thespian's actors listen that way, so an
    actor of another run could hold the port before the admin binds it, and the start then fails
    after 11 s with "not a valid or useable ActorSystem Admin" (seen once, with the test suite in
    four processes on a loaded machine). Below the range only a process that names the port takes it
    (another start that drew the same port: ``start_on_chosen_port`` draws again).
    """
    low = _ephemeral_low()
    if low is not None and low > 2048:
        draw = random.SystemRandom()  # (never the global stream: a user's seeded draws must not move)
        port = first_bindable(host, (draw.randrange(max(1024, low - 10_000), low) for _ in range(64)))
        if port is not None:
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def first_bindable(host: str, ports: Iterable[int]) -> int | None:
    """The first of ``ports`` that can be bound on ``host`` now (the probe is released at once); None if none."""
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    return None


def _ephemeral_low() -> int | None:
    """The first port of the kernel's ephemeral range (Linux), None where it cannot be read."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def start_on_chosen_port(caps_for: Callable[[int], dict[str, Any]], host: str,
                         first: int | None = None) -> tuple[Any, int]:
    """``start_multiproc`` on a port ``free_port`` draws (``first``, when given, is the first draw), drawing
    again (up to ``CHOSEN_PORT_ATTEMPTS`` times) when another process took the port between the draw and
    the start; the system and its port."""
    for attempt in range(1, CHOSEN_PORT_ATTEMPTS + 1):
        port = first if attempt == 1 and first is not None else free_port(host)
        try:
            return start_multiproc(caps_for(port), host, port), port
        except PortTaken:
            if attempt == CHOSEN_PORT_ATTEMPTS:
                raise
            log.info("port %d was taken by another process as this actor system started; drawing another", port)
    raise AssertionError("unreachable")


def start_multiproc(caps: dict[str, Any], host: str, port: int) -> Any:
    """A multi-process system whose admin this process starts on ``host:port`` (a run's own, a
    multi-host leader, an ``audition worker``); ``PortTaken`` when another process holds the port,
    before the start or by the time the admin answers.

    On a loaded machine the admin Thespian forks may take longer than the 5 s Thespian waits for it
    (seen in CI: "not a valid ActorSystem admin", and the admin left running): Thespian gives up but
    the admin still comes up. Then, once its port is bound, a second start attaches to it, and the
    nonce check tells whether that admin is this start's.
    """
    if _bound(host, port, 0.0):
        raise PortTaken(_taken(host, port))
    nonce = uuid.uuid4().hex
    asys = _start_or_attach({**caps, START_CAP: nonce}, host, port)
    _check_own(asys, nonce, host, port)
    return asys


def _start_or_attach(caps: dict[str, Any], host: str, port: int) -> Any:
    from thespian.actors import ActorSystem, InvalidActorAddress

    try:
        return ActorSystem("multiprocTCPBase", caps, logDefs=_log_defs(), transientUnique=True)
    except InvalidActorAddress as exc:
        first = exc
    if not _bound(host, port, ADMIN_LATE_S):
        raise ConfigError(f"the actor system did not start: its admin process did not come up within "
                          f"{5 + ADMIN_LATE_S:.0f} s ({first}); is the machine overloaded? Try again") from first
    log.info("the actor system's admin answered late (a loaded machine); attaching to it")
    try:
        return ActorSystem("multiprocTCPBase", caps, logDefs=_log_defs(), transientUnique=True)
    except InvalidActorAddress as exc:
        raise ConfigError(f"the actor system did not start: its admin on port {port} does not answer ({exc}); "
                          "is the machine overloaded? Try again") from exc


def _check_own(asys: Any, nonce: str, host: str, port: int) -> None:
    """Raise ``PortTaken`` unless the admin ``asys`` talks to carries ``nonce``. Another's admin is left
    running (it is not this process's to stop); so is one that does not answer (it may be another's)."""
    from thespian.system.messages.status import Thespian_StatusReq

    reply = asys.ask(asys._systemBase.adminAddr, Thespian_StatusReq(), OWN_CHECK_S)
    caps = getattr(reply, "capabilities", None)
    if caps is None:
        raise ConfigError(f"the actor system on {host}:{port} did not answer a status request within "
                          f"{OWN_CHECK_S:.0f} s, so whether this run started it is unknown; is the machine "
                          "overloaded? Try again")
    if caps.get(START_CAP) != nonce:
        raise PortTaken(_taken(host, port))


def _taken(host: str, port: int) -> str:
    return (f"port {port} on {host} is already in use by another process (another audition run or worker, or "
            "another program); stop that process or choose another port")


def _bound(host: str, port: int, timeout_s: float) -> bool:
    """Whether something binds ``host:port`` within ``timeout_s`` (Thespian's own probe: a bind that fails)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)  # (polling a port another process is about to bind: nothing to wait on)


__all__ = ["ADMIN_LATE_S", "PortTaken", "ShutdownNoise", "first_bindable", "free_port", "start_multiproc",
           "start_on_chosen_port"]
