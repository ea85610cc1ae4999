"""Controller memory: its RSS after 1,000 and after 5,000 finished trivial trials.

Method: the controller creates every trial actor, and with the multi-process system each actor is
a process forked by its creator, so inside the trainable ``os.getppid()`` is the controller's pid
(checked: the pid is the same for every trial, and it is neither the driver nor a trial). Trial
``i`` (a grid over 0..N-1, run in order, 2 at a time) reads the controller's RSS from /proc when
``i`` is a multiple of ``--every`` and reports it as a metric. When trial ``i`` starts, at least
``i - 2`` trials have finished and been written out, so the sample at ``i = 1000`` is "after
~1,000 finished trials". Growth per trial = (RSS at 5,000 - RSS at 1,000) / 4,000: the marginal
cost of one more finished trial, without start-up allocations. The trial at ``i = 0`` gives the
baseline. (RSS moves in pages and pymalloc arenas, so small differences are noise: the measured
span is 4,000 trials so 5 KB/trial would be ~20 MB.) Prints one JSON line.

    python benchmarks/bench_memory.py [--first 1000] [--last 5000] [--every 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import _common


def sample(config: dict[str, Any]) -> None:
    import os

    from actors import report

    metrics: dict[str, Any] = {"loss": 0.0, "ppid": os.getppid()}
    if config["i"] % config["every"] == 0:
        with open(f"/proc/{os.getppid()}/statm", encoding="ascii") as handle:
            metrics["controller_rss"] = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    report(metrics)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", type=int, default=1000)
    parser.add_argument("--last", type=int, default=5000)
    parser.add_argument("--every", type=int, default=500)
    args = parser.parse_args(argv)
    if args.first % args.every or args.last % args.every:
        parser.error("--first and --last must be multiples of --every")
    from actors import RunConfig, TuneConfig, Tuner
    from actors.search import grid_search

    _common.quiet_logs()
    n = args.last + 1  # trial i == last samples after ~last finished trials
    with _common.temp_storage() as storage:
        tuner = Tuner(sample, param_space={"i": grid_search(list(range(n))), "every": args.every},
                      tune_config=TuneConfig(num_samples=1),
                      run_config=RunConfig(name="memory", storage=storage, verbose=0))
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
        rows = {r.config["i"]: r.metrics for r in grid}
    controllers = {m["ppid"] for m in rows.values()}
    if len(controllers) != 1 or os.getpid() in controllers:
        raise SystemExit(f"trial actors have parents {controllers}: cannot identify the controller")
    rss = {i: m["controller_rss"] for i, m in sorted(rows.items()) if "controller_rss" in m}
    first, last = rss[args.first], rss[args.last]
    per_trial = (last - first) / (args.last - args.first)
    _common.emit({
        "bench": "memory", "trials": n, "fit_s": round(fit_s, 2), "controller_pid": controllers.pop(),
        "rss_start_mb": round(rss[0] / 2**20, 2), f"rss_after_{args.first}_mb": round(first / 2**20, 2),
        f"rss_after_{args.last}_mb": round(last / 2**20, 2),
        "bytes_per_finished_trial": round(per_trial), "bytes_per_trial_from_start": round(
            (last - rss[0]) / args.last),
        "rss_mb_by_trial": {str(i): round(v / 2**20, 2) for i, v in rss.items()},
    })


if __name__ == "__main__":
    main(sys.argv[1:])
