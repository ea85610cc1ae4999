"""No bytes from a peer without the cluster key can kill or wedge a keyed cluster (issue 13, item 1).

A real keyed leader (``fit()`` in a driver subprocess: this file run as a script) and a real keyed
``audition worker`` run an experiment whose trials all run on the worker.  Meanwhile seeded batches
of malformed frames (negative, signed, spaced, huge and over-long length prefixes, truncated frames,
garbage after a complete frame, frames sealed with another key, a captured ACK constant, random
bytes; sent and closed, held open, or reset) go over loopback TCP to every port the leader's and the
worker's processes listen on: the admins, the controller, the scheduler, the member probe, the trial
actors, the driver.  After each batch every one of those processes must still run and the trials must
still make progress; at the end the experiment must finish with every result in place.  Before the
frame reader was rewritten, the first ``-1>x`` killed the admin and everything with it.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil
import pytest

from tests._cluster import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "fuzz-cluster-key-0123456789abcdef"
SEED = 1313
BATCHES = 4


# ---------------------------------------------------------------------------------------------------
# driver side (this file run as a script)


def beating(config: dict[str, Any]) -> None:
    """Reports until the test creates ``stop_file``; writes its iteration to a beat file the test watches."""
    from actors import report

    beat = os.path.join(config["beat_dir"], f"x{config['x']:g}")
    for i in range(1, 5000):
        time.sleep(0.05)
        report({"loss": config["x"] / i})
        with open(beat + ".tmp", "w") as f:
            f.write(str(i))
        os.replace(beat + ".tmp", beat)
        if i >= 5 and os.path.exists(config["stop_file"]):
            return


def drive(port: int, storage: str, beat_dir: str, stop_file: str) -> None:
    from actors import RunConfig, TuneConfig, Tuner
    from actors.search import grid_search

    grid = Tuner(beating, param_space={"x": grid_search([1.0, 2.0]), "beat_dir": beat_dir, "stop_file": stop_file},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="fuzz", storage=storage, system=f"tcp://127.0.0.1:{port}",
                                      leader_runs_trials=False, verbose=0)).fit()
    print(json.dumps([{"x": r.config["x"], "status": r.status.value, "failures": r.num_failures,
                       "history": [[h["training_iteration"], h["loss"], h["member"]] for h in r.metrics_history]}
                      for r in grid]), flush=True)


# ---------------------------------------------------------------------------------------------------
# malformed frames


def _sealed_with_wrong_key(rng: random.Random) -> bytes:
    from actors._cluster.auth import FrameAuth

    body = FrameAuth(b"not-the-cluster-key-at-all-0000", max_age_s=360, max_skew_s=60).seal(
        rng.randbytes(rng.randint(0, 64)), recipient=("127.0.0.1", rng.randint(1, 65535)))
    return b"%d>" % len(body) + body


def malformed(rng: random.Random, captured_ack: bytes) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) pairs: the structured cases once each, then random ones."""
    junk = rng.randbytes
    yield from [
        ("negative", b"-1>x"), ("negative-empty", b"-1>"), ("negative-big", b"-99999999>" + junk(64)),
        ("minus-zero", b"-0>"), ("zero", b"0>"), ("one", b"1>x"), ("plus", b"+5>hello"), ("space", b" 5>hello"),
        ("underscore", b"1_0>0123456789"), ("hex", b"0x10>" + junk(16)), ("nul", b"5\x00>hello"),
        ("unicode-digit", "\u0663>x".encode()), ("bare-mark", b">"), ("marks", b">>>>"),
        ("20-digits", b"9" * 20 + b">"), ("21-digits", b"9" * 21 + b">"), ("no-mark", b"1" * 25),
        ("over-max", b"268435457>" + junk(32)), ("max-truncated", b"268435456>" + junk(4096)),
        ("truncated", b"100>" + junk(10)), ("garbage-after", b"40>" + junk(40) + junk(200)),
        ("frame-then-negative", b"5>abcde-1>x"), ("frame-then-frames", b"3>abc" * 50),
        ("wrong-key", _sealed_with_wrong_key(rng)), ("wrong-key-then-garbage", _sealed_with_wrong_key(rng) + junk(99)),
        ("captured-ack", captured_ack), ("captured-ack-then-negative", captured_ack + b"-1>x"),
        ("split-prefix", b"1" + b"0" * 3),  # no mark yet: the connection is held or closed mid-prefix
    ]
    for i in range(80):
        shape = rng.randrange(4)
        if shape == 0:
            data = junk(rng.randint(1, 2048))
        elif shape == 1:
            data = b"%d>" % rng.choice([-rng.randint(1, 1 << 40), rng.randint(0, 300), rng.randint(1, 1 << 62)])
            data += junk(rng.randint(0, 300))
        elif shape == 2:
            n = rng.randint(60, 200)
            data = b"%d>" % n + junk(rng.randint(0, 2 * n))
        else:
            data = bytes(rng.choice(b"0123456789->+ \n") for _ in range(rng.randint(1, 40)))
        yield f"random-{i}", data


