"""``--key-file`` for ``audition worker`` and ``audition cluster status``, with real processes.

The leader is an authenticated actor system in a subprocess (``tests/test_auth_transport.py``'s
``serve`` mode) that takes its key from $AUDITION_CLUSTER_KEY; the worker is ``audition worker``
with the same key in a 0600 file.  Every process started here is killed in ``finally``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests._cluster import exit_code_or_stacks, wait_for
from tests._ports import leader_port
from tests.test_auth_transport import KEY, WRONG_KEY, Server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUDITION_CLUSTER_KEY", "AUDITION_ALLOW"))}
    env["PYTHONPATH"] = ROOT
    env["PYTHONFAULTHANDLER"] = "1"  # (a worker that does not exit is aborted to show its stacks: exit_code_or_stacks)
    return env


def _cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "actors._cli", *args], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=timeout_s)


def _key_file(tmp_path: Path, text: str, mode: int = 0o600, name: str = "key") -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def _family(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if tag in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def _kill_family(tag: str) -> None:
    for p in _family(tag):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(_family(tag), timeout=5)


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path, "leader", KEY, watch=True)  # key from $AUDITION_CLUSTER_KEY
    try:
        yield srv
    finally:
        leaked = srv.close()
        assert not leaked, f"leader processes outlived a clean shutdown: {leaked}"


def _joined(leader: Server, port: int) -> list[Any]:
    return [u for u in leader.request("updates")["updates"] if f":{port})" in u[0] and u[2]]


def _keyed_worker(leader: Server, tmp_path: Path, name: str,
                  bind: str) -> tuple[str, int, Path, subprocess.Popen[bytes]]:
    """``audition worker --key-file`` joining ``leader``; (its --id, its port, its log, the process)."""
    key_file = _key_file(tmp_path, KEY + "\n")
    tag = f"keyfile-{name}-{uuid.uuid4().hex[:8]}"
    port = leader_port()
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{leader.ready['admin_port']}",
             "--bind", bind, "--port", str(port), "--cpus", "1", "--id", tag, "--key-file", key_file],
            cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    return tag, port, log_path, worker


def test_worker_with_key_file_joins_leader_keyed_by_env(leader: Server, tmp_path: Path) -> None:
    assert leader.ready["auth"]
    tag, port, log_path, worker = _keyed_worker(leader, tmp_path, "worker", "127.0.0.1")
    try:
        wait_for(lambda: _joined(leader, port), 30, "the --key-file worker to join the leader")
        assert "rejected frame" not in leader.log(), leader.log()[-3000:]
        worker.send_signal(signal.SIGTERM)
        assert exit_code_or_stacks(worker, 30, log_path) == 0, log_path.read_text()
        wait_for(lambda: not _family(tag), 20, "the worker's actor system to exit")
        assert "wider than 0600" not in log_path.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        _kill_family(tag)


def test_worker_bound_to_every_interface_advertises_a_reachable_address(leader: Server, tmp_path: Path) -> None:
    """--bind 0.0.0.0 listens everywhere but registers the address on the route to the leader."""
    import psutil

    tag, port, log_path, worker = _keyed_worker(leader, tmp_path, "any", "0.0.0.0")
    try:
        joined = wait_for(lambda: _joined(leader, port), 30, "the every-interface worker to join the leader")
        assert joined, "joined"
        listening = {c.laddr.ip for c in psutil.net_connections("tcp4")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        assert listening == {"0.0.0.0"}, listening
        assert f"admin 127.0.0.1:{port} (listening on 0.0.0.0)" in log_path.read_text()
        worker.send_signal(signal.SIGTERM)
        assert exit_code_or_stacks(worker, 30, log_path) == 0, log_path.read_text()
        wait_for(lambda: not _family(tag), 20, "the worker's actor system to exit")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        _kill_family(tag)


@pytest.mark.slow
def test_worker_with_wrong_key_file_is_rejected(leader: Server, tmp_path: Path) -> None:
    """It no longer retries forever in silence: its join check fails, it says why and exits 2."""
    key_file = _key_file(tmp_path, WRONG_KEY)
    tag = f"keyfile-wrong-{uuid.uuid4().hex[:8]}"
    port = leader_port()
    worker = subprocess.Popen(
        [sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{leader.ready['admin_port']}",
         "--bind", "127.0.0.1", "--port", str(port), "--id", tag, "--key-file", key_file],
        cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _out, err = worker.communicate(timeout=60)
        assert worker.returncode == 2 and "uses a different cluster key" in err, err[-2000:]
        wait_for(lambda: "rejected frame" in leader.log(), 30, "the leader to reject the wrong key's frame")
        assert not _joined(leader, port) and not _family(tag)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        _kill_family(tag)


def _bad(res: subprocess.CompletedProcess[str], verb: str, *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stderr.startswith(f"audition {verb}: "), res.stderr[-2000:]
    for n in needles:
        assert n in res.stderr, res.stderr[-2000:]


def test_bad_key_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-key")
    leader = f"127.0.0.1:{leader_port()}"  # nobody listens: the key file is checked first
    _bad(_cli("worker", "--leader", leader, "--key-file", missing), "worker", missing, "no such cluster key file")
    _bad(_cli("cluster", "status", "--leader", leader, "--key-file", missing), "cluster status", missing,
         "no such cluster key file")
    empty = _key_file(tmp_path, "\n", name="empty")
    _bad(_cli("worker", "--leader", leader, "--key-file", empty), "worker", empty, "is empty")
    short = _key_file(tmp_path, "short", name="short")
    _bad(_cli("worker", "--leader", leader, "--key-file", short), "worker", short, "at least 16")
    _bad(_cli("worker", "--leader", leader, "--key-file", str(tmp_path)), "worker", "not a regular file")


def test_bind_every_interface_needs_a_key() -> None:
    leader = f"127.0.0.1:{leader_port()}"
    for addr in ("0.0.0.0", "::"):
        _bad(_cli("worker", "--leader", leader, "--bind", addr), "worker", f"--bind '{addr}'", "needs a cluster key",
             "--key-file")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a 0000 file")
def test_unreadable_key_file(tmp_path: Path) -> None:
    from actors._cluster.auth_keys import load_key_file
    from actors._driver.errors import ConfigError

    path = _key_file(tmp_path, KEY, mode=0o000)
    with pytest.raises(ConfigError, match="cannot read the cluster key file"):
        load_key_file(path)


def test_key_file_loading_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                caplog: pytest.LogCaptureFixture) -> None:
    from actors._cluster.auth_keys import load_key_file
    from actors._driver.errors import ConfigError

    monkeypatch.delenv("AUDITION_CLUSTER_KEY", raising=False)
    monkeypatch.delenv("AUDITION_CLUSTER_KEY_FILE", raising=False)
    path = _key_file(tmp_path, KEY + "\n")
    with caplog.at_level(logging.WARNING, logger="audition.auth"):
        assert load_key_file(path) == KEY.encode()
    assert not caplog.records
    os.chmod(path, 0o644)
    with caplog.at_level(logging.WARNING, logger="audition.auth"):
        assert load_key_file(path) == KEY.encode()  # used, with a warning
    assert any("wider than 0600" in r.getMessage() and path in r.getMessage() for r in caplog.records)
    monkeypatch.setenv("AUDITION_CLUSTER_KEY", KEY)
    with pytest.raises(ConfigError, match="only one way"):
        load_key_file(path)


def test_every_interface_bind_advertises_the_route_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Thespian puts in the worker's admin address (the one the leader dials) after
    ``--bind 0.0.0.0``: this machine's address towards the leader, never 0.0.0.0."""
    import socket

    from thespian.system.transport.IPBase import IPActorAddress

    from actors._cluster.member import _listen_and_advertise, _route_addr

    monkeypatch.setenv("THESPIAN_BASE_IPADDR", "")
    monkeypatch.setenv("AUDITION_BIND_ADDR", "")
    for leader in ("127.0.0.1", "192.0.2.200"):
        try:
            route = _route_addr(leader)
        except OSError:
            continue  # no route to that network on this machine
        assert _listen_and_advertise("0.0.0.0", leader) == "0.0.0.0"
        port = leader_port()
        a = IPActorAddress(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, None, port, external=True)
        assert a.sockname == (route, port) and route != "0.0.0.0"
        assert _listen_and_advertise("127.0.0.1", leader) == "127.0.0.1"
        assert os.environ["THESPIAN_BASE_IPADDR"] == os.environ["AUDITION_BIND_ADDR"] == "127.0.0.1"
