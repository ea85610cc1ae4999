"""Where a simulated experiment's wall time goes, by the kind of event the simulator delivers: the
simulator benchmark's experiment, each core event, actor delivery and training step timed on its own.

    python benchmarks/probe_simulator_events.py [--runs 30] [--step-s 1.0]

Prints one JSON line: per kind, the events a run and the milliseconds a run they took (the timing
adds ~1 us an event; the kinds' sum is below the run's time by what happens between events and the
set-up). A kind is the event's message class, with a scheduler call's or reply's hook
(``SchedulerReply:RESULT``), prefixed by who gets it (``core:``, ``actor:``) or ``step`` for a
simulated training step ending.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any

import _common  # noqa: F401  (puts the tree measured first on sys.path: this checkout, or PYTHONPATH's)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--step-s", type=float, default=1.0)
    args = parser.parse_args()

    from actors import FailureConfig, RunConfig, TuneConfig, search
    from actors.schedulers import ASHAScheduler
    from actors.testing import simulate
    from actors.testing.world import SimWorld

    count: collections.Counter[str] = collections.Counter()
    spent: collections.Counter[str] = collections.Counter()
    clock = time.perf_counter

    def kind(msg: Any) -> str:
        name = type(msg).__name__
        hook = getattr(msg, "kind", None)
        return f"{name}:{hook.name}" if name in ("SchedulerCall", "SchedulerReply") and hook is not None else name

    def timed(method: Any, name: Any) -> Any:
        def wrapper(self: SimWorld, *args: Any) -> None:
            started = clock()
            method(self, *args)
            k = name(args)
            spent[k] += clock() - started
            count[k] += 1
        return wrapper

    SimWorld._core = timed(SimWorld._core, lambda a: "core:" + kind(a[0]))  # type: ignore[method-assign]
    SimWorld._deliver = timed(SimWorld._deliver, lambda a: "actor:" + kind(a[1]))  # type: ignore[method-assign]
    SimWorld._step = timed(SimWorld._step, lambda a: "step")  # type: ignore[method-assign]
    step_s = args.step_s

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": step_s}

    def one(seed: int) -> None:
        with simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                      TuneConfig(metric="loss", mode="min", num_samples=20,
                                 scheduler=ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3)),
                      RunConfig(failure_config=FailureConfig(max_failures=-1)),
                      max_iterations=27, seed=seed, cpus=4):
            pass

    one(10_000)  # imports and first-use costs
    count.clear()
    spent.clear()
    started = clock()
    for seed in range(args.runs):
        one(seed)
    total = clock() - started
    n = args.runs
    kinds = {k: {"per_run": round(count[k] / n, 1), "ms_per_run": round(1000 * spent[k] / n, 2),
                 "us_each": round(1e6 * spent[k] / count[k], 1)}
             for k in sorted(spent, key=lambda k: -spent[k])}
    print(json.dumps({"probe": "simulator_events", "runs": n, "step_s": step_s,
                      "ms_per_run": round(1000 * total / n, 2),
                      "ms_in_events_per_run": round(1000 * sum(spent.values()) / n, 2), "kinds": kinds}))


if __name__ == "__main__":
    main()