def _send(port: int, data: bytes, how: str, held: list[socket.socket]) -> None:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
    except OSError as exc:
        raise AssertionError(f"port {port} no longer accepts connections: {exc}") from None
    try:
        s.sendall(data)
    except OSError:
        pass  # the receiver refused early and closed: fine
    if how == "hold":
        held.append(s)
        return
    if how == "reset":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def _ack_constant(port: int) -> bytes:
    """What a keyed process answers to junk: its signed ACK+DATAERR, a constant an attacker can capture."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"1>x")
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
    assert reply and reply[: reply.index(b">")].isdigit(), reply
    return reply


# ---------------------------------------------------------------------------------------------------
# test side


def _family(arg: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if arg in (p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def _listening_ports(pids: set[int]) -> dict[int, int]:
    """port -> pid for every TCP port the processes ``pids`` listen on."""
    return {c.laddr.port: c.pid for c in psutil.net_connections("tcp4")
            if c.status == psutil.CONN_LISTEN and c.pid in pids}




def _beats(beat_dir: Path) -> dict[str, int]:
    out = {}
    for p in beat_dir.glob("x*"):
        if not p.name.endswith(".tmp"):
            try:
                out[p.name] = int(p.read_text() or 0)
            except (OSError, ValueError):
                pass
    return out


def _kill(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


@pytest.fixture
def reader_state(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The reader's limits without patching Thespian in this process (small ones, so they are reached)."""
    from actors._cluster import auth_reader
    from actors._cluster.auth_codec import ByteBudget, FrameAuth

    st = auth_reader.Installed(FrameAuth(KEY.encode(), max_age_s=360, max_skew_s=60), 4096, ByteBudget(8192), {})
    monkeypatch.setattr(auth_reader, "_state", st)
    return st


def test_frame_reader_never_raises_and_never_asks_for_a_negative_read(reader_state: Any) -> None:
    """Every input, split into chunks as recv() may split it, ends in a refusal or a complete frame
    (whose tag then fails): nothing raises, and remainingAmount() is always at least 1 (Thespian
    passes it to recv(), which raises on a negative size: the `-1>x` crash)."""
    from actors._cluster.auth_reader import AuthFrameReader

    rng = random.Random(SEED)
    outcomes: dict[str, int] = {}
    cases = [data for _name, data in malformed(rng, b"11>" + bytes(11))]
    cases += [rng.randbytes(rng.randint(1, 5000)) for _ in range(2000)]
    for data in cases:
        buf = AuthFrameReader()
        pos = 0
        while pos < len(data) and not buf.isDone():
            want = buf.remainingAmount()
            assert want >= 1
            n = min(want, rng.randint(1, 64), len(data) - pos)
            buf.addMore(data[pos:pos + n])
            pos += n
        if buf.isDone():
            assert buf.completed() is None  # refused, or a complete frame without a valid tag
            outcome = "refused" if buf._refused else "rejected"
        else:
            outcome = "waiting"  # the peer stopped mid-frame: Thespian closes the socket at EOF
            assert len(buf._body) + len(buf._buf) <= 4096
        del buf
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert reader_state.budget.used == 0  # every byte held was given back
    assert set(outcomes) == {"refused", "rejected", "waiting"}, outcomes
    with pytest.raises(TypeError):  # Thespian feeds the decoded tuple back in on trailing data; it catches this
        AuthFrameReader().addMore(("sender", "message"))


def test_unverified_bytes_are_bounded_by_the_budget(reader_state: Any) -> None:
    from actors._cluster.auth_reader import AuthFrameReader

    held = []
    for _ in range(3):  # 3 frames of up to 4096 bytes each hold 3000: the budget of 8192 fits two
        buf = AuthFrameReader()
        buf.addMore(b"4096>" + bytes(3000))
        held.append(buf)
    assert [b._refused for b in held] == [False, False, True] and reader_state.budget.used == 6000
    late = AuthFrameReader()
    late.addMore(b"4000>")  # announces more than is left: refused before a byte of body is read
    assert late._refused and late.isDone()
    held.clear()
    assert reader_state.budget.used == 0  # dropped connections give their bytes back


