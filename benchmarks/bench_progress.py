"""What the progress display costs the result path: the throughput workload three ways.

- ``quiet``: ``verbose=0``, nothing printed;
- ``plain``: ``verbose=1`` with stdout a pipe (CI logs): a status line every few seconds;
- ``table``: ``verbose=1`` with stdout a pseudo-terminal: the rich live table, redrawn from the
  controller's progress updates (about once a second) in the driver.

Each run is a child process (``table`` under ``pty.fork``, its output drained by this process);
modes alternate so drifting load hits all alike. ``results_per_s`` is computed as in
``bench_throughput.py``. Prints one JSON line with the medians and ``table_vs_quiet`` (>= 1.0
means the table costs nothing measurable).

    python benchmarks/bench_progress.py [--n 100000] [--repeat 3] [--per-result]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import subprocess
import sys
import tempfile
import time
from typing import Any

import _common

MODES = ("quiet", "plain", "table")


def stream(config: dict[str, Any]) -> None:
    import time

    from actors import report

    for i in range(config["n"]):
        extra = {"wall": time.time()} if i == 0 else {}  # results' timestamp is whole seconds (Ray's)
        report({"loss": 1.0 / (i + 1), "i": i, **extra})


def inner(n: int, mode: str, per_result: bool, out: str) -> None:
    from bench_throughput import PerResult

    from actors import RunConfig, TuneConfig, Tuner

    _common.quiet_logs()
    if (mode == "table") != sys.stdout.isatty():
        raise SystemExit(f"mode {mode}: stdout isatty()={sys.stdout.isatty()}, the wrong kind of output")
    with _common.temp_storage() as storage:
        tuner = Tuner(stream, param_space={"n": n},
                      tune_config=TuneConfig(num_samples=2, max_concurrent_trials=2, metric="loss", mode="min",
                                             scheduler=PerResult() if per_result else None),
                      run_config=RunConfig(name="progress", storage=storage, verbose=0 if mode == "quiet" else 1))
        started_wall = time.time()
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
        histories = [r.metrics_history for r in grid]
    for h in histories:
        if [row["training_iteration"] for row in h] != list(range(1, n + 1)):
            raise SystemExit(f"a trial's history does not hold results 1..{n} exactly once")
    stream_s = started_wall + fit_s - min(h[0]["wall"] for h in histories)
    with open(out, "w") as f:
        json.dump({"mode": mode, "fit_s": fit_s, "stream_s": stream_s, "results_per_s": 2 * n / stream_s}, f)


def _child(n: int, mode: str, per_result: bool) -> dict[str, Any]:
    fd, out = tempfile.mkstemp(prefix="audition_progress_", suffix=".json")
    os.close(fd)
    args = [sys.executable, os.path.abspath(__file__), "--inner", mode, "--n", str(n), "--out", out]
    if per_result:
        args.append("--per-result")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_common.ROOT, os.path.dirname(
        os.path.abspath(__file__)), os.environ.get("PYTHONPATH")])))
    try:
        if mode == "table":
            code, drawn = _in_pty(args, env)
        else:
            res = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            code, drawn = res.returncode, len(res.stdout)
        if code != 0:
            raise SystemExit(f"{mode} run failed with exit code {code}")
        with open(out) as f:
            got: dict[str, Any] = json.load(f)
        got["output_bytes"] = drawn
        return got
    finally:
        os.unlink(out)


def _in_pty(args: list[str], env: dict[str, str]) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the driver, its stdout a terminal
        os.execve(args[0], args, env)
    drawn = 0
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal: it exited
            break
        if not data:
            break
        drawn += len(data)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), drawn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-result", action="store_true", help="one scheduler decision per result")
    parser.add_argument("--inner", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        inner(args.n, args.inner, args.per_result, args.out)
        return
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for _ in range(args.repeat):
        for mode in MODES:
            runs[mode].append(_child(args.n, mode, args.per_result))
    out: dict[str, Any] = {"bench": "progress", "n": args.n, "trials": 2, "repeat": args.repeat,
                           "per_result": args.per_result}
    for mode, got in runs.items():
        out[f"{mode}_results_per_s"] = round(_common.median([r["results_per_s"] for r in got]))
        out[f"{mode}_runs"] = [round(r["results_per_s"]) for r in got]
        out[f"{mode}_output_bytes"] = round(_common.median([float(r["output_bytes"]) for r in got]))
    out["table_vs_quiet"] = round(out["table_results_per_s"] / out["quiet_results_per_s"], 3)
    out["plain_vs_quiet"] = round(out["plain_results_per_s"] / out["quiet_results_per_s"], 3)
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
