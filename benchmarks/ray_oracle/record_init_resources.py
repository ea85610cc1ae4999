"""Record what ``ray.init(num_cpus=..., resources=...)`` does to a Tune run in Ray 2.60 (the oracle for
``tests/data/ray_init_resources.json``): how many trials run at once (each sleeps, then reports when it
ran), whatever the machine's own core count, and what ``ray.init`` raises for a second call, for
Ray's spelling of CPUs inside ``resources`` and for an unknown keyword.

Run with a Python that has Ray installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_init_resources.py tests/data/ray_init_resources.json

``tests/test_init_resources.py`` runs the same cases under audition (``tests/_init_driver.py``) and compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from typing import Any

SLEEP_S = 1.5
# (case, ray.init's keyword arguments, the trial's resources or None, trials)
CASES: list[tuple[str, dict[str, Any], dict[str, float] | None, int]] = [
    ("one_cpu", {"num_cpus": 1}, None, 3),
    ("more_cpus_than_cores", {"num_cpus": 4}, None, 4),
    ("two_cpus_a_trial", {"num_cpus": 4}, {"cpu": 2}, 4),
    ("custom_resource", {"num_cpus": 4, "resources": {"slot": 1}}, {"cpu": 1, "slot": 1}, 3),
]


def overlap(spans: list[tuple[float, float]]) -> int:
    """The most spans that cover one moment."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def run_case(tune: Any, resources: dict[str, float] | None, trials: int, storage: str) -> dict[str, Any]:
    """Run ``trials`` sleeping trials and report how many ran at once."""

    def train(config: dict[str, Any]) -> None:
        start = time.time()
        time.sleep(SLEEP_S)
        tune.report({"start": start, "end": time.time()})

    trainable = train if resources is None else tune.with_resources(train, resources)
    grid = tune.Tuner(trainable, tune_config=tune.TuneConfig(num_samples=trials),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    spans = [(r.metrics["start"], r.metrics["end"]) for r in grid]
    return {"trials": len(spans), "at_once": overlap(spans), "errors": sum(r.error is not None for r in grid)}


def raised(call: Any) -> list[str] | None:
    """The exception class and message ``call()`` raised, or None."""
    try:
        call()
    except Exception as exc:
        return [type(exc).__name__, str(exc)]
    return None


def init_errors(init: Any, shutdown: Any) -> dict[str, list[str] | None]:
    """What ``init`` raises for a second call (and with ``ignore_reinit_error``), for CPUs named in
    ``resources`` and for an unknown keyword; each case ends with ``shutdown()``."""
    init(num_cpus=1)
    out = {"init_twice": raised(lambda: init(num_cpus=1)),
           "init_twice_ignored": raised(lambda: init(num_cpus=1, ignore_reinit_error=True))}
    shutdown()
    out["cpu_in_resources"] = raised(lambda: init(resources={"CPU": 2}))
    shutdown()
    out["unknown_keyword"] = raised(lambda: init(num_cpu=2))
    shutdown()
    return out


def main() -> None:
    import ray
    from ray import tune

    out: dict[str, Any] = {"ray": ray.__version__, "cases": CASES, "sleep_s": SLEEP_S, "runs": {}}
    for name, init, resources, trials in CASES:
        ray.init(include_dashboard=False, log_to_driver=False, **init)
        out["runs"][name] = run_case(tune, resources, trials, tempfile.mkdtemp())
        ray.shutdown()
    out.update(init_errors(lambda **kw: ray.init(include_dashboard=False, **kw), ray.shutdown))
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
