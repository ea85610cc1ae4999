"""Run the whole benchmark suite and print a table with the targets, and one JSON summary line.

    python benchmarks/run.py [--quick] [--compare-ray] [--ray-python PATH] [--rounds 1] [--json PATH]

Every workload runs as its own script in fresh processes (see each ``bench_*.py``); the floor
(``bench_floor.py``) is measured in the same run. Ratios:

- ``x floor``: audition's time / the floor's time for the same work (rates: floor rate / audition
  rate), so 1.0 is the floor and 3.0 is three times slower than it;
- ``Ray/aud``: Ray Tune's time / audition's (rates: audition rate / Ray rate): how many times faster
  audition is.

``--compare-ray`` runs ``ray_equivalents.py`` with an interpreter that can ``import ray.tune`` (this
one, or ``--ray-python``; Ray is never a dependency of audition), alternating audition and Ray run
by run; without it, or when Ray is missing, the Ray column holds the reference figures quoted in the
issue (Ray Tune 2.60 on a 2-core box), marked ``ref``. ``--quick`` runs smaller sizes and fewer
repeats (about a minute without Ray).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import _common

HERE = os.path.dirname(os.path.abspath(__file__))

# Ray Tune 2.60 on a 2-core box of this kind, quoted by the issue; used when Ray is not measured.
RAY_REFERENCE = {
    "trivial": {"fit_s": 130.9},
    "throughput": {"results_per_s": 360.0},
    "asha": {"fit_s": 30.5},
    "startup": {"init_s": 5.0},
}


CORES = os.cpu_count() or 1


def _script(name: str) -> str:
    return os.path.join(HERE, name)


def audition_workloads(quick: bool) -> dict[str, list[str]]:
    """Workload name -> the command that prints its JSON line."""
    py = sys.executable
    if quick:
        return {
            "floor": [py, _script("bench_floor.py"), "--trials", "100", "--results", "500", "--repeat", "3"],
            "trivial": [py, _script("bench_trivial.py"), "--n", "100", "--repeat", "1"],
            "throughput": [py, _script("bench_throughput.py"), "--n", "500", "--repeat", "1"],
            "startup": [py, _script("bench_startup.py"), "--repeat", "2"],
            "asha": [py, _script("bench_asha.py"), "--n", "27", "--repeat", "1"],
            "memory": [py, _script("bench_memory.py"), "--first", "200", "--last", "1000", "--every", "200"],
            "simulator": [py, _script("bench_simulator.py"), "--runs", "10", "--repeat", "3"],
            "simulator_long": [py, _script("bench_simulator.py"), "--runs", "10", "--repeat", "3", "--step-s", "10"],
            "simulator_sweep": [py, _script("bench_simulator.py"), "--runs", "20", "--repeat", "3",
                                "--processes", str(CORES)],
        }
    return {
        "floor": [py, _script("bench_floor.py"), "--trials", "100", "1000", "--results", "2000", "--repeat", "5"],
        "trivial": [py, _script("bench_trivial.py"), "--n", "100", "--repeat", "5"],
        "trivial_1000": [py, _script("bench_trivial.py"), "--n", "1000", "--repeat", "3"],
        "throughput": [py, _script("bench_throughput.py"), "--n", "2000", "--repeat", "3"],
        "startup": [py, _script("bench_startup.py"), "--repeat", "5"],
        "asha": [py, _script("bench_asha.py"), "--n", "27", "--repeat", "3"],
        "memory": [py, _script("bench_memory.py"), "--first", "1000", "--last", "5000", "--every", "500"],
        "simulator": [py, _script("bench_simulator.py"), "--runs", "30", "--repeat", "3"],
        "simulator_long": [py, _script("bench_simulator.py"), "--runs", "30", "--repeat", "3", "--step-s", "10"],
        "simulator_sweep": [py, _script("bench_simulator.py"), "--runs", "60", "--repeat", "3",
                            "--processes", str(CORES)],
    }


def ray_workloads(py: str, quick: bool) -> dict[str, list[str]]:
    script = _script("ray_equivalents.py")
    n = "500" if quick else "2000"
    return {
        "trivial": [py, script, "trivial", "--n", "100"],
        "throughput": [py, script, "throughput", "--n", n],
        "startup": [py, script, "startup"],
        "asha": [py, script, "asha", "--n", "27"],
    }


def ray_python(requested: str | None) -> tuple[str | None, str]:
    """An interpreter that can import ray.tune, and a message saying which (or why none)."""
    candidates = [requested] if requested else [sys.executable, os.environ.get("AUDITION_RAY_PYTHON", "")]
    for py in [c for c in candidates if c]:
        try:
            proc = subprocess.run([py, "-c", "import ray, ray.tune; print(ray.__version__)"],
                                  capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0:
            return py, f"Ray {proc.stdout.strip()} from {py}"
    return None, (f"ray[tune] is not importable with {', '.join(c for c in candidates if c)}: Ray comparison "
                  "skipped, the Ray column shows the issue's reference figures")


def run_json(cmd: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    print(f"# running: {' '.join(os.path.relpath(c) if c.startswith(HERE) else c for c in cmd)}",
          file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    data = _common.last_json_line(proc.stdout)
    print(f"#   {time.perf_counter() - started:.1f}s: {json.dumps(data)[:300]}", file=sys.stderr, flush=True)
    return data


def merge_rounds(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of every numeric field over rounds (the first run's other fields)."""
    out = dict(runs[0])
    if len(runs) > 1:
        for key, value in runs[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = round(_common.median([float(r[key]) for r in runs if key in r]), 4)
        out["rounds"] = len(runs)
    return out


# ---------------------------------------------------------------------- table
def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3f}"
    return text + unit


