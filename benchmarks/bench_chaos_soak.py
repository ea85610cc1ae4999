"""Chaos soak: the harness of tests/test_chaos.py (tests/_chaos.py) over many seeds.

Each run: a leader (this process) and one ``audition worker``, ``--trials`` checkpointing trials of
``--steps`` steps, ``--faults`` faults chosen by ``random.Random(seed)`` (SIGKILL or SIGSEGV of a
trial process, storage stalls with a trial killed inside most of them, one worker crash and
restart); then the invariants: the run ends, histories 1..N once, each retry resumed from the
newest committed checkpoint, no process left. Seeds ``--first-seed`` .. + ``--seeds`` - 1 (CI runs
0, 1, 2). Reports runs, faults injected (by kind), trial failures the controller counted, resumes
checked, invariant violations (with their seeds) and wall times. One JSON line; exit code 1 when
any invariant broke.

    python benchmarks/bench_chaos_soak.py [--seeds 10] [--first-seed 100] [--trials 20] [--steps 20]
                                          [--faults 12]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Any

import _common

from tests._chaos import ChaosConfig, chaos_dir, run_chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="how many runs (one seed each)")
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--trials", type=int, default=ChaosConfig.trials)
    parser.add_argument("--steps", type=int, default=ChaosConfig.steps)
    parser.add_argument("--faults", type=int, default=ChaosConfig.faults, help="faults injected per run")
    args = parser.parse_args(argv)
    _common.quiet_logs()
    injected: Counter[str] = Counter()
    violations: list[dict[str, Any]] = []
    walls: list[float] = []
    failures = resumes = 0
    started = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        cfg = ChaosConfig(seed=seed, trials=args.trials, steps=args.steps, faults=args.faults)
        with chaos_dir() as workdir:
            report = run_chaos(cfg, workdir)
        print(report.summary(), file=sys.stderr, flush=True)
        injected.update(report.injected)
        failures += report.failures
        resumes += report.resumes
        walls.append(report.wall_s)
        if report.violations:
            violations.append({"seed": seed, "violations": report.violations})
    faults = sum(n for kind, n in injected.items() if kind != "no_victim")
    _common.emit({
        "bench": "chaos_soak", "runs": args.seeds, "first_seed": args.first_seed, "trials": args.trials,
        "steps": args.steps, "faults_per_run": args.faults, "faults_injected": faults,
        "faults_by_kind": dict(sorted(injected.items())), "trial_failures": failures,
        "resumes_checked": resumes, "invariant_violations": sum(len(v["violations"]) for v in violations),
        "runs_with_violations": violations, "wall_s": round(time.perf_counter() - started, 2),
        "run_s_median": round(_common.median(walls), 2), "run_s_max": round(max(walls), 2),
        "machine": _common.machine(),
    })
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
