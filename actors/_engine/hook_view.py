"""Ray Tune 2.60's ``Trial.last_result`` as the hooks see it (recorded; see tests/test_hook_views.py).

Ray updates a trial's ``last_result`` only after every hook of a result ran, adding the trial's
``experiment_tag`` as its last key: while the scheduler's and the callbacks' ``on_trial_result``
run it is the trial's *previous* result. Before the first result it holds the keys the trainable
had once built (``trial_id``, ``date``, ``timestamp``, ``pid``, ``hostname``, ``node_ip``,
``config``); a run restored from a checkpoint starts from that checkpoint's result (untagged); a
retry without a checkpoint keeps the failed run's last result. The scheduler host and the driver's
callbacks both take it from here, so the two views cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from actors.result import EXPERIMENT_TAG, TRAINING_ITERATION, TRIAL_ID

ITERATIONS_SINCE_RESTORE = "iterations_since_restore"
# Ray's DEBUG_METRICS a trainable has before its first result, in Ray's order (trial_id first, config last)
PRE_RESULT_KEYS = ("date", "timestamp", "pid", "hostname", "node_ip")


def tagged(result: dict[str, Any], tag: str) -> dict[str, Any]:
    """``result`` with Ray's ``experiment_tag`` as its last key if it is a reported result (one with
    ``training_iteration``; the keys a trial has before its first result carry none, as in Ray)."""
    if not tag or TRAINING_ITERATION not in result:
        return result
    out = dict(result)  # (once per result in the scheduler's path: one copy)
    out.pop(EXPERIMENT_TAG, None)
    out[EXPERIMENT_TAG] = tag
    return out


def pre_result(trial_id: str, started: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Ray's ``Trial.last_result`` before any result: the id, the run's auto-filled keys, the config."""
    return {TRIAL_ID: trial_id, **started, "config": dict(config)}


def before_result(result: dict[str, Any], seen: dict[str, Any], run_start: dict[str, Any],
                  trial_id: str, config: dict[str, Any], saved: dict[str, Any] | None = None) -> dict[str, Any]:
    """Ray's ``trial.last_result`` while the hooks of ``result`` (nested, as the trial reported it) run.

    ``seen``: the trial's last result as these hooks saw it after its own hooks (tagged; empty if
    none); ``run_start``: the engine's view of the run's start (``TrialSnapshot.run_start``), which
    may be stale or empty where the engine's update has not arrived; ``saved``: the trial's latest
    result that said it carried a checkpoint (``should_checkpoint``). The first result of a run
    restored from a checkpoint (``iterations_since_restore`` 1 past iteration 1) gets the result the
    checkpoint was taken at, untagged, wherever one of them holds it; where none does (a plugin
    deciding directly, whose mirror missed the restart, of a class trainable retried from a
    ``checkpoint_frequency`` save older than its last result) the latest seen result stands in."""
    ti, since = result.get(TRAINING_ITERATION), result.get(ITERATIONS_SINCE_RESTORE)
    if since == 1 and isinstance(ti, int) and ti > 1:
        for cand in (run_start, seen, saved or {}):
            if cand.get(TRAINING_ITERATION) == ti - 1:
                out = {k: v for k, v in cand.items() if k != EXPERIMENT_TAG}
                out.setdefault("config", dict(config))
                return out
    if TRAINING_ITERATION in seen:
        return seen
    if run_start and TRAINING_ITERATION not in run_start:
        return dict(run_start)
    # the run's start is not known here yet: its keys as the first result has them (the same but
    # for date/timestamp, which Ray takes when the trainable was built)
    return pre_result(trial_id, {k: result[k] for k in PRE_RESULT_KEYS if k in result}, config)


__all__ = ["ITERATIONS_SINCE_RESTORE", "PRE_RESULT_KEYS", "before_result", "pre_result", "tagged"]
