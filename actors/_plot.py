"""Learning curves of an experiment's trials (``audition plot``), drawn with matplotlib's Agg backend.

Scheduler actions leave no explicit record in the results, so they are recovered from the rows:
a PBT exploit tags the first result after it with ``pbt_exploit``; any restart (pause and resume,
a retry after a failure, a restore) shows as a changed ``pid`` or a changed ``restored_from`` (a
key some trainables report); a trial stopped early ends TERMINATED below the longest trial's
iteration count. A pause resumed in the same process by a trainable that reports nothing about
it cannot be seen.
"""

from __future__ import annotations

import math
import os
from typing import Any

from actors._errors import ConfigError
from actors._inspect import Experiment, check_metric_known, number

# kind -> (marker, size, legend label)
MARKERS: dict[str, tuple[str, float, str]] = {
    "restart": ("o", 7.0, "restarted (pause, retry or restore)"),
    "exploit": ("*", 13.0, "PBT exploit"),
    "stopped": ("x", 9.0, "stopped early"),
    "paused": ("s", 7.0, "paused (now)"),
    "error": ("X", 9.0, "ended in ERROR"),
}
MAX_TRIAL_LEGEND = 12


def trial_events(rows: list[dict[str, Any]], status: str, longest: int) -> list[tuple[str, int]]:
    """(kind, row index) of everything worth marking on one trial's curve."""
    events: list[tuple[str, int]] = []
    for i in range(1, len(rows)):
        prev, row = rows[i - 1], rows[i]
        if row.get("pbt_exploit"):
            events.append(("exploit", i))
        elif _changed(prev, row, "pid") or _changed(prev, row, "restored_from"):
            events.append(("restart", i))
    if rows and rows[0].get("pbt_exploit"):
        events.insert(0, ("exploit", 0))
    if rows:
        last = len(rows) - 1
        iters = int(number(rows[-1].get("training_iteration")) or len(rows))
        if status == "TERMINATED" and iters < longest:
            events.append(("stopped", last))
        elif status == "ERROR":
            events.append(("error", last))
        elif status == "PAUSED":
            events.append(("paused", last))
    return events


def _changed(prev: dict[str, Any], row: dict[str, Any], key: str) -> bool:
    return key in prev and key in row and prev[key] != row[key]


def check_out(out: str) -> str:
    """Fail before any reading if the PNG could not be written there."""
    path = os.path.abspath(os.path.expanduser(out))
    if os.path.isdir(path):
        raise ConfigError(f"--out {out} is a directory; name the PNG file to write, e.g. {out.rstrip('/')}/curves.png")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise ConfigError(f"--out {out}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--out {out}: the directory {parent} is not writable")
    return path


def require_matplotlib() -> tuple[Any, Any, Any, Any]:
    """The Agg canvas and figure classes, without pyplot (no global backend or figure state)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise ConfigError("plotting needs matplotlib, which is not installed: pip install 'audition[plot]'") from None
    return Figure, FigureCanvasAgg, Line2D, MaxNLocator


def plot_curves(exp: Experiment, metric: str, out: str, x: str = "training_iteration",
                log_y: bool = False) -> dict[str, Any]:
    """Draw ``metric`` against ``x`` for every trial into the PNG ``out``; returns what was drawn."""
    path = check_out(out)
    Figure, FigureCanvasAgg, Line2D, MaxNLocator = require_matplotlib()  # before reading: a missing extra fails fast
    histories = exp.histories()
    check_metric_known(exp, metric, histories)
    if x != "training_iteration":
        check_metric_known(exp, x, histories, what="the x-axis key")
    if not any(histories.values()):
        raise ConfigError(f"no trial of {exp.name} has reported a result yet: nothing to plot")
    longest = max((int(number(h[-1].get("training_iteration")) or len(h)) for h in histories.values() if h),
                  default=0)
    statuses = {t["trial_id"]: str(t["status"]) for t in exp.trials}
    fig = Figure(figsize=(10, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    counts = dict.fromkeys(MARKERS, 0)
    drawn = 0
    for n, (tid, rows) in enumerate(histories.items()):
        points = [(_x(r, i, x), number(r.get(metric))) for i, r in enumerate(rows)]
        keep = [(i, px, py) for i, (px, py) in enumerate(points)
                if px is not None and py is not None and math.isfinite(py) and (not log_y or py > 0)]
        if not keep:
            continue
        drawn += 1
        color = f"C{n % 10}"
        label = f"{tid} ({statuses[tid]})" if len(histories) <= MAX_TRIAL_LEGEND else None
        ax.plot([p[1] for p in keep], [p[2] for p in keep], color=color, linewidth=1.3, marker=".",
                markersize=3 if len(keep) < 200 else 0, label=label)
        where = {i: (px, py) for i, px, py in keep}
        for kind, i in trial_events(rows, statuses[tid], longest):
            if i not in where:
                continue
            marker, size, _ = MARKERS[kind]
            filled = kind not in ("restart", "stopped")
            ax.plot(*where[i], marker=marker, markersize=size, linestyle="none", zorder=3,
                    color=color if kind != "error" else "red", markeredgecolor="black" if filled else color,
                    markerfacecolor=(color if kind != "error" else "red") if filled else "none")
            counts[kind] += 1
    if drawn == 0:
        raise ConfigError(f"no numeric value of {metric!r} (against {x!r}) to plot in {exp.name}")
    handles, _ = ax.get_legend_handles_labels()
    for kind, (marker, size, text) in MARKERS.items():
        if counts[kind]:
            handles.append(Line2D([], [], marker=marker, markersize=size * 0.8, linestyle="none", color="gray",
                                  markerfacecolor="none" if kind in ("restart", "stopped") else "gray",
                                  label=text))
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="best")
    if log_y:
        ax.set_yscale("log")
    if x == "training_iteration":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    ax.set_title(f"{exp.name}: {metric} of {drawn} trial{'s' if drawn != 1 else ''}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}") from None
    return {"out": path, "trials": drawn, **{k: v for k, v in counts.items() if v}}


def _x(row: dict[str, Any], index: int, key: str) -> float | None:
    if key == "training_iteration" and key not in row:
        return float(index + 1)
    return number(row.get(key))


__all__ = ["MARKERS", "check_out", "plot_curves", "require_matplotlib", "trial_events"]
