"""Ray Tune 2.60's last result of a trial whose run ended (``Trial.last_result``, ``Result.metrics``).

Ray says ``done: True`` there only for a result a stop was decided on (a stop criterion or the
scheduler's STOP, whose row says it too) and for a trainable that finished (a function that
returned); a trial stopped from outside its own results (a stopper's ``stop_all``, a time budget,
``fail_fast`` stopping the others, an interrupted run) keeps its last row's ``done: False``.
"""

from __future__ import annotations

from typing import Any

from actors.result import TRAINING_ITERATION, TRIAL_ID


def run_result(trial_id: str, last: dict[str, Any], started: dict[str, Any],
               config: dict[str, Any]) -> dict[str, Any]:
    """``last``, or for a run that never reported Ray's keys of it: the trial id, then the keys its
    process took once the trainable was built and the config; the id alone if it never came up.
    No ``done`` key either way."""
    if TRAINING_ITERATION in last:
        return last
    return {TRIAL_ID: trial_id, **started, "config": dict(config)} if started else {TRIAL_ID: trial_id}


def ends_done(last: dict[str, Any], completed: bool, stopped_at: int) -> bool:
    """Whether the ended trial's last result says ``done: True``: it finished on its own
    (``completed``), or a stop was decided on that very result (``stopped_at``, its iteration)."""
    return completed or (stopped_at > 0 and int(last.get(TRAINING_ITERATION) or 0) == stopped_at)


__all__ = ["ends_done", "run_result"]
