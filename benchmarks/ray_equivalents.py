"""The Ray Tune equivalents of the audition benchmarks (for ``run.py --compare-ray``).

Same trainables, same sample counts, same scheduler settings; ``ray.init(num_cpus=2)`` (the
machine's core count unless ``--cpus``). Ray is never a dependency of audition: this script needs
an interpreter where ``ray[tune]`` is importable (for example a separate venv:
``python -m venv /tmp/rayvenv && /tmp/rayvenv/bin/pip install "ray[tune]"``) and is only run by
``run.py --compare-ray [--ray-python /tmp/rayvenv/bin/python]``. Each workload prints one JSON line
with the same keys as its audition counterpart (plus ``init_s``, the time spent in ``ray.init``).

    python benchmarks/ray_equivalents.py trivial [--n 100]
    python benchmarks/ray_equivalents.py throughput [--n 2000]
    python benchmarks/ray_equivalents.py startup
    python benchmarks/ray_equivalents.py asha [--n 27]

``fit_s`` excludes ``ray.init`` (``process_s``, timed from outside, includes everything).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

_T0 = time.time()

import _common  # noqa: E402

MAX_T = 50
GRACE = 1
REDUCTION = 3


def curve_params(i: int) -> tuple[float, float, float]:
    """The same formula as bench_asha.curve_params."""
    a = 1.0 + (i * 7 % 10) / 10.0
    k = 0.02 + 0.3 * ((i * 13) % 17) / 17.0
    b = 0.05 * ((i * 5) % 11)
    return a, k, b


def trivial(config: dict[str, Any]) -> None:
    from ray import tune

    tune.report({"loss": 0.0})


def stream(config: dict[str, Any]) -> None:
    import time

    from ray import tune

    for i in range(config["n"]):
        metrics: dict[str, Any] = {"loss": 1.0 / (i + 1)}
        if i == 0:
            metrics["t0"] = time.time()  # Ray's own timestamp has 1 s resolution
        tune.report(metrics)


def first(config: dict[str, Any]) -> None:
    import time

    from ray import tune

    tune.report({"t": time.time()})


def curve(config: dict[str, Any]) -> None:
    from ray import tune

    a, k, b = curve_params(config["i"])
    for t in range(1, MAX_T + 1):
        tune.report({"loss": b + a * math.exp(-k * t)})


def _init(cpus: int) -> float:
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=cpus, log_to_driver=False, configure_logging=False)
    return time.perf_counter() - started


def _fit(trainable: Any, storage: str, name: str, **kwargs: Any) -> tuple[Any, float, float]:
    from ray import tune

    param_space = kwargs.pop("param_space", None)
    tuner = tune.Tuner(trainable, param_space=param_space, tune_config=tune.TuneConfig(**kwargs),
                       run_config=tune.RunConfig(name=name, storage_path=storage, verbose=0))
    t_fit = time.time()
    started = time.perf_counter()
    grid = tuner.fit()
    fit_s = time.perf_counter() - started
    if grid.num_errors:
        raise SystemExit(f"{grid.num_errors} Ray trials failed: {grid.errors[:1]}")
    return grid, fit_s, t_fit


def inner(workload: str, n: int, cpus: int) -> dict[str, Any]:
    import ray

    init_s = _init(cpus)
    out: dict[str, Any] = {"bench": workload, "engine": "ray", "ray": ray.__version__, "cpus": cpus,
                           "init_s": round(init_s, 4)}
    try:
        with _common.temp_storage("ray_bench_") as storage:
            if workload == "trivial":
                grid, fit_s, _ = _fit(trivial, storage, "trivial", num_samples=n)
                assert all(r.metrics["training_iteration"] == 1 for r in grid) and len(grid) == n
                out.update(n=n, fit_s=round(fit_s, 4), trials_per_s=round(n / fit_s, 1))
            elif workload == "throughput":
                grid, fit_s, t_fit = _fit(stream, storage, "throughput", num_samples=2,
                                          param_space={"n": n}, max_concurrent_trials=2)
                ended = t_fit + fit_s
                assert all(r.metrics["training_iteration"] == n for r in grid)
                first_t = min(float(r.metrics_dataframe["t0"].min()) for r in grid)
                out.update(n=n, trials=2, fit_s=round(fit_s, 4), stream_s=round(ended - first_t, 4),
                           results_per_s=round(2 * n / (ended - first_t)),
                           fit_results_per_s=round(2 * n / fit_s))
            elif workload == "startup":
                grid, fit_s, t_fit = _fit(first, storage, "startup", num_samples=1)
                t_result = grid[0].metrics["t"]
                out.update(fit_s=round(fit_s, 4), fit_to_first_result_s=round(t_result - t_fit, 4),
                           script_start_to_first_result_s=round(t_result - _T0, 4))
            elif workload == "asha":
                from ray import tune
                from ray.tune.schedulers import ASHAScheduler

                scheduler = ASHAScheduler(time_attr="training_iteration", max_t=MAX_T, grace_period=GRACE,
                                          reduction_factor=REDUCTION)
                grid, fit_s, _ = _fit(curve, storage, "asha", metric="loss", mode="min", scheduler=scheduler,
                                      param_space={"i": tune.grid_search(list(range(n)))})
                iterations = sum(int(r.metrics.get("training_iteration", 0)) for r in grid)
                best = grid.get_best_result()
                out.update(n=n, max_t=MAX_T, fit_s=round(fit_s, 4), total_iterations=iterations,
                           best_loss=round(float(best.metrics["loss"]), 6), best_i=best.config["i"],
                           iterations_per_s=round(iterations / fit_s, 1))
            else:
                raise SystemExit(f"unknown workload {workload!r}")
    finally:
        ray.shutdown()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["trivial", "throughput", "startup", "asha"])
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.n or {"trivial": 100, "throughput": 2000, "startup": 1, "asha": 27}[args.workload]
    if args.inner:
        _common.emit(inner(args.workload, n, args.cpus))
        return
    wall, data = _common.run_timed(_common.self_argv(__file__, [args.workload, "--n", str(n),
                                                                "--cpus", str(args.cpus)]), timeout_s=1800)
    data["process_s"] = round(wall, 4)
    _common.emit(data)


if __name__ == "__main__":
    main(sys.argv[1:])
