"""Insecure or broken cluster set-ups fail fast, with the fix in the message (issue 13, item 7).

Before: ``AUDITION_CLUSTER_KEY=""`` meant "no key"; a worker without the key, or with another key,
started its actor system and retried its registration forever in silence; a worker pointed at a
port where nothing listens said nothing.  Now ``audition worker`` sends one frame to the leader
before it starts anything (``actors/_cluster/join.py``) and exits 2 with the reason.  Leaders are real
actor systems in subprocesses (``tests/test_auth_transport.py``'s ``Server``).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests._marked import MARKER, left_behind, marked_env
from tests._ports import leader_port
from tests.test_auth_transport import KEY, WRONG_KEY, Server
from tests.test_key_file import ROOT, _env, _family, _key_file, _kill_family


def _worker(leader_port: int, *args: str, env_key: str | None = None,
            timeout_s: float = 60) -> tuple[subprocess.CompletedProcess[str], str]:
    """``audition worker`` run to its end; (the result, its --id tag)."""
    tag = f"join-{uuid.uuid4().hex[:8]}"
    env = _env()
    if env_key is not None:
        env["AUDITION_CLUSTER_KEY"] = env_key
    try:
        res = subprocess.run([sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{leader_port}",
                              "--bind", "127.0.0.1", "--id", tag, *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=timeout_s)
    finally:
        left = _family(tag)
        _kill_family(tag)
    assert not left, f"the refused worker left processes behind: {[p.pid for p in left]}"
    return res, tag


def _refused(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-1000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr and res.stderr.startswith("audition worker: "), res.stderr[-2000:]
    for n in needles:
        assert n in res.stderr, res.stderr[-2000:]
    assert "admin 127.0.0.1" not in res.stdout  # it never started its actor system


def test_empty_key_variables_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from actors._cluster.auth_keys import load_cluster_key
    from actors._driver.errors import ConfigError
    from actors._driver.system import _start_authentication

    for name in ("AUDITION_CLUSTER_KEY", "AUDITION_CLUSTER_KEY_FILE"):
        for value in ("", "  "):
            with pytest.raises(ConfigError, match=f"\\${name} is set but empty"):
                load_cluster_key({name: value})
    monkeypatch.delenv("AUDITION_CLUSTER_KEY_FILE", raising=False)
    monkeypatch.setenv("AUDITION_CLUSTER_KEY", "")
    with pytest.raises(ConfigError, match="set but empty"):  # a loopback fit() no longer runs keyless on it
        _start_authentication("127.0.0.1")
    res, _tag = _worker(leader_port(), env_key="")
    _refused(res, "$AUDITION_CLUSTER_KEY is set but empty", "unset it")


def test_worker_pointed_at_nothing_fails_fast() -> None:
    res, _tag = _worker(leader_port(), "--join-timeout", "1")
    _refused(res, "no audition leader listens on 127.0.0.1:", "start the experiment first")


@pytest.mark.slow
def test_keyed_leader_refuses_workers_without_its_key(tmp_path: Path) -> None:
    leader = Server(tmp_path, "keyed", KEY)
    try:
        port = leader.ready["admin_port"]
        res, _tag = _worker(port)
        _refused(res, "requires a cluster key and this worker has none", "--key-file")
        res, _tag = _worker(port, "--key-file", _key_file(tmp_path, WRONG_KEY, name="wrong"))
        _refused(res, "uses a different cluster key", "--key-file")
        token, _ = marked_env()
        env = dict(_env(), **{MARKER: token})
        status = subprocess.run([sys.executable, "-m", "actors._cli", "cluster", "status", "--leader",
                                 f"127.0.0.1:{port}", "--key-file", _key_file(tmp_path, WRONG_KEY, name="wrong2")],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert not left_behind(token, within_s=0)
        assert status.returncode == 2 and "uses a different cluster key" in status.stderr, status.stderr[-2000:]
        assert "rejected frame" in leader.log()  # the leader saw the wrong key's hello, and said so
        assert leader.request("ask still-here") == {"answer": "echo:still-here"}
    finally:
        assert not leader.close()


@pytest.mark.slow
def test_keyed_worker_refuses_a_keyless_leader(tmp_path: Path) -> None:
    leader = Server(tmp_path, "keyless", None)
    try:
        res, _tag = _worker(leader.ready["admin_port"], env_key=KEY)
        _refused(res, "runs without a cluster key, but this worker has one")
    finally:
        assert not leader.close()


def test_join_answers_are_judged_without_unpickling() -> None:
    """Every answer a leader can give, classified (the clock-skew one cannot be provoked on one machine)."""
    from actors._cluster.auth_codec import KIND_ACK, FrameAuth
    from actors._cluster.join import _judge
    from actors._driver.errors import ConfigError

    ours = FrameAuth(KEY.encode(), max_age_s=360, max_skew_s=60)
    theirs = FrameAuth(WRONG_KEY.encode(), max_age_s=360, max_skew_s=60)
    ack, dataerr = pickle.dumps("ACK"), pickle.dumps("ACK+DATAERR")
    _judge(ours.seal(ack, KIND_ACK), ours, "h:1", "KEY")  # accepted
    _judge(ack, None, "h:1", "KEY")  # keyless on both sides
    cases = [(ours.seal(dataerr, KIND_ACK), ours, "same cluster key but refused"),
             (theirs.seal(dataerr, KIND_ACK), ours, "different cluster key"),
             (dataerr, ours, "runs without a cluster key"),
             (ack, ours, "runs without a cluster key"),
             (theirs.seal(dataerr, KIND_ACK), None, "requires a cluster key"),
             (b"", ours, "not as an audition leader"), (b"HTTP/1.1 400", None, "not as an audition leader"),
             (dataerr, None, "not as an audition leader")]
    for reply, auth, needle in cases:
        with pytest.raises(ConfigError, match=needle):
            _judge(reply, auth, "h:1", "KEY")
