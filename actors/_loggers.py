"""Built-in logger callbacks.

``result.json`` and ``progress.csv`` are written by the controller itself, not by a callback:
``Tuner.restore`` rebuilds histories from them, so they must be on storage even when the driver
(where callbacks run) is killed. TensorBoard event files are a view for people, so they are a
driver-side callback like Ray Tune's ``TBXLoggerCallback``.
"""

from __future__ import annotations

import math
import os
from typing import Any

from actors._callbacks import Callback
from actors._errors import ConfigError
from actors._trial import TrialSnapshot

# bookkeeping fields that make poor curves
_SKIP = {"trial_id", "timestamp", "done", "pid", "hostname", "member", "training_iteration"}


class TBXLoggerCallback(Callback):
    """Writes every numeric metric of every result as a TensorBoard scalar (needs ``tensorboardX``,
    the ``tensorboard`` extra), step = ``training_iteration``.

    Files go to ``logdir/<trial_id>/`` when ``logdir`` is given, else into each trial's directory
    of the experiment, which must then be on the local disk (TensorBoard reads local files).
    Runs in the driver, like every callback: a slow disk delays the driver, never a trial.
    """

    def __init__(self, logdir: str | None = None) -> None:
        try:
            import tensorboardX  # noqa: F401
        except ImportError:
            raise ConfigError("TBXLoggerCallback needs tensorboardX: pip install 'audition[tensorboard]'") from None
        self.logdir = logdir
        self.experiment_dir: str | None = None
        self.writers: dict[str, Any] = {}

    def on_experiment_start(self, experiment_path: str, local: bool) -> None:
        if self.logdir is None and not local:
            raise ConfigError(f"TBXLoggerCallback writes event files on the local disk, and the experiment is "
                              f"at {experiment_path}: pass TBXLoggerCallback(logdir='/some/local/dir')")
        self.experiment_dir = experiment_path.removeprefix("file://")

    def _writer(self, trial_id: str) -> Any:
        w = self.writers.get(trial_id)
        if w is None:
            from tensorboardX import SummaryWriter

            root = self.logdir or self.experiment_dir or "."
            w = self.writers[trial_id] = SummaryWriter(logdir=os.path.join(root, trial_id), flush_secs=5)
        return w

    def on_trial_result(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                        result: dict[str, Any]) -> None:
        step = int(result.get("training_iteration", 0))
        w = self._writer(trial.trial_id)
        for key, value in _flatten(result):
            if key not in _SKIP and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value):
                w.add_scalar(key, value, global_step=step)

    def _close(self, trial_id: str) -> None:
        w = self.writers.pop(trial_id, None)
        if w is not None:
            w.close()

    def on_trial_complete(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot) -> None:
        self._close(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot) -> None:
        self._close(trial.trial_id)

    def on_experiment_end(self, trials: list[TrialSnapshot]) -> None:
        for trial_id in list(self.writers):
            self._close(trial_id)


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}/")
        else:
            out.append((f"{prefix}{k}", v))
    return out


__all__ = ["TBXLoggerCallback"]
