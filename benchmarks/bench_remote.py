"""Multi-host on loopback: remote result throughput and worker-loss recovery time.

The driver leads (``RunConfig(system="tcp://127.0.0.1:PORT", leader_runs_trials=False)``) and two
``audition worker --cpus 1`` processes (w1, w2) run the trials; a worker is killed through its
process group and every process whose command line holds its ``--id`` (Thespian's admin setsid()s).

- throughput: 2 trials each reporting N results as fast as they can, ``batched`` (default FIFO)
  and ``per-result`` (``PerResult`` from bench_throughput.py: one scheduler decision per result);
  ``results_per_s`` = 2N / (fit() return - first result's ``wall``), as in bench_throughput.py.
- failover: 1 trial; once it runs, SIGKILL every process of the worker holding it; ``restart_s`` =
  kill -> the trial's new run starting on the other worker (a file the trainable writes at start),
  ``first_result_s`` = kill -> its first result there. Heartbeat timeout 3 s and the default.

Fresh workers and leader per measurement; every process started is stopped on exit. One JSON line.

    python benchmarks/bench_remote.py [--n 2000] [--timeouts 3 default] [--key]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import _common
from bench_throughput import PerResult

from actors._driver.system import free_port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)


def _pids_with_arg(arg: str) -> list[int]:
    """Every live process whose command line holds ``arg`` (forked Thespian children inherit it)."""
    out = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as handle:
                args = handle.read().split(b"\0")
            with open(cmdline[:-7] + "stat", encoding="ascii") as handle:
                zombie = handle.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if arg.encode() in args and not zombie:
            out.append(int(cmdline.split("/")[2]))
    return out


def _descendants(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat, encoding="ascii") as handle:
                state, ppid = handle.read().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError, IndexError):
            continue
        if state == "Z":
            continue
        parents.setdefault(int(ppid), []).append(int(stat.split("/")[2]))
    out, todo = [], [root]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


class Cluster:
    """A leader running ``fit()`` in a thread, and worker processes started once it listens."""

    def __init__(self, key: str | None) -> None:
        self.port = free_port()
        self.tag = uuid.uuid4().hex[:8]
        self.env = dict(os.environ, PYTHONPATH=_common.ROOT)
        if key:
            self.env["AUDITION_CLUSTER_KEY"] = key
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.out: dict[str, Any] = {}

    def ident(self, name: str) -> str:
        return f"{name}-{self.tag}"

    def run(self, tuner: Any, during: Callable[[], None] | None = None, timeout_s: float = 300) -> Any:
        """``tuner.fit()`` in a thread, the workers once it listens, ``during()``; stop the workers."""
        def fit() -> None:
            try:
                self.out["grid"] = tuner.fit()
            except BaseException as exc:  # re-raised below
                self.out["error"] = exc
            self.out["ended"] = time.time()

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        audition = shutil.which("audition")
        cmd = [audition] if audition else [sys.executable, "-m", "actors._cli"]
        try:
            _wait_for(lambda: _listening(self.port) or not thread.is_alive(), 30, "the leader to listen")
            for name in ("w1", "w2"):
                self.workers[name] = subprocess.Popen(
                    [*cmd, "worker", "--leader", f"127.0.0.1:{self.port}", "--bind", "127.0.0.1", "--cpus", "1",
                     "--id", self.ident(name)], env=self.env, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)
            if during:
                during()
            thread.join(timeout_s)
        finally:
            self.stop()
        if thread.is_alive() or "error" in self.out:
            raise RuntimeError(f"fit() failed or did not return within {timeout_s}s: {self.out.get('error')!r}")
        return self.out["grid"]

    def kill(self, name: str) -> None:
        """SIGKILL the worker's process group and every process carrying its --id."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[name].pid, signal.SIGKILL)
        for pid in _pids_with_arg(self.ident(name)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        for w in self.workers.values():
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for name, w in self.workers.items():
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            self.kill(name)  # leftovers of a clean stop, or the whole group of a stuck one
            w.wait(timeout=10)


def throughput(n: int, mode: str, key: str | None) -> dict[str, Any]:
    from actors import RunConfig, TuneConfig, Tuner

    cluster = Cluster(key)
    with _common.temp_storage() as storage:
        tuner = Tuner(stream, param_space={"n": n},
                      tune_config=TuneConfig(num_samples=2, max_concurrent_trials=2,
                                             scheduler=PerResult() if mode == "per-result" else None),
                      run_config=RunConfig(name="remote", storage=storage, verbose=0,
                                           system=f"tcp://127.0.0.1:{cluster.port}", leader_runs_trials=False))
        started = time.time()
        grid = cluster.run(tuner)
        histories = [r.metrics_history for r in grid]
    members = set()
    for h in histories:
        if [row["training_iteration"] for row in h] != list(range(1, n + 1)):
            raise SystemExit(f"a trial's history does not hold results 1..{n} exactly once")
        members |= {row["member"] for row in h}
    if members != {cluster.ident("w1"), cluster.ident("w2")}:
        raise SystemExit(f"trials ran on {sorted(members)}, not on both workers")
    stream_s = cluster.out["ended"] - min(h[0]["wall"] for h in histories)
    return {"fit_s": round(cluster.out["ended"] - started, 4), "stream_s": round(stream_s, 4),
            "results_per_s": round(2 * n / stream_s)}


def stream(config: dict[str, Any]) -> None:
    """As bench_throughput.stream, but defined here so it travels to the workers by value."""
    import time

    from actors import report

    for i in range(config["n"]):
        extra = {"wall": time.time()} if i == 0 else {}  # results' timestamp is whole seconds (Ray's)
        report({"loss": 1.0 / (i + 1), **extra})


def mover(config: dict[str, Any]) -> None:
    from actors import report

    tmp = os.path.join(config["dir"], f".start-{os.getpid()}")
    with open(tmp, "w", encoding="ascii") as handle:
        handle.write(repr(time.time()))
    os.replace(tmp, os.path.join(config["dir"], f"start-{os.getpid()}"))
    for i in range(100_000):
        if os.path.exists(os.path.join(config["dir"], "stop")):
            return
        report({"i": i, "wall": time.time()})  # results' timestamp is whole seconds (Ray's)
        time.sleep(0.02)


def failover(heartbeat_s: float | None, key: str | None) -> dict[str, Any]:
    from actors import FailureConfig, RunConfig, TuneConfig, Tuner

    cluster = Cluster(key)
    got: dict[str, Any] = {}
    with _common.temp_storage() as storage:
        marks = os.path.join(storage, "marks")
        os.mkdir(marks)
        extra = {} if heartbeat_s is None else {"heartbeat_timeout_s": heartbeat_s}
        tuner = Tuner(mover, param_space={"dir": marks}, tune_config=TuneConfig(num_samples=1),
                      run_config=RunConfig(name="failover", storage=storage, verbose=0, leader_runs_trials=False,
                                           system=f"tcp://127.0.0.1:{cluster.port}",
                                           failure_config=FailureConfig(max_failures=3), **extra))

        def starts() -> dict[int, float]:
            out = {}
            for path in glob.glob(os.path.join(marks, "start-*")):
                with open(path, encoding="ascii") as handle:
                    out[int(path.rsplit("-", 1)[1])] = float(handle.read())
            return out

        def kill_and_wait() -> None:
            _wait_for(lambda: len(starts()) == 1, 60, "the trial to start")
            time.sleep(1.0)  # let it report for a while
            (pid,) = starts()
            victim = next(n for n in cluster.workers if pid in _pids_with_arg(cluster.ident(n)))
            got["killed"] = time.time()
            cluster.kill(victim)
            _wait_for(lambda: len(starts()) == 2, 120, "the trial to start again")
            got["restart"] = max(starts().values())
            time.sleep(0.5)
            open(os.path.join(marks, "stop"), "w", encoding="ascii").close()
            cluster.workers.pop(victim).wait(timeout=10)
            got["survivor"] = cluster.ident("w2" if victim == "w1" else "w1")

        grid = cluster.run(tuner, kill_and_wait, 180)
        tuner_hb = RunConfig().heartbeat_timeout_s if heartbeat_s is None else heartbeat_s
        (result,) = list(grid)
        after = [r for r in result.metrics_history if r["wall"] > got["killed"]]
    if not after or {r["member"] for r in after} != {got["survivor"]}:
        raise SystemExit("the trial did not report from the surviving worker after the kill")
    return {"heartbeat_timeout_s": tuner_hb, "default": heartbeat_s is None,
            "restart_s": round(got["restart"] - got["killed"], 3),
            "first_result_s": round(after[0]["wall"] - got["killed"], 3), "failures": result.num_failures}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--timeouts", nargs="*", default=["3", "default"],
                        help="heartbeat timeouts (s) for the failover runs; 'default' = RunConfig's default")
    parser.add_argument("--key", action="store_true", help="run with a random cluster key (authenticated frames)")
    args = parser.parse_args(argv)
    _common.quiet_logs()
    key = secrets.token_hex(32) if args.key else None
    if key:
        os.environ["AUDITION_CLUSTER_KEY"] = key
    out: dict[str, Any] = {"bench": "remote", "n": args.n, "trials": 2, "workers": 2, "key": bool(key)}
    try:
        for mode in ("batched", "per-result"):
            for k, v in throughput(args.n, mode, key).items():
                out[f"{mode.replace('-', '_')}_{k}"] = v
        out["failover"] = [failover(None if t == "default" else float(t), key) for t in args.timeouts]
    finally:
        leftovers = _descendants(os.getpid())  # a leader that fit() left behind on an error
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        out["leftover_processes_killed"] = len(leftovers)
    out["machine"] = _common.machine()
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
