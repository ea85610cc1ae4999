"""Results per second through a deciding scheduler (issue 16), audition beside Ray Tune in one run.

2 concurrent trials each report N results (``loss = 1/(i+1)``, the same stream as
``bench_throughput.py``) as fast as they can, under one scheduler:

- ``asha``: ``ASHAScheduler(time_attr="training_iteration", max_t=N, grace_period=1, reduction_factor=4)``;
- ``hyperband``: ``HyperBandScheduler(time_attr="training_iteration", max_t=N)`` (it pauses trials at
  its milestones and stops the worse half, so fewer than 2N results are reported);
- ``median``: ``MedianStoppingRule()`` with Ray's defaults (``time_total_s``, a 60 s grace period: a
  run this short is all grace period; after it every result is decided one by one);
- ``median-judging``: ``MedianStoppingRule(time_attr="training_iteration", grace_period=N/2)``: the second
  half of every trial is judged result by result;
- ``pbt``: ``PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=100)`` (each
  perturbation point asks the better trial for a checkpoint);
- ``per-result``: a plugin that overrides ``on_trial_result`` and declares no horizon (it decides every
  result; a FIFOScheduler subclass with ``tolerates_batching = False``).

``results_per_s`` = results reported / (fit() return - the first result's ``time.time()``), as in
``bench_throughput.py``. Every trial's history is checked to be 1..k without a gap. With
``--ray-python`` the same workload runs under Ray Tune (a separate interpreter where ``ray[tune]``
imports; Ray is never a dependency), alternating with audition's runs. Prints one JSON line.

    python benchmarks/bench_decisions.py [--n 2000] [--schedulers asha,hyperband,...] [--repeat 3]
                                         [--ray-python /path/to/ray/venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import _common

SCHEDULERS = ("asha", "hyperband", "median", "median-judging", "pbt", "per-result")


def make_scheduler(name: str, n: int, engine: str) -> Any:
    """The same scheduler, built from audition's or Ray's classes."""
    if engine == "ray":
        from ray.tune.schedulers import (
            ASHAScheduler,
            FIFOScheduler,
            HyperBandScheduler,
            MedianStoppingRule,
            PopulationBasedTraining,
        )
    else:
        from actors.schedulers import (  # type: ignore[assignment]
            ASHAScheduler,
            FIFOScheduler,
            HyperBandScheduler,
            MedianStoppingRule,
            PopulationBasedTraining,
        )
    if name == "asha":
        return ASHAScheduler(time_attr="training_iteration", max_t=n, grace_period=1, reduction_factor=4)
    if name == "hyperband":
        return HyperBandScheduler(time_attr="training_iteration", max_t=n)
    if name == "median":
        return MedianStoppingRule()
    if name == "median-judging":
        return MedianStoppingRule(time_attr="training_iteration", grace_period=n // 2)
    if name == "pbt":
        return PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=100,
                                       hyperparam_mutations={"lr": [0.1, 0.01]})
    if name == "per-result":

        class EveryResult(FIFOScheduler):  # type: ignore[misc,valid-type]
            """Decides every result itself (no horizon, no batching)."""

            tolerates_batching = False

            def on_trial_result(self, *args: Any, **kwargs: Any) -> Any:
                return super().on_trial_result(*args, **kwargs)

        return EveryResult()
    raise SystemExit(f"unknown scheduler {name!r}; choose from {', '.join(SCHEDULERS)}")


def stream_audition(config: dict[str, Any]) -> None:
    import time

    from actors import report

    for i in range(config["n"]):
        report({"loss": 1.0 / (i + 1), **({"t0": time.time()} if i == 0 else {})})


def stream_ray(config: dict[str, Any]) -> None:
    import time

    from ray import tune

    for i in range(config["n"]):
        tune.report({"loss": 1.0 / (i + 1), **({"t0": time.time()} if i == 0 else {})})


def inner(engine: str, name: str, n: int) -> dict[str, Any]:
    scheduler = make_scheduler(name, n, engine)
    with _common.temp_storage(f"{engine}_decisions_") as storage:
        if engine == "ray":
            import ray
            from ray import tune

            ray.init(num_cpus=2, log_to_driver=False, configure_logging=False)
            try:
                tuner = tune.Tuner(stream_ray, param_space={"n": n, "lr": 0.1},
                                   tune_config=tune.TuneConfig(num_samples=2, max_concurrent_trials=2, metric="loss",
                                                               mode="min", scheduler=scheduler),
                                   run_config=tune.RunConfig(name="decisions", storage_path=storage, verbose=0))
                started_wall = time.time()
                started = time.perf_counter()
                grid = tuner.fit()
                fit_s = time.perf_counter() - started
                histories = [list(r.metrics_dataframe.to_dict("records")) for r in grid]
            finally:
                ray.shutdown()
        else:
            from actors import RunConfig, TuneConfig, Tuner

            _common.quiet_logs()
            tuner = Tuner(stream_audition, param_space={"n": n, "lr": 0.1},
                          tune_config=TuneConfig(num_samples=2, max_concurrent_trials=2, metric="loss", mode="min",
                                                 scheduler=scheduler),
                          run_config=RunConfig(name="decisions", storage=storage, verbose=0))
            started_wall = time.time()
            started = time.perf_counter()
            grid = tuner.fit()
            fit_s = time.perf_counter() - started
            histories = [r.metrics_history for r in grid]
    reported = 0
    for h in histories:
        its = [int(row["training_iteration"]) for row in h]
        if its != list(range(1, len(its) + 1)):
            raise SystemExit(f"{engine}/{name}: a trial's history is not 1..k without gaps: {its[:5]}...")
        reported += len(its)
    first = min(float(h[0]["t0"]) for h in histories)
    stream_s = started_wall + fit_s - first
    return {"engine": engine, "scheduler": name, "n": n, "results": reported, "fit_s": round(fit_s, 4),
            "stream_s": round(stream_s, 4), "results_per_s": round(reported / stream_s)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ray-python", default="", help="an interpreter where ray[tune] imports")
    parser.add_argument("--engine", default="audition", choices=["audition", "ray"], help=argparse.SUPPRESS)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [s for s in args.schedulers.split(",") if s]
    for s in names:
        if s not in SCHEDULERS:
            parser.error(f"unknown scheduler {s!r}; choose from {', '.join(SCHEDULERS)}")
    if args.inner:
        _common.emit(inner(args.engine, names[0], args.n))
        return
    engines = ["audition", *(["ray"] if args.ray_python else [])]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(e, s): [] for e in engines for s in names}
    for _ in range(args.repeat):
        for s in names:
            for e in engines:  # alternate, so drifting machine load hits both alike
                python = args.ray_python if e == "ray" else sys.executable
                cmd = [python, os.path.abspath(__file__), "--schedulers", s, "--n", str(args.n),
                       "--engine", e, "--inner"]
                _, data = _common.run_timed(cmd, timeout_s=1800)
                runs[(e, s)].append(data)
    out: dict[str, Any] = {"bench": "decisions", "n": args.n, "trials": 2, "repeat": args.repeat,
                           "machine": _common.machine()}
    for s in names:
        row: dict[str, Any] = {}
        for e in engines:
            got = runs[(e, s)]
            row[f"{e}_results_per_s"] = round(_common.median([r["results_per_s"] for r in got]))
            row[f"{e}_runs"] = [r["results_per_s"] for r in got]
            row[f"{e}_results"] = got[0]["results"]
        if "ray" in engines:
            row["ratio"] = round(row["audition_results_per_s"] / max(1, row["ray_results_per_s"]), 1)
        out[s] = row
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
