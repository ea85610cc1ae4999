"""A reported result with Ray Tune 2.60's auto-filled keys, in Ray's key order.

The order shows wherever a user prints a result or reads its columns (``Result.metrics``,
``result.json``, ``progress.csv``, the dataframes), so it is Ray's, as recorded from Ray 2.60:

* function trainable (``tune.report``): the reported keys, ``timestamp``, ``checkpoint_dir_name``,
  ``should_checkpoint`` (a result with a checkpoint), ``done``, ``timesteps_total``/``episodes_total``
  (when counted), ``training_iteration``, ``trial_id``, ``date``, ``time_this_iter_s``,
  ``time_total_s``, ``pid``, ``hostname``, ``node_ip``, ``config``, ``time_since_restore``,
  ``iterations_since_restore`` (then ``timesteps_since_restore`` once not zero);
* class trainable (``step()``): the reported keys, ``done``, the totals, ``training_iteration``,
  ``trial_id``, ``date``, ``timestamp``, then as above from ``time_this_iter_s``.

A key the trainable reported itself keeps its place (Ray fills it with ``setdefault``/``update``).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from actors.result import DONE, SHOULD_CHECKPOINT, TIMESTAMP, TRAINING_ITERATION, TRIAL_ID

HOST = socket.gethostname()
_node_ip: str | None = None


def node_ip() -> str:
    """This machine's address as Ray's ``node_ip`` (the source address of a route out, found once
    per process by a UDP connect, which sends nothing); 127.0.0.1 without a network."""
    global _node_ip
    if _node_ip is None:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(("8.8.8.8", 80))
                _node_ip = str(s.getsockname()[0])
        except OSError:
            _node_ip = "127.0.0.1"
    return _node_ip


def started_metrics(now: float) -> dict[str, Any]:
    """Ray's auto-filled keys that need no result (its ``DEBUG_METRICS`` but trial_id and config), as
    this process sees them at ``now``: what ``Result.metrics`` holds for a trial that never reported."""
    return {"date": time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(now)), "timestamp": int(now),
            "pid": os.getpid(), "hostname": HOST, "node_ip": node_ip()}


@dataclass(frozen=True)
class Autofill:
    """What one result is filled with: the counters of its run and where it ran."""

    trial_id: str
    iteration: int
    time_this_iter_s: float
    time_total_s: float
    time_since_restore: float
    iterations_since_restore: int
    now: float
    pid: int
    hostname: str
    node_ip: str
    config: dict[str, Any]


def ray_result(metrics: dict[str, Any], fill: Autofill, totals: dict[str, Any], after: dict[str, Any],
               checkpoint_dir_name: str | None = None, function_api: bool = True) -> dict[str, Any]:
    """``metrics`` with Ray's keys filled in its order. ``totals`` are the counted
    ``timesteps_total``/``episodes_total``, ``after`` the keys that end every result
    (``timesteps_since_restore``); ``checkpoint_dir_name`` names a function result's checkpoint."""
    result = dict(metrics)
    if function_api:  # Ray's session: the report's time, then its checkpoint's directory
        result[TIMESTAMP] = int(fill.now)
        result["checkpoint_dir_name"] = checkpoint_dir_name
        if checkpoint_dir_name is not None:  # (FunctionTrainable.step flags a result with one)
            result[SHOULD_CHECKPOINT] = True
        stamp: Any = result[TIMESTAMP]
    else:  # a class trainable's own truthy timestamp stays (Ray's Trainable.train)
        stamp = metrics.get(TIMESTAMP) or int(fill.now)
    result[DONE] = bool(metrics.get(DONE, False))
    result.update(totals)
    result[TRAINING_ITERATION] = fill.iteration  # audition's count, which storage rewinds by
    result.update({
        TRIAL_ID: fill.trial_id,
        "date": time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(fill.now)),
        TIMESTAMP: stamp,
        "time_this_iter_s": fill.time_this_iter_s,
        "time_total_s": fill.time_total_s,
        "pid": fill.pid,
        "hostname": fill.hostname,
        "node_ip": fill.node_ip,
        "config": fill.config,
        "time_since_restore": fill.time_since_restore,
        "iterations_since_restore": fill.iterations_since_restore,
        **after,
    })
    return result


__all__ = ["HOST", "Autofill", "node_ip", "ray_result", "started_metrics"]