@pytest.mark.slow
def test_malformed_frames_never_kill_or_wedge_a_keyed_cluster(tmp_path: Path) -> None:
    from tests._ports import leader_port

    tag = f"fuzz-{uuid.uuid4().hex[:8]}"
    worker_id = f"{tag}-w"
    port = leader_port()
    worker_port = leader_port(avoid=(port,))
    beat_dir, stop_file = tmp_path / "beats", tmp_path / "stop"
    beat_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUDITION_CLUSTER_KEY", "AUDITION_ALLOW"))}
    env.update(PYTHONPATH=ROOT, AUDITION_CLUSTER_KEY=KEY, THESPLOG_FILE=str(tmp_path / "thespian.log"),
               THESPLOG_FILE_MAXSIZE=str(10 << 20))
    leader_log, worker_log = open(tmp_path / "leader.log", "w"), open(tmp_path / "worker.log", "w")
    driver = subprocess.Popen([sys.executable, os.path.abspath(__file__), "drive", tag, str(port),
                               str(tmp_path / "results"), str(beat_dir), str(stop_file)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=leader_log, text=True)
    worker: subprocess.Popen[bytes] | None = None
    held: list[socket.socket] = []
    try:
        wait_for(lambda: _listening_ports({p.pid for p in _family(tag)}).get(port), 30, "the leader to listen")
        worker = subprocess.Popen(
            [sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{port}", "--bind", "127.0.0.1",
             "--port", str(worker_port), "--cpus", "2", "--id", worker_id],
            cwd=ROOT, env=env, stdout=worker_log, stderr=subprocess.STDOUT)
        wait_for(lambda: len(_beats(beat_dir)) == 2, 60, "both trials to run on the worker")
        rng = random.Random(SEED)
        ack = _ack_constant(port)
        sent = 0
        for batch in range(BATCHES):
            procs = {p.pid: p for p in _family(tag) + _family(worker_id)}
            targets = _listening_ports(set(procs))
            # Not a server: the `audition worker` command's own Thespian client socket (inherited by its
            # admin and actors), read only inside ask()/listen(), which that command never calls.
            for c in psutil.Process(worker.pid).net_connections("tcp4"):
                targets.pop(c.laddr.port, None)
            assert port in targets and worker_port in targets, targets
            before = _beats(beat_dir)
            for _name, data in malformed(rng, ack):
                for target in targets:
                    _send(target, data, rng.choice(["close", "close", "hold", "reset"]), held)
                    sent += 1
            for s in held:
                s.close()
            held.clear()
            dead = [pid for pid, p in procs.items() if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE]
            assert not dead, f"batch {batch}: processes died: {dead}; leader log:\n" + \
                (tmp_path / "leader.log").read_text()[-3000:]
            wait_for(lambda: all(_beats(beat_dir).get(k, 0) >= v + 3 for k, v in before.items()),  # noqa: B023
                      30, f"both trials to make progress after batch {batch}")
            for target in targets:  # every port still accepts connections (and the loop still reads them)
                _send(target, b"", "close", held)
        stop_file.touch()
        out, _ = driver.communicate(timeout=90)
        assert driver.returncode == 0, (tmp_path / "leader.log").read_text()[-3000:]
        trials = json.loads(out.strip().splitlines()[-1])
        assert len(trials) == 2
        for t in trials:
            assert t["status"] == "TERMINATED" and t["failures"] == 0, t
            hist = t["history"]
            assert [h[0] for h in hist] == list(range(1, len(hist) + 1)) and len(hist) >= 5, hist
            assert all(h[1] == pytest.approx(t["x"] / h[0]) and h[2] == worker_id for h in hist), hist
        assert "rejected frame" in (tmp_path / "leader.log").read_text()
        wait_for(lambda: not _family(tag), 20, "the leader's processes to exit after fit()")
        worker.terminate()
        assert worker.wait(timeout=30) == 0
        wait_for(lambda: not _family(worker_id), 20, "the worker's processes to exit")
        print(f"\n{sent} malformed connections over {BATCHES} batches to {len(targets)} ports; run finished intact")
    finally:
        for s in held:
            s.close()
        if driver.poll() is None:
            driver.kill()
            driver.wait(timeout=10)
        if worker is not None:
            if worker.poll() is None:
                worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
        _kill(_family(worker_id) + _family(tag))
        leader_log.close()
        worker_log.close()


if __name__ == "__main__" and sys.argv[1:2] == ["drive"]:
    drive(int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
