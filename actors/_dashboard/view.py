"""The dashboard's view model: pure functions from trial rows and histories to what a page shows.

No I/O here: ``source.py`` reads, ``app.py`` serves, and these functions decide what goes on the page
(the table's page of rows, curves downsampled on the server, where each mark goes, the best value so
far, the parallel coordinates), so they are unit-tested on plain dicts. Everything returned is strict
JSON (``clean``): NaN and infinities become strings, which a browser's ``JSON.parse`` accepts.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from typing import Any

from actors._cli.inspect import AUTO_KEYS, number
from actors._cli.plot import trial_events
from actors._engine.marks import marks_from_rows
from storage import flatten

FINAL = frozenset({"TERMINATED", "ERROR"})
MAX_CONFIG_COLUMNS = 30
MAX_PARALLEL_DIMS = 12
SORT_KEYS = ("trial_id", "status", "iteration", "metric", "time_total_s", "num_failures")


def clean(value: Any) -> Any:
    """Strict JSON: NaN and infinities become "nan", "inf", "-inf"; tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def finite(value: Any) -> float | None:
    v = number(value)
    return v if v is not None and math.isfinite(v) else None


# ---------------------------------------------------------------------------------- overview
def metric_keys(trials: list[dict[str, Any]]) -> list[str]:
    """Every numeric result key a trial reported (its last result), user metrics first."""
    keys = {k for t in trials for k, v in (t.get("last_result") or {}).items() if number(v) is not None}
    user = sorted(k for k in keys if k not in AUTO_KEYS)
    return user + [k for k in ("training_iteration", "time_total_s", "time_this_iter_s") if k in keys]


