"""Ctrl-C in the driver, ended as Ray Tune 2.60 ends it.

Recorded from Ray 2.60 (a driver sent SIGINT by its parent after its third result): the first
SIGINT ends the tuning loop, Ray writes the experiment state once more (the trials that ran are
saved RUNNING, so ``Tuner.restore`` resumes them), stops every trial through
``_schedule_trial_stop`` (TERMINATED, no ``on_trial_complete`` of callbacks, scheduler or searcher),
calls ``on_experiment_end`` with those trials TERMINATED, warns that the run was interrupted and
``fit()`` *returns* the ResultGrid. A second SIGINT raises ``KeyboardInterrupt`` from ``fit()``.
SIGTERM is not Ray's to catch (it kills Ray's driver): audition aborts the same way and re-raises
``KeyboardInterrupt``, as it does for a ``KeyboardInterrupt`` raised by a callback.
"""

from __future__ import annotations

import dataclasses
import logging
import signal

from actors._engine.trial import TrialStatus
from actors.messages import ExperimentFinished

log = logging.getLogger("audition")


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM received by the driver while its actor system runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def by_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's SIGINT (not SIGTERM, nor a ``KeyboardInterrupt`` raised in code)."""
    return isinstance(exc, Interrupted) and exc.signum == signal.SIGINT


def ended_by_ctrl_c(finished: ExperimentFinished, where: str) -> ExperimentFinished:
    """The aborted run as ``fit()`` returns it after Ctrl-C: no error, every unfinished trial TERMINATED
    (Ray's cleanup stops them so; the state written keeps them unfinished for ``Tuner.restore``)."""
    log.warning("The experiment was interrupted (Ctrl-C); its latest state was saved. Continue it with "
                "Tuner.restore(%r, trainable).fit()", where)
    ended = tuple(t if t.status.is_finished else dataclasses.replace(t, status=TrialStatus.TERMINATED)
                  for t in finished.trials)
    return dataclasses.replace(finished, trials=ended, error=None)


__all__ = ["Interrupted", "by_ctrl_c", "ended_by_ctrl_c"]
