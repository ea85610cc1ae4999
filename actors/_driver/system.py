"""Starting and always stopping Thespian actor systems.

The multi-process default is Thespian's TCP base bound to loopback on a free
port chosen per run: the queue base never reports a SIGKILLed child and its admin
dies on one bad message (see ../shared/notes/thespian.md), and a fixed port lets
a later run attach to a stale admin.  Thespian binds its sockets on every
interface; ``_bind_loopback`` narrows that to the advertised address. Thespian pickles each message;
``_pickle_by_value_when_needed`` lets one plain pickle refuses (a lambda in a config) go by cloudpickle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import threading
from collections.abc import Iterator
from typing import Any

from actors._driver.admin_start import (
    free_port,
    start_multiproc,
    start_on_chosen_port,
)
from actors._driver.errors import ConfigError
from actors._driver.interrupt import Interrupted
from actors._engine.placement import MEMBER_CAP, RESOURCES_CAP
from actors._process.children import pid_alive, record_child_exits
from actors._process.hygiene import runs_in_process_system
from actors._process.owner import watch_owner

_patched = False
log = logging.getLogger("audition")


def _patch_transport() -> None:
    """Thespian's TCP transport as audition needs it; call before the actor system starts (and before
    authentication, which signs what this pickler writes): fork-started processes inherit it."""
    _bind_loopback()
    _pickle_by_value_when_needed()


class _ByValueWhenNeeded:
    """Thespian's pickler (``TCPTransport``'s module-level ``serializer``, plain ``pickle``) falling back to
    cloudpickle for a message plain pickle refuses: a lambda or a local function in a config (Ray passes
    such a ``param_space`` value to the trainable as it is) or in a result. Before, the send was declared
    poison and the run hung until the driver gave up. Every other message is pickled as before."""

    loads = staticmethod(pickle.loads)

    @staticmethod
    def dumps(obj: Any) -> bytes:
        try:
            return pickle.dumps(obj)
        except (pickle.PicklingError, AttributeError, TypeError):  # (what cannot go by value raises again)
            import cloudpickle

            return bytes(cloudpickle.dumps(obj))


def _pickle_by_value_when_needed() -> None:
    from thespian.system.transport import TCPTransport

    TCPTransport.serializer = _ByValueWhenNeeded  # type: ignore[assignment]


def _bind_loopback() -> None:
    """Make Thespian's TCP sockets bind to THESPIAN_BASE_IPADDR instead of 0.0.0.0."""
    global _patched
    if _patched:
        return
    from thespian.system.transport import IPBase

    original = IPBase.IPActorAddress.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        base = os.environ.get("AUDITION_BIND_ADDR")
        if base and self.bindname and self.bindname[0] == "":
            self.bindname = (base, self.bindname[1])

    IPBase.IPActorAddress.__init__ = __init__  # type: ignore[method-assign]
    _patched = True


def _start_authentication(host: str) -> None:
    """Sign and verify every Thespian TCP frame if a cluster key is configured; call before ActorSystem().

    Fork-started admin, logger and actors inherit the patch (see actors/_cluster/auth.py, docs/security.md).
    """
    from actors._cluster.auth import enable_from_environment
    from actors._cluster.auth_keys import ENV_KEY, ENV_KEY_FILE

    if enable_from_environment() or host.startswith("127."):
        return
    if os.environ.get("AUDITION_ALLOW_UNAUTHENTICATED") == "1":
        log.warning("no cluster key ($%s or $%s): anyone who can reach %s can run code in this actor system; "
                    "see docs/security.md", ENV_KEY, ENV_KEY_FILE, host)
        return
    raise ConfigError(
        f"refusing to listen on {host} without a cluster key: Thespian unpickles whatever reaches its port, "
        f"so anyone who can connect could run code here. Set ${ENV_KEY} (or ${ENV_KEY_FILE}) to the same secret "
        "on every host, or set AUDITION_ALLOW_UNAUTHENTICATED=1 on a network you fully trust (docs/security.md)")


