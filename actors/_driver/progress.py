"""What the user sees while ``fit()`` runs.

Rendering happens in the driver from ``ExperimentProgress`` messages (about one a
second), off the controller's path.  In a terminal with ``rich`` installed it is a
live table; otherwise (CI logs, notebooks, pipes) periodic plain lines.
``RunConfig(verbose=0)`` is silent, 1 shows the table/status lines, 2 also prints
every finished or failed trial. Whatever the verbosity, what trials print is echoed here with a
``(<trial name> pid=N)`` prefix (``RunConfig(log_to_driver=False)`` turns that off), above the live
table if there is one.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from actors._driver.callbacks import Callback
from actors._driver.console import ConsolePrinter
from actors._engine.trial import TrialSnapshot
from actors.messages import ExperimentProgress, TrialOutputBatch


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


class ProgressDisplay:
    def __init__(self, name: str, verbose: int, stream: TextIO | None = None, plain_every_s: float = 5.0,
                 force_plain: bool = False, metric: str | None = None) -> None:
        self.name = name
        self.metric = metric
        self.verbose = verbose
        self.stream = stream or sys.stdout
        self.plain_every_s = plain_every_s
        self.last_plain = -1e9
        self.live: Any = None
        self.console: Any = None
        self.printer = ConsolePrinter(self._echo)
        if verbose and not force_plain and getattr(self.stream, "isatty", lambda: False)():
            try:
                from rich.console import Console
                from rich.live import Live

                self.console = Console(file=self.stream)
                self.live = Live(console=self.console, refresh_per_second=4, transient=False)
                self.live.start()
            except ImportError:
                self.live = None

    def update(self, msg: ExperimentProgress) -> None:
        if not self.verbose:
            return
        if self.live is not None:
            self.live.update(self._table(msg))
            return
        now = time.monotonic()
        if now - self.last_plain >= self.plain_every_s or self.verbose >= 2:
            self.last_plain = now
            self.stream.write(self._line(msg) + "\n")
            self.stream.flush()

    def _counts(self, msg: ExperimentProgress) -> str:
        return ", ".join(f"{n} {s}" for s, n in sorted(msg.counts.items()))

    def _line(self, msg: ExperimentProgress) -> str:
        best = f"; best {msg.metric}={_fmt(msg.best)} ({msg.best_trial})" if msg.best is not None else ""
        return f"[{self.name}] {msg.elapsed_s:.0f}s: {self._counts(msg)}{best}"

    def _hidden(self, msg: ExperimentProgress) -> str | None:
        """The table's caption when rows were left out (``RunConfig(max_progress_rows)``), so a
        capped table never passes for the whole experiment."""
        n = sum(msg.hidden.values())
        if not n:
            return None
        what = ", ".join(f"{k} {s}" for s, k in sorted(msg.hidden.items()))
        return f"... {n} more trial{'s' if n != 1 else ''} not shown ({what})"

    def _table(self, msg: ExperimentProgress) -> Any:
        from rich.table import Table
        from rich.text import Text

        keys: list[str] = []
        for r in msg.rows:
            keys += [k for k in r.config if k not in keys]
        keys = keys[:5]
        # Text, not a markup string: "[name]" would be read as a rich style tag and vanish
        t = Table(title=Text(self._line(msg), style="italic"), title_justify="left", caption=self._hidden(msg),
                  caption_justify="left")
        for col in ("trial", "status", *keys, "iter", msg.metric or "metric", "member", "error"):
            t.add_column(col)
        for r in msg.rows:
            t.add_row(r.name or r.trial_id, r.status.value, *(_fmt(r.config.get(k)) for k in keys), str(r.iteration),
                      _fmt(r.metric), r.member, r.error or "")
        return t

    def trial_line(self, trial: TrialSnapshot, what: str) -> None:
        """verbose=2: one line per finished or failed trial (above the live table, if any)."""
        value = trial.last_result.get(self.metric) if self.metric else None
        metric = f", {self.metric}={_fmt(value)}" if value is not None else ""
        it = trial.last_result.get("training_iteration", 0)
        text = f"[{self.name}] trial {trial} {what} after {it} iterations{metric}"
        if self.live is not None and self.console is not None:
            self.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def output(self, batch: TrialOutputBatch) -> None:
        """Trial output lines, in each run's order."""
        self.printer.push(batch.chunks)

    def _echo(self, fd: int, text: str) -> None:
        if self.live is not None and self.console is not None:  # above the live table, which stays
            self.console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)
            return
        stream = self.stream if fd == 1 else sys.stderr
        stream.write(text + "\n")
        stream.flush()

    def close(self, final: str | None = None) -> None:
        self.printer.close()
        if self.live is not None:
            self.live.stop()
            self.live = None
        if final and self.verbose:
            self.stream.write(final + "\n")
            self.stream.flush()


class TrialLines(Callback):
    """Added by ``verbose=2``: reports each finished or failed trial through the reporter."""

    def __init__(self, reporter: ProgressDisplay) -> None:
        self.reporter = reporter

    def on_trial_complete(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                          **info: Any) -> None:
        self.reporter.trial_line(trial, "finished")

    def on_trial_error(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                       **info: Any) -> None:
        self.reporter.trial_line(trial, "failed")


__all__ = ["ProgressDisplay", "TrialLines"]
