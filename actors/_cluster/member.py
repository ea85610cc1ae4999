"""``audition worker``: a member actor system that joins a leader's convention.

It advertises its identity and resources as Thespian capabilities; the leader's
controller places trial actors on it and watches it with heartbeats.  It runs
until SIGINT/SIGTERM and then shuts its actor system (and every actor on it) down.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

from actors._driver.admin_start import _log_defs
from actors._driver.errors import ConfigError
from actors._driver.system import (
    _patch_transport,
    _start_authentication,
    free_port,
    parse_host_port,
    start_multiproc,
    start_on_chosen_port,
)
from actors._engine.placement import MEMBER_CAP, RESOURCES_CAP
from actors._process.children import record_child_exits
from actors._process.owner import watch_owner
from actors._tempdirs import sweep


def _route_addr(host: str) -> str:
    """This machine's address on the route to ``host`` (no packet is sent)."""
    if host.startswith("127."):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return str(s.getsockname()[0])


def parse_resources_arg(cpus: float | None, resources: str | None) -> dict[str, float]:
    out: dict[str, float] = {"cpu": float(cpus if cpus is not None else (os.cpu_count() or 1))}
    if resources:
        try:
            extra = json.loads(resources)
            out.update({str(k): float(v) for k, v in dict(extra).items()})
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"--resources must be a JSON object of numbers like '{{\"gpu\": 1}}', "
                              f"got {resources!r}") from exc
    return out


_EVERY_INTERFACE = ("0.0.0.0", "::", "*", "")
# after the worker command dies its admin shuts down at once; what has not exited by then is killed
WORKER_ORPHAN_KILL_S = 5.0


def _authenticate(host: str, key_file: str | None) -> None:
    """Turn on frame authentication before the system starts: the ``--key-file`` key, else the environment's."""
    if key_file is None:
        _start_authentication(host)
        return
    from actors._cluster.auth import enable_authentication
    from actors._cluster.auth_keys import load_key_file

    enable_authentication(load_key_file(key_file))


def _check_bind(bind: str | None, key_file: str | None) -> None:
    """``--bind`` every interface only with a cluster key (any process that reaches the port could run code)."""
    if bind is None or bind.strip("[]") not in _EVERY_INTERFACE:
        return
    from actors._cluster.auth_keys import ENV_KEY, load_cluster_key

    if key_file is None and load_cluster_key() is None:  # an empty $AUDITION_CLUSTER_KEY is refused here
        raise ConfigError(f"--bind {bind!r} listens on every interface and needs a cluster key: pass --key-file "
                          f"PATH or set ${ENV_KEY} (the same key as the leader), or bind the one address the leader "
                          "reaches (default: the one on the route to the leader); see docs/security.md")


def _listen_and_advertise(bind: str | None, leader_host: str) -> str:
    """Where the worker listens (returned) and, in $THESPIAN_BASE_IPADDR, the address it gives the
    leader: with ``--bind 0.0.0.0`` it listens everywhere but advertises the address on the route
    to the leader (0.0.0.0 is nobody's address)."""
    addr = bind.strip("[]") if bind else _route_addr(leader_host)
    if addr in _EVERY_INTERFACE:
        os.environ["THESPIAN_BASE_IPADDR"] = _route_addr(leader_host)
        os.environ["AUDITION_BIND_ADDR"] = ""  # Thespian's own default: every interface
        return "0.0.0.0"
    os.environ["THESPIAN_BASE_IPADDR"] = os.environ["AUDITION_BIND_ADDR"] = addr
    return addr


