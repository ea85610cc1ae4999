"""Names of the result keys the engine reads or fills in (Ray Tune's ``ray.tune.result``).

``from actors.result import SHOULD_CHECKPOINT`` is the port of
``from ray.tune.result import SHOULD_CHECKPOINT``. Pure constants: importing this is free.
"""

from __future__ import annotations

DONE = "done"  # the trainable has finished (a class trainable's step() may set it)
SHOULD_CHECKPOINT = "should_checkpoint"  # a step() result or a callback asks for a checkpoint now
DEFAULT_METRIC = "_metric"  # the key a function trainable's returned/yielded number is reported under
TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TIMESTAMP = "timestamp"
TRIAL_ID = "trial_id"
HOSTNAME = "hostname"
PID = "pid"
NODE_IP = "node_ip"
EXPERIMENT_TAG = "experiment_tag"  # the trial's tag, last key of its last result (added, never reported)

# Every key the engine itself may put in a result (the trial's worker, PBT's exploit info, a function
# checkpoint's flag), never a user metric: hidden wherever a trial's own metrics are listed. (Ray's
# AUTO_RESULT_KEYS is a different, narrower set, for its progress table.)
ENGINE_RESULT_KEYS = frozenset({
    TRIAL_ID, TRAINING_ITERATION, TIME_THIS_ITER_S, TIME_TOTAL_S, TIMESTAMP, DONE, HOSTNAME, PID, NODE_IP,
    "date", "config", "time_since_restore", "iterations_since_restore", "checkpoint_dir_name",
    SHOULD_CHECKPOINT, "pbt_exploit", "member", "timesteps_since_restore",
})

__all__ = ["DEFAULT_METRIC", "DONE", "ENGINE_RESULT_KEYS", "EXPERIMENT_TAG", "HOSTNAME", "NODE_IP", "PID",
           "SHOULD_CHECKPOINT", "TIMESTAMP", "TIME_THIS_ITER_S", "TIME_TOTAL_S", "TRAINING_ITERATION", "TRIAL_ID"]