def config_keys(trials: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for t in trials:
        for k in flatten(t.get("config") or {}):
            seen.setdefault(k, None)
            if len(seen) >= MAX_CONFIG_COLUMNS:
                return list(seen)
    return list(seen)


def best(trials: list[dict[str, Any]], metric: str | None, mode: str | None) -> dict[str, Any] | None:
    """The trial whose last ``metric`` is best (NaN and inf ignored), as ``get_best_result()`` picks."""
    if not metric or mode not in ("min", "max"):
        return None
    scored = [(v, t) for t in trials if (v := finite((t.get("last_result") or {}).get(metric))) is not None]
    if not scored:
        return None
    value, row = (min if mode == "min" else max)(scored, key=lambda p: p[0])
    return {"trial_id": row["trial_id"], "value": value, "config": row.get("config") or {}}


def overview(name: str, where: str, trials: list[dict[str, Any]], metric: str | None, mode: str | None,
             written_at: float | None, now: float, started: bool = True) -> dict[str, Any]:
    counts = dict(sorted(Counter(str(t["status"]) for t in trials).items()))
    return clean({
        "name": name, "path": where, "metric": metric, "mode": mode, "counts": counts, "num_trials": len(trials),
        "best": best(trials, metric, mode), "metrics": metric_keys(trials), "config_keys": config_keys(trials),
        "written_at": written_at, "age_s": None if written_at is None else max(0.0, now - written_at),
        "finished": started and bool(trials) and all(t["status"] in FINAL for t in trials),
        "started": started,
    })


# ---------------------------------------------------------------------------------- the trial table
def _sort_value(row: dict[str, Any], key: str, metric: str | None) -> Any:
    last = row.get("last_result") or {}
    if key == "trial_id":
        return row["trial_id"]
    if key == "status":
        return str(row["status"])
    if key == "iteration":
        return number(last.get("training_iteration"))
    if key == "metric":
        return finite(last.get(metric)) if metric else None
    if key in ("time_total_s", "num_failures"):
        return number(last.get(key) if key == "time_total_s" else row.get(key))
    if key.startswith("config:"):
        return flatten(row.get("config") or {}).get(key[len("config:"):])
    return None


def _order(value: Any) -> tuple[int, Any]:
    """Numbers before strings before missing values, whatever the direction."""
    if isinstance(value, bool):
        return (1, str(value))
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return (0, value)
    if value is None:
        return (2, "")
    return (1, str(value))


def table(trials: list[dict[str, Any]], metric: str | None, *, sort: str = "trial_id", desc: bool = False,
          statuses: set[str] | None = None, query: str = "", offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """One page of the trial table: filtered by status and a search text, sorted, then sliced."""
    if sort not in SORT_KEYS and not sort.startswith("config:"):
        sort = "trial_id"
    rows = [t for t in trials if not statuses or str(t["status"]) in statuses]
    needle = query.strip().lower()
    if needle:
        rows = [t for t in rows if needle in _haystack(t)]
    keyed = [(_order(_sort_value(t, sort, metric)), t) for t in rows]
    present = sorted((k, t["trial_id"], t) for k, t in keyed if k[0] != 2)
    if desc:
        present.reverse()
    ordered = [t for _, _, t in present] + [t for k, t in keyed if k[0] == 2]  # missing values last
    columns = config_keys(trials)
    page = ordered[max(0, offset): max(0, offset) + max(1, limit)]
    return clean({"total": len(ordered), "offset": offset, "limit": limit, "sort": sort, "desc": desc,
                  "columns": columns, "rows": [_table_row(t, metric, columns) for t in page]})


def _haystack(row: dict[str, Any]) -> str:
    config = ", ".join(f"{k}={v}" for k, v in flatten(row.get("config") or {}).items())
    return f"{row['trial_id']} {row.get('name') or ''} {row['status']} {config}".lower()


def _table_row(row: dict[str, Any], metric: str | None, columns: list[str]) -> dict[str, Any]:
    last = row.get("last_result") or {}
    flat = flatten(row.get("config") or {})
    error = row.get("error")
    return {"trial_id": row["trial_id"], "name": row.get("name"), "status": row["status"],
            "iteration": last.get("training_iteration"), "metric": last.get(metric) if metric else None,
            "time_total_s": last.get("time_total_s"), "num_failures": row.get("num_failures", 0),
            "error": str(error).strip().splitlines()[0] if error else None,
            "config": {k: flat.get(k) for k in columns}}


# ---------------------------------------------------------------------------------- curves
def _x(row: dict[str, Any], index: int, key: str) -> float | None:
    if key == "training_iteration" and key not in row:
        return float(index + 1)
    return finite(row.get(key))


def downsample(xs: list[float], ys: list[float], max_points: int, keep: frozenset[int] | set[int] = frozenset()
               ) -> list[int]:
    """Indices to draw: all when few; else the first, the last, the kept ones and each bucket's min and max
    (so spikes survive, which a stride would drop)."""
    n = len(xs)
    if n <= max_points:
        return list(range(n))
    buckets = max(1, (max_points - 2 - len(keep)) // 2)
    chosen = {0, n - 1, *(i for i in keep if 0 <= i < n)}
    size = n / buckets
    for b in range(buckets):
        lo, hi = int(b * size), min(n, int((b + 1) * size))
        if lo >= hi:
            continue
        part = range(lo, hi)
        chosen.add(min(part, key=ys.__getitem__))
        chosen.add(max(part, key=ys.__getitem__))
    return sorted(chosen)


def curves(histories: dict[str, list[dict[str, Any]]], trials: dict[str, dict[str, Any]], metric: str,
           x: str = "training_iteration", max_points: int = 400) -> dict[str, Any]:
    """Each trial's ``metric`` against ``x``, downsampled to ``max_points``, and its marks where they happened.

    A mark (pause, stop, exploit, failure, and "paused (now)" / "ended in ERROR" from the status) sits on
    the result row of its iteration, as ``audition plot`` draws it (``actors._cli.plot.trial_events``).
    """
    traces, marks = [], []
    for tid, rows in histories.items():
        row = trials.get(tid) or {}
        status = str(row.get("status", "?"))
        points = [(i, _x(r, i, x), finite(r.get(metric))) for i, r in enumerate(rows)]
        keep = [(i, px, py) for i, px, py in points if px is not None and py is not None]
        events = trial_events(rows, status, marks_from_rows(row.get("marks")))
        at = {i: n for n, (i, _, _) in enumerate(keep)}
        marked = {at[i] for _, i in events if i in at}
        picked = downsample([p[1] for p in keep], [p[2] for p in keep], max_points, marked)
        traces.append({"trial_id": tid, "status": status, "x": [keep[j][1] for j in picked],
                       "y": [keep[j][2] for j in picked], "results": len(rows), "points": len(keep),
                       "downsampled": len(picked) < len(keep)})
        for kind, i in events:
            if i in at:
                _, px, py = keep[at[i]]
                iteration = number(rows[i].get("training_iteration"))
                marks.append({"trial_id": tid, "kind": kind, "x": px, "y": py, "iteration": iteration})
    return clean({"metric": metric, "x": x, "traces": traces, "marks": marks})


def pick_trials(trials: list[dict[str, Any]], metric: str | None, mode: str | None, top: int) -> list[str]:
    """Which trials an "all trials" curve view draws when there are many: the ``top`` best by their last
    ``metric`` (all of them when there are few), then the rest in table order."""
    if len(trials) <= top:
        return [t["trial_id"] for t in trials]
    if metric and mode in ("min", "max"):
        sign = 1.0 if mode == "min" else -1.0
        scored = sorted(trials, key=lambda t: (v * sign) if (v := finite((t.get("last_result") or {}).get(metric)))
                        is not None else math.inf)
        return [t["trial_id"] for t in scored[:top]]
    return [t["trial_id"] for t in trials[:top]]


# ---------------------------------------------------------------------------------- best so far
@dataclass(frozen=True)
class TrialBest:
    """One trial's part of "best so far": its results that beat all its earlier ones (the only ones that can
    be a new best overall, so the merge stays small), and when each of its results came, sorted."""

    kept: list[tuple[float, float, float]]  # (timestamp, time_total_s, value)
    times: list[tuple[float, float]]


def improvements(rows: list[dict[str, Any]], metric: str, mode: str) -> TrialBest:
    better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    points = []
    for r in rows:
        v, t = finite(r.get(metric)), finite(r.get("timestamp"))
        if v is not None and t is not None:
            points.append((t, finite(r.get("time_total_s")) or 0.0, v))
    points.sort(key=lambda p: (p[0], p[1]))
    kept: list[tuple[float, float, float]] = []
    for p in points:
        if not kept or better(p[2], kept[-1][2]):
            kept.append(p)
    return TrialBest(kept, [(p[0], p[1]) for p in points])


def best_so_far(pieces: dict[str, TrialBest], metric: str, mode: str) -> dict[str, Any]:
    """The best ``metric`` of any result reported up to each moment: ``x`` in seconds since the first result
    (``timestamp``, whole seconds, then each trial's ``time_total_s`` orders results within a second) and
    ``n``, how many results had been reported by then."""
    better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    points = sorted((p[0], p[1], p[2], tid) for tid, piece in pieces.items() for p in piece.kept)
    total = sum(len(p.times) for p in pieces.values())
    xs: list[float] = []
    ns: list[int] = []
    ys: list[float] = []
    who: list[str] = []
    current: float | None = None
    t0 = min((p.times[0][0] for p in pieces.values() if p.times), default=0.0)
    for t, tt, v, tid in points:
        if current is None or better(v, current):
            current = v
            xs.append(t - t0)
            ns.append(sum(bisect_right(p.times, (t, tt)) for p in pieces.values()))
            ys.append(v)
            who.append(tid)
    if ys:  # the line reaches the latest result
        xs.append(max(p.times[-1][0] for p in pieces.values() if p.times) - t0)
        ns.append(total)
        ys.append(ys[-1])
        who.append(who[-1])
    return clean({"metric": metric, "mode": mode, "x": xs, "n": ns, "y": ys, "trial_id": who, "results": total,
                  "start": t0 if ys else None})


# ---------------------------------------------------------------------------------- parallel coordinates
def parallel(trials: list[dict[str, Any]], metric: str | None) -> dict[str, Any]:
    """One line per trial across its hyperparameters (categories numbered), coloured by its last ``metric``."""
    rows = [t for t in trials if metric is None or finite((t.get("last_result") or {}).get(metric)) is not None]
    flats = [flatten(t.get("config") or {}) for t in rows]
    keys = [k for k in config_keys(rows) if any(k in f for f in flats)][:MAX_PARALLEL_DIMS]
    dims = []
    for k in keys:
        values = [f.get(k) for f in flats]
        numbers = [number(v) for v in values]
        if all(v is not None for v in numbers):
            dims.append({"label": k, "values": numbers})
        else:
            cats = sorted({str(v) for v in values})
            code = {c: i for i, c in enumerate(cats)}
            dims.append({"label": k, "values": [code[str(v)] for v in values], "tickvals": list(range(len(cats))),
                         "ticktext": cats})
    color = [finite((t.get("last_result") or {}).get(metric)) for t in rows] if metric else []
    if metric:
        dims.append({"label": metric, "values": color})
    return clean({"metric": metric, "trial_ids": [t["trial_id"] for t in rows], "dimensions": dims,
                  "color": color})


# ---------------------------------------------------------------------------------- one trial
def trial_detail(row: dict[str, Any], checkpoints: list[dict[str, Any]], stdout: str | None, stderr: str | None,
                 error_file: str | None) -> dict[str, Any]:
    last = row.get("last_result") or {}
    metrics = {k: v for k, v in last.items() if k not in AUTO_KEYS}
    return clean({
        "trial_id": row["trial_id"], "name": row.get("name"), "status": row["status"],
        "config": row.get("config") or {}, "last_result": last, "metrics": metrics,
        "iteration": last.get("training_iteration"), "num_failures": row.get("num_failures", 0),
        "error": row.get("error"), "traceback": row.get("traceback") or error_file,
        "checkpoint": row.get("checkpoint"), "checkpoints": checkpoints,
        "marks": [m.to_dict() for m in marks_from_rows(row.get("marks"))],
        "stdout": stdout, "stderr": stderr,
    })


__all__ = ["TrialBest", "best_so_far", "clean", "curves", "downsample", "improvements", "overview", "parallel",
           "pick_trials", "table", "trial_detail"]