def _status(value: float | None, target: float | None, higher_is_better: bool) -> str:
    if value is None or target is None:
        return ""
    margin = value / target if higher_is_better else target / value
    if margin >= 1:
        return f"met (x{margin:.1f})"
    return f"MISSED (x{1 / margin:.1f} short)"


def build_table(aud: dict[str, dict[str, Any]], ray: dict[str, dict[str, Any]],
                ray_measured: bool) -> list[dict[str, Any]]:
    floor = aud.get("floor", {})

    def ray_value(workload: str, key: str) -> tuple[float | None, str]:
        if ray_measured and workload in ray and key in ray[workload]:
            return float(ray[workload][key]), ""
        ref = RAY_REFERENCE.get(workload, {}).get(key)
        return (float(ref), "ref") if ref is not None else (None, "")

    rows: list[dict[str, Any]] = []

    def row(name: str, value: float | None, unit: str, *, floor_value: float | None = None,
            ray_val: tuple[float | None, str] = (None, ""), rate: bool = False,
            target: str = "", check: Callable[[], str] | None = None, ratio: bool = True) -> None:
        x_floor = None
        if value and floor_value:
            x_floor = floor_value / value if rate else value / floor_value
        rv, rnote = ray_val
        ray_over = None
        if value and rv and ratio:
            ray_over = value / rv if rate else rv / value
        rows.append({"workload": name, "audition": value, "unit": unit, "floor": floor_value,
                     "x_floor": x_floor, "ray": rv, "ray_note": rnote, "ray_over_audition": ray_over,
                     "target": target, "status": check() if check else ""})

    if "trivial" in aud:
        t = aud["trivial"]
        n = t["n"]
        fit = float(t["fit_s"])
        ray_fit = ray_value("trivial", "fit_s")
        floor_t = floor.get(f"trivial_{n}_s")
        row(f"trivial {n}: fit()", fit, " s", floor_value=floor_t, ray_val=ray_fit,
            target=">= 50x faster than Ray",
            check=lambda: _status(ray_fit[0] / fit if ray_fit[0] else None, 50.0, True))
        row(f"trivial {n}: fit() vs floor", fit, " s", floor_value=floor_t, target="<= 3x floor",
            check=lambda: _status(fit / floor_t if floor_t else None, 3.0, False))
        row(f"trivial {n}: process", float(t["process_s"]), " s", ray_val=ray_value("trivial", "process_s"))
    if "trivial_1000" in aud:
        t = aud["trivial_1000"]
        row(f"trivial {t['n']}: fit()", float(t["fit_s"]), " s", floor_value=floor.get(f"trivial_{t['n']}_s"))
    if "throughput" in aud:
        t = aud["throughput"]
        ray_rate = ray_value("throughput", "results_per_s")
        batched = float(t["batched_results_per_s"])
        per_result = float(t["per_result_results_per_s"])
        row(f"throughput 2x{t['n']}, batched", batched, " results/s", rate=True,
            floor_value=floor.get("stream_results_per_s"), ray_val=ray_rate,
            target=">= 20,000/s", check=lambda: _status(batched, 20000.0, True))
        row(f"throughput 2x{t['n']}, batched vs Ray", batched, " results/s", rate=True, ray_val=ray_rate,
            target=">= 20x Ray", check=lambda: _status(batched / ray_rate[0] if ray_rate[0] else None, 20.0, True))
        row(f"throughput 2x{t['n']}, per result", per_result, " results/s", rate=True,
            floor_value=floor.get("pingpong_results_per_s"), ray_val=ray_rate,
            target=">= 2,000/s", check=lambda: _status(per_result, 2000.0, True))
        if floor.get("thespian_4hop_results_per_s"):
            row(f"throughput 2x{t['n']}, per result vs bare Thespian (4 hops)", per_result, " results/s",
                rate=True, floor_value=floor.get("thespian_4hop_results_per_s"))
    if "startup" in aud:
        s = aud["startup"]
        first = float(s["fit_to_first_result_s"])
        proc = float(s["process_s"])
        row("startup: fit() -> first result", first, " s", ray_val=ray_value("startup", "fit_to_first_result_s"),
            target="< 0.5 s", check=lambda: _status(first, 0.5, False))
        row("startup: process start -> exit", proc, " s", ray_val=ray_value("startup", "process_s"),
            target="< 1.5 s", check=lambda: _status(proc, 1.5, False))
    if "asha" in aud:
        a = aud["asha"]
        row(f"asha {a['n']} x {a['max_t']}: fit()", float(a["fit_s"]), " s", ray_val=ray_value("asha", "fit_s"))
        ray_iters = ray_value("asha", "total_iterations")
        row("asha: total iterations", float(a["total_iterations"]), "", ray_val=ray_iters, ratio=False)
        row("asha: best loss", float(a["best_loss"]), "", ray_val=ray_value("asha", "best_loss"), ratio=False)
    if "memory" in aud:
        m = aud["memory"]
        per = float(m["bytes_per_finished_trial"])
        row("memory: controller growth", per, " B/trial", target="< 5 KB/trial",
            check=lambda: _status(per, 5000.0, False))
    if "simulator" in aud:
        rate = float(aud["simulator"]["runs_per_s"])
        row("simulator: 20-trial ASHA experiments", rate, " runs/s", target=">= 100/s",
            check=lambda: _status(rate, 100.0, True))
    if "simulator_long" in aud:  # (no target: steps 10x longer, the same experiment; ticks and writes scale with time)
        row("simulator: the same, 10 s steps", float(aud["simulator_long"]["runs_per_s"]), " runs/s")
    if "simulator_sweep" in aud:  # (a seed sweep on every core, docs/testing.md; the target is the one-process row's)
        row(f"simulator: a seed sweep, {aud['simulator_sweep']['processes']} processes",
            float(aud["simulator_sweep"]["runs_per_s"]), " runs/s")
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    header = ["workload", "audition", "floor", "x floor", "Ray", "Ray/aud", "target", "status"]
    lines = [header]
    for r in rows:
        ray = _fmt(r["ray"]) + (f" ({r['ray_note']})" if r["ray_note"] else "") if r["ray"] is not None else "-"
        lines.append([r["workload"], _fmt(r["audition"], r["unit"]), _fmt(r["floor"]),
                      _fmt(r["x_floor"]) if r["x_floor"] else "-", ray,
                      _fmt(r["ray_over_audition"]) if r["ray_over_audition"] else "-", r["target"], r["status"]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("| " + " | ".join(cell.ljust(widths[j]) for j, cell in enumerate(line)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--compare-ray", action="store_true", help="also run the Ray Tune equivalents")
    parser.add_argument("--ray-python", default=None, help="interpreter with ray[tune] (default: this one)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating audition/Ray rounds")
    parser.add_argument("--only", nargs="*", default=None, help="run only these workloads")
    parser.add_argument("--json", default=None, help="also write the JSON summary to this file")
    args = parser.parse_args(argv)

    workloads = audition_workloads(args.quick)
    if args.only:
        workloads = {k: v for k, v in workloads.items() if k in args.only or k == "floor"}
    ray_cmds: dict[str, list[str]] = {}
    ray_note = "Ray comparison not requested (--compare-ray): the Ray column shows the issue's reference figures"
    if args.compare_ray:
        py, ray_note = ray_python(args.ray_python)
        if py is not None:
            ray_cmds = {k: v for k, v in ray_workloads(py, args.quick).items() if k in workloads}
    print(f"# {ray_note}", file=sys.stderr, flush=True)

    aud_runs: dict[str, list[dict[str, Any]]] = {k: [] for k in workloads}
    ray_runs: dict[str, list[dict[str, Any]]] = {k: [] for k in ray_cmds}
    for rnd in range(max(1, args.rounds)):
        for i, (name, cmd) in enumerate(workloads.items()):
            order: list[tuple[str, list[str]]] = [("audition", cmd)]
            if name in ray_cmds:
                order.append(("ray", ray_cmds[name]))
                if (rnd + i) % 2:
                    order.reverse()  # alternate who goes first, so drifting load hits both alike
            for engine, c in order:
                (aud_runs if engine == "audition" else ray_runs)[name].append(run_json(c))

    aud = {k: merge_rounds(v) for k, v in aud_runs.items() if v}
    ray = {k: merge_rounds(v) for k, v in ray_runs.items() if v}
    rows = build_table(aud, ray, bool(ray))
    print_table(rows)
    print(f"\n{ray_note}")
    summary = {"bench": "suite", "command": "python benchmarks/run.py " + " ".join(argv or []),
               "machine": _common.machine(), "ray_note": ray_note, "audition": aud, "ray": ray, "table": rows}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=1)
    _common.emit(summary)


if __name__ == "__main__":
    main(sys.argv[1:])
