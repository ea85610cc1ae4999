"""Profile a benchmark workload: py-spy on every actor process, by role, without touching the engine.

Starts the workload's ``--inner`` child, finds its actor processes with psutil (they share the
child's command line: fork), tells them apart by the process tree, and attaches one
``py-spy record --nonblocking --format raw`` to each (py-spy stops when its process exits):

- ``controller``: the child of Thespian's admin that has children (it creates every other actor);
- ``scheduler``: the controller's oldest child (created at StartExperiment, before any trial);
- ``trial``: the controller's other children (trial actors; samples of all of them are merged);
- ``admin`` / ``logger``: Thespian's own processes; ``driver``: the process that called fit().

Prints, per role, the share of samples whose leaf frame is each function ("self") and the share
that have it anywhere on the stack ("inclusive"), listing audition's own frames (``actors/``,
``storage/``) and Thespian's transport separately, then one JSON line with the same data.
Needs ``pip install py-spy`` (not a dependency of audition) and ptrace rights (root here).

    python benchmarks/profile_engine.py trivial [--n 1000] [--rate 250] [--out /tmp/audition_profile]
    python benchmarks/profile_engine.py per-result [--n 2000]
    python benchmarks/profile_engine.py batched [--n 20000]
    python benchmarks/profile_engine.py asha [--n 27]
    python benchmarks/profile_engine.py command -- python my_script.py   # any fit() script
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any

import _common

HERE = os.path.dirname(os.path.abspath(__file__))
_LINE = re.compile(r":\d+\)$")


def workload_cmd(workload: str, n: int) -> list[str]:
    py = sys.executable
    if workload == "trivial":
        return [py, os.path.join(HERE, "bench_trivial.py"), "--n", str(n), "--inner"]
    if workload in ("per-result", "batched"):
        return [py, os.path.join(HERE, "bench_throughput.py"), "--n", str(n), "--mode", workload, "--inner"]
    if workload == "asha":
        return [py, os.path.join(HERE, "bench_asha.py"), "--n", str(n), "--inner"]
    raise SystemExit(f"unknown workload {workload!r}")


def classify(driver: int) -> dict[int, str]:
    """pid -> role for the workload's processes alive now."""
    import psutil

    try:
        cmd = psutil.Process(driver).cmdline()
    except psutil.Error:
        return {}
    procs: dict[int, Any] = {}
    for p in psutil.process_iter(["pid", "ppid", "cmdline", "create_time"]):
        if p.info["cmdline"] == cmd:
            procs[p.info["pid"]] = p.info
    children: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for info in procs.values():
        children[info["ppid"]].append(info)
    roles = {driver: "driver"}
    for pid, info in procs.items():
        if pid == driver or info["ppid"] in procs:
            continue
        roles[pid] = "admin"  # Thespian's admin daemonizes: its parent is not one of ours
        for kid in children[pid]:
            kids = sorted(children[kid["pid"]], key=lambda k: (k["create_time"], k["pid"]))
            if not kids:
                roles[kid["pid"]] = "logger"
                continue
            roles[kid["pid"]] = "controller"
            roles[kids[0]["pid"]] = "scheduler"
            for trial in kids[1:]:
                roles[trial["pid"]] = "trial"
    return roles


def aggregate(paths: list[str], top: int) -> dict[str, Any]:
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.rstrip()
                if not line or " " not in line:
                    continue
                stack, count = line.rsplit(" ", 1)
                n = int(count)
                total += n
                frames = [_LINE.sub(")", f) for f in stack.split(";")]
                # a forked actor's stack starts with its creator's frames: keep the actor's own loop
                cut = max((i for i, f in enumerate(frames) if f.startswith("ActorManager.run ")), default=-1)
                frames = frames[cut + 1:] or frames[-1:]
                self_c[frames[-1]] += n
                for f in set(frames):
                    incl[f] += n

    def pct(counter: collections.Counter[str], keep: Any) -> list[tuple[str, float]]:
        rows = [(f, round(100.0 * c / total, 1)) for f, c in counter.most_common() if keep(f)]
        return rows[:top]

    ours = lambda f: "actors/" in f or "storage/" in f  # noqa: E731
    return {
        "samples": total,
        "self": pct(self_c, lambda f: True),
        "self_audition": pct(self_c, ours),
        "inclusive_audition": pct(incl, ours),
        "inclusive_thespian": pct(incl, lambda f: "thespian/" in f and "run" not in f.split(" ")[0].lower()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["trivial", "per-result", "batched", "asha", "command"])
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--out", default="/tmp/audition_profile")
    parser.add_argument("cmd", nargs="*", help="with 'command': the command to run and profile")
    args = parser.parse_args(argv)
    if shutil.which("py-spy") is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    n = args.n or {"trivial": 1000, "per-result": 2000, "batched": 20000, "asha": 27, "command": 0}[args.workload]
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    cmd = args.cmd if args.workload == "command" else workload_cmd(args.workload, n)
    if not cmd:
        parser.error("'command' needs the command to profile after --")
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    spies: dict[int, tuple[str, subprocess.Popen[bytes]]] = {}
    while child.poll() is None:
        for pid, role in classify(child.pid).items():
            if pid in spies or role in ("admin", "logger"):
                continue
            out = os.path.join(args.out, f"{role}_{pid}.txt")
            spies[pid] = (role, subprocess.Popen(
                ["py-spy", "record", "--pid", str(pid), "--rate", str(args.rate), "--nonblocking",
                 "--format", "raw", "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.05)
    stdout = child.stdout.read() if child.stdout else ""
    for _, spy in spies.values():
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.terminate()
    by_role: dict[str, list[str]] = collections.defaultdict(list)
    for pid, (role, _) in spies.items():
        by_role[role].append(os.path.join(args.out, f"{role}_{pid}.txt"))
    report = {role: aggregate(paths, args.top) for role, paths in sorted(by_role.items())}
    for role, data in report.items():
        print(f"== {role} ({len(by_role[role])} process(es), {data['samples']} samples)")
        for title in ("self", "self_audition", "inclusive_audition", "inclusive_thespian"):
            print(f"  -- {title}")
            for frame, share in data[title]:
                print(f"    {share:5.1f}%  {frame}")
    _common.emit({"bench": "profile", "workload": args.workload, "n": n,
                  "result": _common.last_json_line(stdout) if "{" in stdout else None,
                  "processes": {str(pid): role for pid, (role, _) in spies.items()}, "profile": report})


if __name__ == "__main__":
    main(sys.argv[1:])