def parse_host_port(text: str, what: str) -> tuple[str, int]:
    """'HOST:PORT' or ':PORT'/'PORT' (loopback): never silently every interface."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    if host in ("0.0.0.0", "::", "*"):
        raise ConfigError(f"{what}: binding every interface ({host}) is refused; name the address peers use")
    try:
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not HOST:PORT with a port from 1 to 65535") from None
    return host, number


def prepare_client(host: str) -> None:
    """What every process that starts or attaches to a system on ``host`` needs first: the address its
    sockets bind, the same transport, the same signing."""
    os.environ["THESPIAN_BASE_IPADDR"] = host
    os.environ["AUDITION_BIND_ADDR"] = host
    _patch_transport()
    _start_authentication(host)


def held_interrupts() -> _Interrupts:
    """Ctrl-C and SIGTERM held (for a start done outside ``actor_system``)."""
    return _Interrupts()


@contextlib.contextmanager
def actor_system(kind: str, leader_resources: dict[str, float] | None = None, *,
                 fresh_reason: str | None = None) -> Iterator[Any]:
    """Yield a fresh actor system of ``kind``; it is shut down on every exit path. ``fresh_reason``
    (``fresh_system.fork_unsafe_reason()``): start it from a fresh interpreter, not by forking this process.

    Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` while it runs, and are held while it starts
    and while it shuts down: one landing in between would leave an admin nobody shuts down. Code that
    calls into Thespian while it runs holds them too (``asys.audition_interrupts``): raised inside
    Thespian's transport, mid-send or mid-receive, the exception can leave a message half sent.
    """
    with _Interrupts() as interrupts:
        asys = _start(kind, leader_resources, fresh_reason)
        asys.audition_interrupts = interrupts
        try:
            interrupts.deliver()
            yield asys
        finally:
            interrupts.hold(firm=True)
            try:
                asys.shutdown()
            finally:
                helper = getattr(asys, "audition_helper", None)
                if helper is not None:
                    from actors._driver.fresh_system import end_helper

                    end_helper(helper)
        interrupts.deliver()  # one that came during the shutdown still interrupts, now that all is down


# After its driver dies, the admin asks for its own shutdown (the controller normally has already:
# it writes the final state first) and kills what is left (see actors/_process/owner.py).
ORPHAN_SHUTDOWN_S = 8.0
ORPHAN_KILL_S = 15.0


def _start(kind: str, leader_resources: dict[str, float] | None, fresh_reason: str | None = None) -> Any:
    if kind != "simple" and fresh_reason is not None:
        from actors._driver.fresh_system import start_fresh

        log.info("%s: the actor system starts from a fresh interpreter (trials get this process's sys.path, "
                 "environment and working directory, not its memory)", fresh_reason)
        return start_fresh(kind, leader_resources)
    return start_here(kind, leader_resources)


def start_here(kind: str, leader_resources: dict[str, float] | None) -> Any:
    """Start ``kind``'s system from this process: Thespian forks the admin, and every actor, from here."""
    from thespian.actors import ActorSystem

    if kind == "simple":
        runs_in_process_system()  # (this process may be the user's multiprocessing worker, not a main process)
        return ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)
    if kind == "multiproc":
        prepare_client(os.environ.get("THESPIAN_BASE_IPADDR", "127.0.0.1"))
        record_child_exits()  # before the admin forks: every process of the system hears each child's death
        watch_owner(ORPHAN_SHUTDOWN_S, ORPHAN_KILL_S)
        asys, port = start_on_chosen_port(lambda p: {"Admin Port": p, "Process Startup Method": "fork"},
                                          os.environ["THESPIAN_BASE_IPADDR"])
        asys.audition_admin_port = port
        return asys
    if kind.startswith("tcp://"):
        host, port = parse_host_port(kind[len("tcp://"):], what="RunConfig(system=...)")
        prepare_client(host)
        caps = {"Admin Port": port, "Process Startup Method": "fork", MEMBER_CAP: "leader",
                RESOURCES_CAP: dict(leader_resources or {})}
        record_child_exits()  # before the admin forks: every process of the system hears each child's death
        watch_owner(ORPHAN_SHUTDOWN_S, ORPHAN_KILL_S)
        try:
            asys = start_multiproc(caps, host, port)
        except ConfigError:  # (names the problem itself: the port taken, the admin not coming up)
            raise
        except Exception as exc:
            raise ConfigError(f"could not start the convention leader on {host}:{port} ({exc}); is the port "
                              "free and the address one of this machine's?") from exc
        asys.audition_admin_port = port
        return asys
    raise ConfigError(f"unknown actor system {kind!r}: use 'multiproc', 'simple' or 'tcp://HOST:PORT'")


class _Interrupts:
    """SIGINT/SIGTERM -> ``KeyboardInterrupt`` in the driver, or held for later while ``holding``."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.holding = True
        self.firm = True  # while the system starts or shuts down: a signal waits, however many come
        self.pending: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)

    def _handler(self, signum: int, frame: Any) -> None:
        if self.holding and (self.firm or self.pending is None):
            self.pending = signum
            return
        # a second signal while the first waits on a call into the running system: that call has not
        # returned (a runaway in-process experiment, say), so it is raised where the driver is, as Ray's
        # second Ctrl-C is
        self.pending = None
        raise Interrupted(signum)

    def hold(self, firm: bool = False) -> None:
        """Hold signals from now; ``firm`` (starting or shutting down) holds every one, otherwise a second
        signal while one is held is raised at once."""
        self.holding = True
        self.firm = firm

    def deliver(self) -> None:
        self.holding = False
        self.firm = False
        if self.pending is not None:
            signum, self.pending = self.pending, None
            raise Interrupted(signum)


def shutdown_orphaned_system(admin_port: int) -> None:
    """Shut down the system at ``admin_port`` from a fresh process (its driver is gone).

    Called from inside an actor, which cannot use the external API itself; the new
    process does exactly what the driver's ``shutdown()`` would have done.
    """
    import subprocess
    import sys

    from actors._cluster.auth import authentication_enabled

    code = ("from thespian.actors import ActorSystem; "
            f"ActorSystem('multiprocTCPBase', {{'Admin Port': {int(admin_port)}}}).shutdown()")
    env = dict(os.environ)
    if authentication_enabled():  # the admin rejects unsigned frames: sign with the key from the environment
        code = "from actors._cluster.auth import enable_from_environment; assert enable_from_environment(); " + code
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True, env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


__all__ = ["actor_system", "free_port", "pid_alive", "shutdown_orphaned_system", "start_multiproc"]
