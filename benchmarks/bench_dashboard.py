"""How fast ``audition dashboard`` opens a large experiment: 5,000 trials x 100 results by default.

Writes a synthetic experiment in the engine's on-disk format (the experiment state with its pointer,
each trial's ``result.json`` and ``params.json``, marks on some trials), then, with a fresh app each
time (nothing cached), times what the first page view asks for: the page, its script, the experiment
list, the overview and the first page of the table. Also times the views opened next (learning curves
of the best 50 trials, best so far over every result, parallel coordinates) cold and warm, and one
poll of a page already open. Target: open < 2 s. Prints one JSON line.

    python benchmarks/bench_dashboard.py [--trials 5000] [--results 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

import _common

TARGET_OPEN_S = 2.0
FIRST_VIEW = ("/", "/static/app.js", "/api/experiments", "/api/e/{name}/overview",
              "/api/e/{name}/trials?limit=50&sort=trial_id")


def write_experiment(root: str, name: str, trials: int, results: int, seed: int = 0) -> None:
    """The on-disk format as the controller writes it (see storage/_layout.py), without running anything."""
    from storage import ExperimentLayout, StorageContext, write_experiment_state

    rng = random.Random(seed)
    ctx = StorageContext(root)
    layout = ExperimentLayout(ctx, name)
    statuses = ["TERMINATED"] * 80 + ["RUNNING"] * 8 + ["PAUSED"] * 6 + ["ERROR"] * 3 + ["PENDING"] * 3
    rows = []
    t0 = 1.8e9
    for n in range(trials):
        tid = f"bench_{n:05d}"
        config = {"lr": 10 ** rng.uniform(-4, 0), "batch": rng.choice([32, 64, 128, 256]),
                  "opt": rng.choice(["sgd", "adam", "rmsprop"]), "layers": rng.randint(1, 8),
                  "dropout": rng.uniform(0, 0.5)}
        status = rng.choice(statuses)
        reported = 0 if status == "PENDING" else results
        base = rng.uniform(0.1, 1.0)
        history = [{"loss": base + 1.0 / (i + 1) + rng.gauss(0, 0.01), "acc": 1 - base / (i + 2),
                    "trial_id": tid, "training_iteration": i + 1, "time_this_iter_s": 0.5,
                    "time_total_s": 0.5 * (i + 1), "timestamp": int(t0 + n * 0.3 + 0.5 * i), "done": False,
                    "hostname": "bench", "pid": 1000 + n % 50, "config": config}
                   for i in range(reported)]
        d = os.path.join(root, name, tid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "params.json"), "w") as f:
            json.dump(config, f)
        with open(os.path.join(d, "result.json"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in history)
        marks = [{"kind": "pause", "iteration": results // 3}] if n % 4 == 0 and reported else []
        if status == "ERROR":
            marks.append({"kind": "fail", "iteration": reported})
        rows.append({"trial_id": tid, "config": config, "status": status,
                     "last_result": history[-1] if history else {}, "num_failures": int(status == "ERROR"),
                     "error": "ValueError: diverged" if status == "ERROR" else None, "traceback": None,
                     "checkpoint": None, "logged_iteration": reported, "max_index": -1, "marks": marks})
    write_experiment_state(ctx, layout, {"version": 1, "name": name, "metric": "loss", "mode": "min",
                                         "trial_prefix": "bench", "suggested": trials, "searcher": None,
                                         "stopper": None, "trials": rows, "written_at": time.time(),
                                         "scheduler": None, "retired": []})
    with open(os.path.join(root, name, "tuner.pkl"), "wb") as f:
        f.write(b"not read by the dashboard")


def timed(client, paths: list[str]) -> float:
    started = time.perf_counter()
    for p in paths:
        r = client.get(p)
        if r.status_code != 200:
            raise SystemExit(f"GET {p}: {r.status_code} {r.text[:300]}")
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--results", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    started = time.perf_counter()
    from starlette.testclient import TestClient

    from actors._dashboard.app import create_app
    from actors._dashboard.source import open_catalog
    import_s = time.perf_counter() - started

    name = "big"
    with _common.temp_storage("audition_bench_dashboard_") as root:
        started = time.perf_counter()
        write_experiment(root, name, args.trials, args.results)
        write_s = time.perf_counter() - started
        first = [p.format(name=name) for p in FIRST_VIEW]
        opens, curves_cold, best_cold, parallel_cold, warm_poll, curves_warm, best_warm = [], [], [], [], [], [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            client = TestClient(create_app(open_catalog(os.path.join(root, name))))
            timed(client, first)
            opens.append(time.perf_counter() - started)
            curves_cold.append(timed(client, [f"/api/e/{name}/curves?metric=loss"]))
            parallel_cold.append(timed(client, [f"/api/e/{name}/parallel?metric=loss"]))
            best_cold.append(timed(client, [f"/api/e/{name}/best?metric=loss"]))
            time.sleep(0.6)  # past the state's re-read interval: a poll reads the pointer again
            warm_poll.append(timed(client, [f"/api/e/{name}/overview", f"/api/e/{name}/trials?limit=50"]))
            curves_warm.append(timed(client, [f"/api/e/{name}/curves?metric=loss"]))
            best_warm.append(timed(client, [f"/api/e/{name}/best?metric=loss"]))
            client.close()
    med = statistics.median
    _common.emit({
        "benchmark": "dashboard", "trials": args.trials, "results_per_trial": args.results, "repeat": args.repeat,
        "open_s": round(med(opens), 3), "open_max_s": round(max(opens), 3), "target_open_s": TARGET_OPEN_S,
        "open_ok": max(opens) < TARGET_OPEN_S,
        "curves_top50_cold_s": round(med(curves_cold), 3), "curves_top50_warm_s": round(med(curves_warm), 3),
        "best_so_far_cold_s": round(med(best_cold), 3), "best_so_far_warm_s": round(med(best_warm), 3),
        "parallel_s": round(med(parallel_cold), 3), "poll_s": round(med(warm_poll), 3),
        "import_s": round(import_s, 3), "write_experiment_s": round(write_s, 1),
    })


if __name__ == "__main__":
    main()
