"""Chaos harness (issue 13, "Prove it stays fixed"): faults injected into a live multi-host run.

The driver runs ``fit()`` as the leader of a loopback cluster (``system="tcp://..."``, trials on
the leader too) with one ``audition worker`` joined as a second TCP member. While ~20 checkpointing
trials run, a seeded ``random.Random(seed)`` picks the faults, from this process:

* SIGKILL or SIGSEGV of a random trial process (found by the ``pid`` its latest result names,
  checked to be one of this run's processes: same command line as ours, or the worker's ``--id``);
* a worker crash: SIGKILL of every process of the worker at once (its process groups first, as a
  machine dying), then the worker restarted under the same ``--id``;
* a storage stall (in the leader's processes and, through ``tests/_chaos_worker.py``, in the
  worker's): checkpoint uploads wait, or commits land but their answer waits, while a flag file
  exists; most stalls get a trial killed in the middle, so deaths land inside commits and between
  a commit and the result that names it.

Then the invariants (each break is a line in ``ChaosReport.violations``): ``fit()`` returns within
its deadline and every trial ends TERMINATED (``max_failures=-1``); every trial's history
(``Result.metrics_history`` and ``result.json``) is iterations 1..N, no gap, no duplicate, and the
trainable's own counter agrees; each run of a trial resumed from the newest checkpoint committed by
the runs before it (read from storage: the manifests, also snapshots taken right after each death);
no process of the run outlives it. Used by ``tests/test_chaos.py`` and
``benchmarks/bench_chaos_soak.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil

from tests._chaos_checks import NAME, Storage, chaos_trainable, check, install_stall, remove_stall

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER_SCRIPT = os.path.join(ROOT, "tests", "_chaos_worker.py")


# ---------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class ChaosConfig:
    """One chaos run. ``faults``: how many faults to inject (one of them the worker crash, if
    ``worker_crashes``); after them the run finishes undisturbed, so it always can."""

    seed: int
    trials: int = 20
    steps: int = 20
    step_s: float = 0.05
    faults: int = 12
    worker_crashes: int = 1
    gap_s: tuple[float, float] = (0.15, 0.45)  # between two faults
    stall_s: tuple[float, float] = (0.3, 0.9)  # < 1 s: a trial blocked in it still counts as running
    worker_cpus: int = 2
    heartbeat_timeout_s: float = 2.0
    deadline_s: float = 90.0  # fit() must return within this

    @classmethod
    def from_env(cls, seed: int) -> ChaosConfig:
        """Sizes from $AUDITION_CHAOS_TRIALS, _STEPS, _FAULTS (a soak run's knobs)."""
        env = os.environ
        return cls(seed=seed, trials=int(env.get("AUDITION_CHAOS_TRIALS", cls.trials)),
                   steps=int(env.get("AUDITION_CHAOS_STEPS", cls.steps)),
                   faults=int(env.get("AUDITION_CHAOS_FAULTS", cls.faults)))


@dataclass
class ChaosReport:
    seed: int
    injected: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    failures: int = 0  # trial failures the controller counted (sum of num_failures)
    members: Counter[str] = field(default_factory=Counter)  # results per member (leader or worker)
    resumes: int = 0  # runs checked to resume from the newest committed checkpoint (> 0)
    wall_s: float = 0.0

    def summary(self) -> str:
        return (f"seed {self.seed}: {dict(self.injected)} injected, {self.failures} trial failures counted, "
                f"results per member {dict(self.members)}, {self.resumes} resumes from a checkpoint checked, "
                f"{self.wall_s:.1f}s, violations: {self.violations or 'none'}")


# ---------------------------------------------------------------------------------- processes
def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(cond: Callable[[], Any], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


class Processes:
    """This run's processes: the leader's (forked from us: our command line) and the worker's."""

    def __init__(self, ident: str) -> None:
        me = psutil.Process()
        self.me, self.cmdline, self.started = me.pid, me.cmdline(), time.time()
        self.ident = ident
        self.before = {p.pid for p in self.forked()}

    @staticmethod
    def _scan(match: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
        out = []
        for p in psutil.process_iter(["cmdline", "create_time", "status"]):
            try:
                if p.info["status"] != psutil.STATUS_ZOMBIE and match(p):
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return out

    def forked(self) -> list[psutil.Process]:
        return self._scan(lambda p: p.pid != self.me and p.info["cmdline"] == self.cmdline
                          and p.info["create_time"] >= self.started - 1)

    def worker(self) -> list[psutil.Process]:
        return self._scan(lambda p: self.ident in (p.info["cmdline"] or []))

    def is_trial(self, pid: int, reported_at: float) -> bool:
        """``pid`` is one of this run's processes, started before it reported at ``reported_at``."""
        try:
            p = psutil.Process(pid)
            cmd = p.cmdline()
            return (p.status() != psutil.STATUS_ZOMBIE and p.create_time() <= reported_at + 0.5
                    and (cmd == self.cmdline or self.ident in cmd) and pid != self.me)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def leaked(self, timeout_s: float = 20.0) -> list[str]:
        left: list[psutil.Process] = []

        def gone() -> bool:
            nonlocal left
            left = [p for p in self.forked() if p.pid not in self.before] + self.worker()
            return not left

        _wait(gone, timeout_s)
        return [f"{p.pid} {' '.join(p.info['cmdline'] or [])[:120]}" for p in left]


def _kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL ``procs``, their process groups first (Thespian's admin runs in its own session)."""
    mine = os.getpgid(0)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            group = os.getpgid(p.pid)
            if group != mine:
                os.killpg(group, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=5)


# ---------------------------------------------------------------------------------- the run
class ChaosRun:
    def __init__(self, cfg: ChaosConfig, workdir: str) -> None:
        from tests._ports import leader_port

        self.cfg, self.rng = cfg, random.Random(cfg.seed)
        self.report = ChaosReport(cfg.seed)
        self.port = leader_port()
        self.ident = f"chaos-{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.storage = Storage(os.path.join(workdir, "results"))
        self.flag = os.path.join(workdir, "stall")
        self.procs = Processes(self.ident)
        self.worker: subprocess.Popen[bytes] | None = None
        self.out: dict[str, Any] = {}

    # -- faults -------------------------------------------------------------------------------
    def start_worker(self) -> None:
        with open(os.path.join(self.workdir, "worker.log"), "ab") as log:
            self.worker = subprocess.Popen(
                [sys.executable, WORKER_SCRIPT, self.flag, "worker", "--leader", f"127.0.0.1:{self.port}",
                 "--cpus", str(self.cfg.worker_cpus), "--id", self.ident],
                env=dict(os.environ, PYTHONPATH=ROOT), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def running_trials(self, member: str | None = None) -> list[dict[str, Any]]:
        now = time.time()
        return [r for r in self.storage.last_rows()
                if now - float(r.get("wall", 0)) < 1.0 and r.get("training_iteration", 0) < self.cfg.steps
                and (member is None or r.get("member") == member)
                and self.procs.is_trial(int(r.get("pid", 0)), float(r.get("wall", 0)))]

    def kill_trial(self, how: signal.Signals, during: str = "") -> None:
        from actors._process.children import pid_alive

        rows = self.running_trials()
        if not rows:
            self.report.injected["no_victim"] += 1
            return
        victim = self.rng.choice(sorted(rows, key=lambda r: r["trial_id"]))
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(victim["pid"]), how)
        if not _wait(lambda: not pid_alive(int(victim["pid"])), 5.0):
            self.report.violations.append(f"trial process {victim['pid']} survived {how.name} for 5s")
        self.report.injected[f"{how.name.lower()}_trial" + (f"_in_{during}_stall" if during else "")] += 1
        self.storage.snapshot()

    def crash_worker(self) -> None:
        _wait(lambda: self.running_trials(self.ident), 5.0)  # hit it while it holds trials
        _kill_all(self.procs.worker())
        if self.worker is not None:
            self.worker.wait(5)
        self.report.injected["worker_crash"] += 1
        self.storage.snapshot()
        time.sleep(self.rng.uniform(0.2, 1.5))  # down for a while: fault timing, not synchronisation
        self.start_worker()

    def stall(self, alive: Callable[[], bool]) -> None:
        """Storage stalls for a while; most times a trial is killed in the middle of it (it is
        then blocked in a checkpoint's upload, or in a commit whose answer is late)."""
        rng = self.rng
        length = rng.uniform(*self.cfg.stall_s)
        ends = time.monotonic() + length
        how = rng.choice(["upload", "answer"])
        with open(self.flag + ".tmp", "w", encoding="ascii") as f:
            f.write(how)
        os.replace(self.flag + ".tmp", self.flag)  # never read half written
        self.report.injected[f"storage_stall_{how}"] += 1
        try:
            if rng.random() < 0.7:
                _wait(lambda: not alive(), rng.uniform(0.1, 0.6 * length))  # trials reach a commit
                self.kill_trial(rng.choice([signal.SIGKILL, signal.SIGSEGV]), during=how)
            _wait(lambda: not alive(), ends - time.monotonic())
        finally:
            os.unlink(self.flag)

    def inject(self, alive: Callable[[], bool]) -> None:
        cfg, rng = self.cfg, self.rng
        # the crashes come in the first half, so they happen however fast the trials run
        crash_at = set(rng.sample(range(1, max(cfg.faults // 2, cfg.worker_crashes + 1)), cfg.worker_crashes))
        for n in range(cfg.faults):
            _wait(lambda: not alive(), rng.uniform(*cfg.gap_s))
            if not alive():
                break
            pick = rng.random()
            if n in crash_at:
                self.crash_worker()
            elif pick < 0.4:
                self.kill_trial(signal.SIGKILL)
            elif pick < 0.7:
                self.kill_trial(signal.SIGSEGV)
            else:
                self.stall(alive)

    # -- the whole run ------------------------------------------------------------------------
    def tuner(self, trainable: Any = chaos_trainable, param_space: dict[str, Any] | None = None,
              **run_config: Any) -> Any:
        """The chaos experiment (or ``trainable`` over ``param_space``) led by this process."""
        from actors import FailureConfig, RunConfig, TuneConfig, Tuner
        from actors.search import grid_search

        cfg = self.cfg
        space = param_space or {"x": grid_search(list(range(1, cfg.trials + 1))), "steps": cfg.steps,
                                "step_s": cfg.step_s}
        settings: dict[str, Any] = {"heartbeat_timeout_s": cfg.heartbeat_timeout_s,
                                    "failure_config": FailureConfig(max_failures=-1), **run_config}
        return Tuner(trainable, param_space=space, tune_config=TuneConfig(metric="loss", mode="min"),
                     run_config=RunConfig(name=NAME, storage=self.storage.root, verbose=0,
                                          system=f"tcp://127.0.0.1:{self.port}", **settings))

    def run(self) -> ChaosReport:
        """The chaos experiment with faults injected; then every invariant is checked."""
        grid = self.fit(self.tuner(), self.inject)
        if grid is not None:
            cfg = self.cfg
            check(grid, self.storage, cfg.steps, cfg.trials, self.ident, self.report)
        return self.report

    def fit(self, tuner: Any, during: Callable[[Callable[[], bool]], None]) -> Any:
        """``tuner.fit()`` as the leader, the worker joined, ``during(alive)`` while it runs; then
        the worker stopped and leaks looked for. The grid, or None after a violation."""
        cfg = self.cfg
        started = time.monotonic()
        install_stall(self.flag)
        thread = threading.Thread(target=self._fit, args=(tuner,), daemon=True)
        try:
            thread.start()
            if not _wait(lambda: _listening(self.port) or not thread.is_alive(), 30):
                self.report.violations.append("the leader never listened")
            self.start_worker()
            during(thread.is_alive)
            thread.join(max(0.0, cfg.deadline_s - (time.monotonic() - started)))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.flag)
            self.report.wall_s = time.monotonic() - started
            self.stop_worker()
            remove_stall()
        if thread.is_alive():
            self.report.violations.append(f"fit() did not return within {cfg.deadline_s}s")
        leaked = self.procs.leaked(timeout_s=20.0 if not thread.is_alive() else 1.0)
        if leaked:
            self.report.violations.append(f"processes outlived the run: {leaked}")
        if thread.is_alive():
            _kill_all(self.procs.forked())
            return None
        if "error" in self.out:
            self.report.violations.append(f"fit() raised {self.out['error']!r}")
            return None
        return self.out["grid"]

    def _fit(self, tuner: Any) -> None:
        try:
            self.out["grid"] = tuner.fit()
        except BaseException as exc:  # a violation, reported by run()
            self.out["error"] = exc

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(20)
            except subprocess.TimeoutExpired:
                self.report.violations.append("audition worker did not exit within 20s of SIGTERM")
        left = self.procs.worker()
        if left and not _wait(lambda: not self.procs.worker(), 20):
            self.report.violations.append(f"worker processes outlived it: {[p.pid for p in self.procs.worker()]}")
            _kill_all(self.procs.worker())

def run_chaos(cfg: ChaosConfig, workdir: str) -> ChaosReport:
    """One chaos run in ``workdir`` (storage, the stall flag and the worker's log go there)."""
    return ChaosRun(cfg, workdir).run()


@contextlib.contextmanager
def chaos_dir() -> Iterator[str]:
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="audition_chaos_")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def seeds_from_env(default: int = 3) -> list[int]:
    """$AUDITION_CHAOS_SEEDS: a count (seeds 0..n-1) or a comma-separated list of seeds."""
    raw = os.environ.get("AUDITION_CHAOS_SEEDS", str(default)).strip()
    return [int(s) for s in raw.split(",")] if "," in raw else list(range(int(raw)))
