"""``with_parameters``: 10 trials sharing one large numpy array (default 800 MB).

- ``pickle_roundtrip_s``: one ``cloudpickle.dumps`` + ``loads`` of the array (the target's yardstick;
  the median of ``max(3, --repeat)``, each listed in ``pickle_roundtrip_all_s``);
- ``fit_small_s`` / ``fit_large_s``: ``fit()`` of the same 10 trials (2 at a time on 2 cores) with a
  1-element array and with the large one (medians of ``--repeat``, after a warm-up run);
  ``added_startup_s`` is their difference and
  ``added_vs_roundtrip`` its ratio to the yardstick (target: <= 2);
- each trial reads a strided sample of the array and reports it, so the data did arrive; it also
  reads the controller's memory (its parent process, as in ``bench_memory.py``): ``rss`` counts
  the pages it shares copy-on-write with the driver (the actor system is forked from it, and the
  driver holds the array), ``private`` (``Private_Clean + Private_Dirty`` of
  ``/proc/<pid>/smaps_rollup``) is what the controller holds by itself;
- ``file_route``: what a machine other than the driver's costs (multi-host): writing the object
  file once, and mapping + unpickling it in a trial process (its download from storage comes on top).
- ``multi_host`` (end to end): the driver is the leader (``RunConfig(system="tcp://127.0.0.1:PORT",
  leader_runs_trials=False)``) and one ``audition worker --cpus 2`` joins it over TCP on loopback,
  started as the tests' cluster harness does, with its own object area (``AUDITION_OBJECTS_DIR``),
  so it fetches the array from storage as another machine would (storage is the local disk here:
  the "download" is a file copy, no network). ``fit_small_s`` / ``fit_large_s`` time ``fit()`` from
  the call until it returns, the worker's start and join included (the same in both, a new worker
  per fit); ``added_startup_s`` and ``added_vs_roundtrip`` as above. ``leader_private_mb`` is the
  largest private memory (``Private_Clean + Private_Dirty``) any leader-side actor process (the
  controller among them: every process the driver's actor system forked) had, sampled every
  0.1 s during the fit, for the 1-element and the large array: the controller does not grow
  with the array if they match. ``worker_fetches``: downloads made on the worker's machine.
- ``--partial``: also time ``functools.partial(train, data=array)``, the old stand-in (slow: the
  array is pickled into every trial).
- ``--hosts single|multi|both`` (default both): which of the two end-to-end measurements to run.

    python benchmarks/bench_with_parameters.py [--mb 800] [--repeat 3] [--partial] [--hosts both]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import _common


def _memory(pid: int) -> dict[str, int]:
    out = {"rss": 0, "private": 0}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            if key == "Rss":
                out["rss"] = int(rest.split()[0]) * 1024
            elif key in ("Private_Clean", "Private_Dirty"):
                out["private"] += int(rest.split()[0]) * 1024
    return out


def train(config: dict[str, Any], data: Any = None) -> None:
    import os

    from actors import report

    step = max(1, data.size // 1000)
    mem = _memory(os.getppid())
    from actors._driver import parameters

    report({"sample": float(data[::step].sum()), "n": int(data.size), "controller": os.getppid(),
            "controller_rss": mem["rss"], "controller_private": mem["private"], "pid": os.getpid(),
            "fetches": parameters.fetches, "read_only": not data.flags.writeable})


def _fit(trainable: Any, storage: str, name: str) -> tuple[float, list[dict[str, Any]]]:
    from actors import RunConfig, TuneConfig, Tuner
    from actors.search import grid_search

    started = time.perf_counter()
    grid = Tuner(trainable, param_space={"i": grid_search(list(range(10)))},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(name=name, storage=storage, verbose=0, controller_timeout_s=600)).fit()
    elapsed = time.perf_counter() - started
    errors = [str(r.error) for r in grid if r.error is not None]
    if errors:
        raise SystemExit(f"{name}: {len(errors)} trials failed: {errors[0][:500]}")
    return elapsed, [r.metrics for r in grid]


# ------------------------------------------------------------------------------ multi-host
class _LeaderMemory:
    """Samples, in a thread, the private memory of every process the driver's actor system forked.
    Thespian daemonizes its admin, so they are not the driver's children: they are the processes
    with the driver's command line (a fork keeps it; the worker's processes have their own)."""

    def __init__(self) -> None:
        self.peak = 0
        self.processes: set[int] = set()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        mine = me.cmdline()
        while not self.stopped.wait(0.1):
            for proc in psutil.process_iter(["cmdline"]):
                if proc.pid == me.pid or proc.info["cmdline"] != mine:
                    continue
                try:
                    self.peak = max(self.peak, _memory(proc.pid)["private"])
                    self.processes.add(proc.pid)
                except OSError:  # it ended meanwhile (or is a zombie: no smaps)
                    pass

    def stop(self) -> tuple[int, int]:
        self.stopped.set()
        self.thread.join()
        return self.peak, len(self.processes)


def _start_worker(port: int, objects: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=_common.ROOT, AUDITION_OBJECTS_DIR=objects)
    return subprocess.Popen([sys.executable, "-m", "actors._cli", "worker", "--leader", f"127.0.0.1:{port}",
                             "--cpus", "2", "--id", f"bench-wp-{port}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _fit_multi_host(trainable: Any, storage: str, name: str) -> tuple[float, tuple[int, int], list[dict[str, Any]]]:
    """One fit with the driver as leader and a new worker process; (seconds, (leader peak private
    bytes, leader processes seen), rows)."""
    from actors import RunConfig, TuneConfig, Tuner
    from actors._driver.system import free_port
    from actors.search import grid_search

    port = free_port()
    objects = tempfile.mkdtemp(prefix="audition_bench_worker_objects_")  # the worker's machine
    tuner = Tuner(trainable, param_space={"i": grid_search(list(range(10)))},
                  tune_config=TuneConfig(max_concurrent_trials=2),
                  run_config=RunConfig(name=name, storage=storage, verbose=0, controller_timeout_s=600,
                                       leader_runs_trials=False, system=f"tcp://127.0.0.1:{port}"))
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["grid"] = tuner.fit()
        except BaseException as exc:  # reported below
            out["error"] = exc

    worker: subprocess.Popen[bytes] | None = None
    memory: _LeaderMemory | None = None
    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            if time.monotonic() > deadline or not thread.is_alive():
                raise SystemExit(f"{name}: the leader did not listen on {port} ({out.get('error')!r})")
            time.sleep(0.02)
        memory = _LeaderMemory()
        worker = _start_worker(port, objects)
        thread.join()
        elapsed = time.perf_counter() - started
    finally:
        peak = memory.stop() if memory is not None else (0, 0)
        if worker is not None:
            _stop_worker(worker)
        shutil.rmtree(objects, ignore_errors=True)
    if "error" in out:
        raise SystemExit(f"{name}: fit() failed: {out['error']!r}")
    grid = out["grid"]
    errors = [str(r.error) for r in grid if r.error is not None]
    if errors:
        raise SystemExit(f"{name}: {len(errors)} trials failed: {errors[0][:500]}")
    return elapsed, peak, [r.metrics for r in grid]


def _multi_host(tiny: Any, large: Any, storage: str, repeat: int, expected: float, n: int,
                roundtrip_s: float) -> dict[str, Any]:
    _fit_multi_host(tiny, storage, "mh_warmup")
    smalls: list[float] = []
    larges: list[float] = []
    small_peaks: list[tuple[int, int]] = []
    large_peaks: list[tuple[int, int]] = []
    rows: list[dict[str, Any]] = []
    for i in range(repeat):
        s_i, s_peak, _ = _fit_multi_host(tiny, storage, f"mh_small{i}")
        l_i, l_peak, rows = _fit_multi_host(large, storage, f"mh_large{i}")
        smalls.append(s_i)
        larges.append(l_i)
        small_peaks.append(s_peak)
        large_peaks.append(l_peak)
    if {r["sample"] for r in rows} != {expected} or {r["n"] for r in rows} != {n}:
        raise SystemExit("multi-host: a trial saw other data than the driver's array")
    if not all(r["read_only"] for r in rows):
        raise SystemExit("multi-host: a trial got the driver's array, not the worker machine's mapped copy")
    small_s, large_s = _common.median(smalls), _common.median(larges)
    return {"fit_small_s": round(small_s, 3), "fit_large_s": round(large_s, 3),
            "added_startup_s": round(large_s - small_s, 3),
            "added_vs_roundtrip": round((large_s - small_s) / roundtrip_s, 2),
            "fit_small_all_s": [round(v, 3) for v in smalls], "fit_large_all_s": [round(v, 3) for v in larges],
            "trial_processes": len({r["pid"] for r in rows}),
            "worker_fetches": sum({r["pid"]: r["fetches"] for r in rows}.values()),
            "leader_private_mb": {"small": round(max(p for p, _ in small_peaks) / 2**20, 1),
                                  "large": round(max(p for p, _ in large_peaks) / 2**20, 1)},
            "leader_processes": max(k for _, k in small_peaks + large_peaks)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=800.0)
    parser.add_argument("--partial", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hosts", choices=("single", "multi", "both"), default="both")
    args = parser.parse_args(argv)
    import cloudpickle
    import numpy as np

    from actors import with_parameters
    from actors._driver.parameters import read_object, write_object

    _common.quiet_logs()
    n = int(args.mb * 2**20 / 8)
    big = np.arange(n, dtype=np.float64)
    expected = float(big[::max(1, n // 1000)].sum())

    roundtrips = []
    for _ in range(max(3, args.repeat)):  # page faults make one round trip vary 2x here: the median
        started = time.perf_counter()
        blob = cloudpickle.dumps(big)
        back = cloudpickle.loads(blob)
        roundtrips.append(time.perf_counter() - started)
        del blob, back
    roundtrip_s = _common.median(roundtrips)

    out: dict[str, Any] = {"bench": "with_parameters", "mb": args.mb, "trials": 10,
                           "pickle_roundtrip_s": round(roundtrip_s, 3),
                           "pickle_roundtrip_all_s": [round(v, 3) for v in roundtrips]}
    tiny = with_parameters(train, data=np.arange(1, dtype=np.float64))
    large = with_parameters(train, data=big)
    if args.hosts in ("multi", "both"):
        with _common.temp_storage() as storage:
            out["multi_host"] = _multi_host(tiny, large, storage, args.repeat, expected, n, roundtrip_s)
    if args.hosts in ("single", "both"):
        with _common.temp_storage() as storage:
            _fit(tiny, storage, "warmup")  # imports and first-time costs out of the comparison
            smalls, larges = [], []
            for i in range(args.repeat):
                smalls.append(_fit(tiny, storage, f"small{i}")[0])
                large_i, rows = _fit(large, storage, f"large{i}")
                larges.append(large_i)
            small_s, large_s = _common.median(smalls), _common.median(larges)
            if {r["sample"] for r in rows} != {expected} or {r["n"] for r in rows} != {n}:
                raise SystemExit("a trial saw other data than the driver's array")
            out.update(fit_small_s=round(small_s, 3), fit_large_s=round(large_s, 3),
                       added_startup_s=round(large_s - small_s, 3),
                       added_vs_roundtrip=round((large_s - small_s) / roundtrip_s, 2),
                       trial_processes=len({r["pid"] for r in rows}),
                       controller_rss_mb=round(max(r["controller_rss"] for r in rows) / 2**20, 1),
                       controller_private_mb=round(max(r["controller_private"] for r in rows) / 2**20, 1),
                       driver_rss_mb=round(_memory(os.getpid())["rss"] / 2**20, 1))
            if args.partial:
                partial_s, _ = _fit(functools.partial(train, data=big), storage, "partial")
                out["fit_partial_s"] = round(partial_s, 3)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "obj")
        started = time.perf_counter()
        write_object(path, big, "bench")
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        mapped = read_object(path)
        read_s = time.perf_counter() - started
        assert float(mapped[::max(1, n // 1000)].sum()) == expected
        del mapped
    out["file_route"] = {"write_s": round(write_s, 3), "map_and_unpickle_s": round(read_s, 4)}
    out["machine"] = _common.machine()
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
