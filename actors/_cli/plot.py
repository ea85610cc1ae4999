"""Learning curves of an experiment's trials (``audition plot``), drawn with matplotlib's Agg backend.

The markers come from the marks the trial table recorded as decisions took effect (see
``actors._engine.marks``), not from guesses on the result rows: a pause resumed in the same process or a
stop before the trainable's own end leaves no trace in the rows. Only "paused (now)" and "ended in
ERROR" come from the final status; a state written before marks existed shows just those two.
"""

from __future__ import annotations

import math
import os
from bisect import bisect_right
from itertools import accumulate
from typing import Any

from actors._cli.inspect import Experiment, check_metric_known, number
from actors._driver.errors import ConfigError
from actors._engine.marks import Mark, MarkKind

# kind -> (marker, size, legend label)
MARKERS: dict[str, tuple[str, float, str]] = {
    "pause": ("o", 7.0, "paused by the scheduler"),
    "exploit": ("*", 13.0, "PBT exploit"),
    "stop": ("x", 9.0, "stopped by the scheduler or a stopper"),
    "failure": ("d", 7.0, "run failed (retried or resumed)"),
    "paused": ("s", 7.0, "paused (now)"),
    "error": ("X", 9.0, "ended in ERROR"),
}
HOLLOW = frozenset({"pause", "stop"})
_KIND = {MarkKind.PAUSE: "pause", MarkKind.STOP: "stop", MarkKind.EXPLOIT: "exploit", MarkKind.FAIL: "failure"}
MAX_TRIAL_LEGEND = 12


def trial_events(rows: list[dict[str, Any]], status: str, marks: list[Mark]) -> list[tuple[str, int]]:
    """(kind, row index) of everything worth marking on one trial's curve.

    A mark goes on the row of its iteration, or the last row before it (a restart from an older
    checkpoint redoes the rows after it); a mark before the first row is not drawn.
    """
    if not rows:
        return []
    # running maximum: bisect needs order even if a log was ever written out of order
    iters = list(accumulate((_iteration(r, i) for i, r in enumerate(rows)), max))
    last = len(rows) - 1
    events = [(_KIND[m.kind], i) for m in marks if (i := bisect_right(iters, m.iteration) - 1) >= 0]
    if status == "ERROR":  # the last failure is the one that ended it: drawn as the ERROR
        fails = [n for n, (kind, _) in enumerate(events) if kind == "failure"]
        if fails:
            del events[fails[-1]]
        events.append(("error", last))
    elif status == "PAUSED":  # still paused: its latest pause is drawn as "paused (now)"
        events = [e for e in events if e != ("pause", last)] + [("paused", last)]
    return events


def _iteration(row: dict[str, Any], index: int) -> float:
    value = number(row.get("training_iteration"))
    return float(index + 1) if value is None else value


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
    marks = exp.marks()
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
        for kind, i in trial_events(rows, statuses[tid], marks.get(tid, [])):
            if i not in where:
                continue
            marker, size, _ = MARKERS[kind]
            filled = kind not in HOLLOW
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
                                  markerfacecolor="none" if kind in HOLLOW else "gray",
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
