"""Runs the controller-side logger callbacks (``LoggerCallback.in_controller``) for ``ExperimentIO``.

One place decides what a logger's failure means: a ``StorageError`` (or any failure of a
``required`` logger, the JSON one that ``Tuner.restore`` reads) stops the experiment; anything
else switches that logger off with one log line, so a buggy third-party logger cannot end a run.
Each call is timed: these loggers run on the result path, and a slow one delays every trial.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from actors._driver.loggers import LoggerCallback, controller_loggers
from actors._engine.trial import TrialSnapshot
from storage import ExperimentLayout, StorageContext, StorageError

log = logging.getLogger("audition")
SLOW_CALL_S = 1.0


class LoggerFailed(Exception):
    """A logger the experiment cannot go on without failed; the message says which and why."""


class ControllerLoggers:
    def __init__(self, loggers: list[LoggerCallback] | None, ctx: StorageContext, layout: ExperimentLayout,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.loggers = controller_loggers(loggers)  # the JSON and CSV loggers are always among them
        self.clock = clock
        self.off: set[int] = set()
        self.slow: set[int] = set()
        self.count = 0  # results logged, the ``iteration`` of log_trial_result
        for lg in self.loggers:
            self._call(lg, "setup", ctx, layout)

    def _call(self, lg: LoggerCallback, hook: str, *args: Any) -> None:
        if id(lg) in self.off:
            return
        name = type(lg).__name__
        started = self.clock()
        try:
            getattr(lg, hook)(*args)
        except StorageError as exc:
            raise LoggerFailed(f"{name} could not write to storage in {hook}: {exc}") from exc
        except Exception as exc:
            if lg.required:
                raise LoggerFailed(f"{name} failed in {hook}: {exc!r}") from exc
            self.off.add(id(lg))
            log.exception("logger %s failed in %s; it is switched off for the rest of this run", name, hook)
            return
        took = self.clock() - started
        if took > SLOW_CALL_S and id(lg) not in self.slow:
            self.slow.add(id(lg))
            log.warning("logger %s took %.1f s in %s, and it runs in the controller, so every trial waited; "
                        "set in_controller = False on it to run it in the driver", name, took, hook)

    def start(self, trial: TrialSnapshot, rewind_to: int | None) -> None:
        for lg in self.loggers:
            if rewind_to is not None:
                self._call(lg, "log_trial_rewind", trial, rewind_to)
            self._call(lg, "log_trial_start", trial)

    def results(self, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        self.count += len(results)
        for lg in self.loggers:
            self._call(lg, "log_trial_results", self.count, trial, results)

    def amend(self, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        for lg in self.loggers:
            self._call(lg, "log_trial_amend", trial, result)

    def end(self, trial: TrialSnapshot, failed: bool) -> None:
        for lg in self.loggers:
            self._call(lg, "log_trial_end", trial, failed)

    def flush(self) -> None:
        for lg in self.loggers:
            self._call(lg, "flush")

    def close(self) -> None:
        for lg in self.loggers:
            self._call(lg, "close")


__all__ = ["ControllerLoggers", "LoggerFailed"]