def run_worker(leader: str, bind: str | None = None, port: int | None = None, cpus: float | None = None,
               resources: str | None = None, member_id: str | None = None,
               stop: threading.Event | None = None, key_file: str | None = None,
               join_timeout_s: float = 10.0) -> int:
    """Join ``leader`` (HOST:PORT) and serve until interrupted.

    The cluster key comes from ``key_file`` (``--key-file``) or $AUDITION_CLUSTER_KEY /
    $AUDITION_CLUSTER_KEY_FILE; it is checked, and authentication enabled, before the system starts.
    Then one frame to the leader (``actors/_cluster/join.py``) checks that it listens (waiting up to
    ``join_timeout_s``) and accepts this worker's key: otherwise a ConfigError says why, and nothing runs.
    """
    # Re-register with the leader every few seconds (Thespian's default is 7m22s), so a
    # worker that lost its leader, or its link, rejoins quickly.  Read by Thespian at import.
    os.environ.setdefault("CONVENTION_REREGISTRATION_PERIOD", "0:05")

    lhost, lport = parse_host_port(leader, what="--leader")
    _check_bind(bind, key_file)
    res = parse_resources_arg(cpus, resources)
    addr = _listen_and_advertise(bind, lhost)
    _patch_transport()
    _authenticate(addr, key_file)
    from actors._cluster.auth import current_auth
    from actors._cluster.join import check_leader

    check_leader(lhost, lport, current_auth(), wait_s=join_timeout_s)
    try:
        drawn = None if port else free_port(addr)
    except OSError as exc:
        raise ConfigError(f"--bind {addr!r}: cannot listen there: {exc.strerror or exc}") from None

    def caps_for(p: int) -> dict[str, Any]:
        return {"Admin Port": p, "Convention Address.IPv4": (lhost, lport), "Process Startup Method": "fork",
                MEMBER_CAP: member_id or f"{socket.gethostname()}-{p}", RESOURCES_CAP: res}

    stop = stop or threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
    # whatever ends this command (even SIGKILL), its admin leaves the convention and every process
    # it started ends within seconds: the admin is detached, so it watches this process itself
    record_child_exits()  # the admin reaps this member's trial processes: it must hear each one's death
    watch_owner(shutdown_after_s=0.0, kill_after_s=WORKER_ORPHAN_KILL_S)
    if port:  # (the user's: taken, it is an error that says so)
        asys = start_multiproc(caps_for(port), addr, port)
    else:  # (drawn: taken meanwhile by another start, another is drawn)
        asys, port = start_on_chosen_port(caps_for, addr, first=drawn)
    ident = caps_for(port)[MEMBER_CAP]
    try:
        advertised = os.environ["THESPIAN_BASE_IPADDR"]
        where = f"{advertised}:{port}" + (f" (listening on {addr})" if addr != advertised else "")
        print(f"audition worker {ident}: admin {where}, resources {res}, leader {lhost}:{lport}", flush=True)
        while not stop.wait(0.5):
            pass
        print(f"audition worker {ident}: shutting down", flush=True)
    finally:
        asys.shutdown()
        sweep()  # temp dirs of this member's trial processes killed before removing them
    return 0


__all__ = ["run_worker"]


@contextlib.contextmanager
def _attach_only(gone: str) -> Iterator[None]:
    """``ActorSystem(...)`` inside may join a running admin but never start one: it raises ``ConfigError(gone)``."""
    from thespian.system.multiprocCommon import multiprocessCommon

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConfigError(gone)

    start = multiprocessCommon._startAdmin
    multiprocessCommon._startAdmin = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        multiprocessCommon._startAdmin = start  # type: ignore[method-assign]


def cluster_status(leader: str, timeout_s: float = 10.0, key_file: str | None = None) -> dict[str, Any]:
    """Ask the controller of the experiment led at ``leader`` (an address of this machine).

    ``key_file`` (``--key-file``) holds the cluster key; without it the environment's key, if any, is used.
    """
    import datetime

    from thespian.actors import ActorSystem

    from actors._driver.controller_client import CONTROLLER_NAME
    from actors._shell.controller import ControllerActor
    from actors.messages import ClusterStatus, ClusterStatusRequest

    host, port = parse_host_port(leader, what="--leader")
    if key_file is not None:
        from actors._cluster.auth_keys import load_key_file

        load_key_file(key_file)  # a bad key file is reported before the leader is probed
    with socket.socket() as s:
        s.settimeout(2.0)
        if s.connect_ex((host, port)) != 0:
            raise ConfigError(f"no audition leader listens on {host}:{port}; is the experiment running "
                              "with RunConfig(system='tcp://HOST:PORT')?")
    os.environ["THESPIAN_BASE_IPADDR"] = host
    os.environ["AUDITION_BIND_ADDR"] = host
    _patch_transport()
    _authenticate(host, key_file)
    from actors._cluster.auth import current_auth
    from actors._cluster.join import check_leader

    check_leader(host, port, current_auth(), wait_s=0)  # a wrong or missing key: said now, not after a timeout
    # An external client of the running system: never call shutdown() on it (that would stop the leader). Nor
    # start one: had the experiment ended since the check above, Thespian would start an admin of its own on the
    # leader's port (a detached process that outlives this command) and answer from an empty controller there.
    with _attach_only(f"the experiment on the leader at {host}:{port} ended while this command connected: "
                      "nothing listens there any more"):
        asys = ActorSystem("multiprocTCPBase", {"Admin Port": port}, logDefs=_log_defs(), transientUnique=True)
    controller = asys.createActor(ControllerActor, globalName=CONTROLLER_NAME)
    reply = asys.ask(controller, ClusterStatusRequest(), datetime.timedelta(seconds=timeout_s))
    if not isinstance(reply, ClusterStatus):
        raise ConfigError(f"the leader at {host}:{port} did not answer within {timeout_s:.0f}s")
    return {"experiment": reply.experiment, "members": list(reply.members), "trials": reply.trials}
