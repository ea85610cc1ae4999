"""Helpers shared by the benchmark scripts (not a benchmark itself).

Every benchmark is a plain script that prints exactly ONE JSON line on stdout. Scripts that time
the whole process re-run themselves as a child (``--inner``) and time that child from outside, so
"process" wall times include interpreter start-up, imports, the actor system's shutdown and exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tree measured: the one PYTHONPATH names (``PYTHONPATH=<other tree> python benchmarks/x.py``
# compares two trees with the same scripts), else this checkout, ahead of any installed copy.
ROOT = next((os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p and os.path.isfile(os.path.join(p, "actors", "__init__.py"))), CHECKOUT)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def emit(data: dict[str, Any]) -> None:
    """Print the benchmark's one JSON line."""
    print(json.dumps(data, sort_keys=False), flush=True)


def last_json_line(text: str) -> dict[str, Any]:
    """The last line of ``text`` that parses as a JSON object (other libraries may print too)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError(f"no JSON line in output:\n{text[-2000:]}")


@contextlib.contextmanager
def temp_storage(prefix: str = "audition_bench_") -> Iterator[str]:
    """A fresh local storage directory, removed afterwards."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_timed(argv: Sequence[str], timeout_s: float = 900.0,
              env: dict[str, str] | None = None) -> tuple[float, dict[str, Any]]:
    """Run a command; return (wall seconds from spawn to exit, its JSON line)."""
    started = time.perf_counter()
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-4000:]}")
    return wall, last_json_line(proc.stdout)


def self_argv(script: str, args: Sequence[str]) -> list[str]:
    """The command that re-runs ``script`` as an ``--inner`` child with the same interpreter."""
    return [sys.executable, os.path.abspath(script), *args, "--inner"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def repeat_self(script: str, args: Sequence[str], repeat: int, keys: Sequence[str]) -> dict[str, Any]:
    """Run ``script --inner`` ``repeat`` times; the medians of ``keys`` (and ``process_s``), plus every run.

    The child's own JSON line gives the other fields (taken from the first run). On a shared 2-core
    machine single runs vary by up to 2x, so medians are what the table shows.
    """
    runs: list[dict[str, Any]] = []
    for _ in range(repeat):
        wall, data = run_timed(self_argv(script, args))
        data["process_s"] = round(wall, 4)
        runs.append(data)
    out = dict(runs[0])
    for key in [*keys, "process_s"]:
        out[key] = round(median([float(r[key]) for r in runs]), 4)
    out["repeat"] = repeat
    out["runs"] = [{k: r[k] for k in [*keys, "process_s"]} for r in runs]
    return out


def thespian_version() -> str:
    try:
        from importlib.metadata import version

        return version("thespian")
    except Exception:
        return "unknown"


def git_state() -> str:
    """The commit benchmarked, with ``+dirty`` when the work tree has changes."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "thespian": thespian_version(),
        "platform": platform.platform(),
        "git": git_state(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def rss_of(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (from /proc; psutil when available)."""
    try:
        import psutil

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def quiet_logs() -> None:
    """Keep audition's progress lines off the output (the JSON line must stand alone)."""
    import logging

    logging.getLogger("audition").setLevel(logging.WARNING)


__all__ = ["ROOT", "emit", "git_state", "last_json_line", "machine", "median", "quiet_logs", "repeat_self", "rss_of",
           "run_timed", "self_argv", "temp_storage", "thespian_version"]
