"""XGBoost's callback for audition: Ray Tune 2.60's ``ray.tune.integration.xgboost``.

``xgboost.train(..., callbacks=[TuneReportCheckpointCallback(...)])`` inside a trainable reports each
boosting round's evaluation metrics (``"<eval name>-<metric>"``, e.g. ``"test-logloss"``: the last value of
each) with ``actors.report``, and saves the booster as a checkpoint every ``frequency`` rounds and once
more after training (``checkpoint_at_end``; Ray's extra report, with the last round's metrics, unless the
last round was just checkpointed). Recorded from Ray 2.60: ``tests/test_integration_gbdt.py``.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any

from actors.integration._gbdt import Metrics, PostProcess, RemovedCallback, ReportSettings, needs
from actors.utils import flatten_dict

try:
    from xgboost.callback import TrainingCallback
    from xgboost.core import Booster
except ImportError as exc:  # the module is imported for this callback alone: say what to install
    raise needs("xgboost", __name__) from exc


class TuneReportCheckpointCallback(ReportSettings, TrainingCallback):
    """Reports XGBoost's metrics each round, with checkpoints (Ray's arguments and defaults; ``metrics``:
    None for every metric, a key, a list of keys, or ``{reported name: "<eval name>-<metric>"}``)."""

    CHECKPOINT_NAME = "model.ubj"

    def __init__(self, metrics: Metrics = None, filename: str = CHECKPOINT_NAME, frequency: int = 0,
                 checkpoint_at_end: bool = True, results_postprocessing_fn: PostProcess | None = None) -> None:
        ReportSettings.__init__(self, metrics, filename, frequency, checkpoint_at_end, results_postprocessing_fn)
        self._evals_log: Any = None  # the last round's, reported again with the end checkpoint
        self._last_checkpoint_iteration: int | None = None  # no second checkpoint of the same round

    @classmethod
    def get_model(cls, checkpoint: Any, filename: str = CHECKPOINT_NAME) -> Booster:
        """The booster saved in ``checkpoint`` (one this callback reported) under ``filename``."""
        with checkpoint.as_directory() as path:
            booster = Booster()
            booster.load_model(Path(path, filename).as_posix())
            return booster

    def _report_dict(self, evals_log: Any) -> dict[str, Any]:
        if isinstance(evals_log, OrderedDict):  # xgboost >= 1.3: per metric, one value per round
            flat = {k: v[-1] for k, v in flatten_dict(evals_log, delimiter="-").items()}
        else:
            flat = dict(evals_log)
        return self._picked(flat)

    def after_iteration(self, model: Booster, epoch: int, evals_log: Any) -> bool:
        self._evals_log = evals_log
        checkpoint = self._frequency != 0 and (epoch + 1) % self._frequency == 0
        metrics = self._report_dict(evals_log)
        if checkpoint:
            self._last_checkpoint_iteration = epoch
            self._report(metrics, model.save_model)
        else:
            self._report(metrics)
        return False  # (never stops training)

    def after_training(self, model: Booster) -> Booster:
        if not self._checkpoint_at_end:
            return model
        if self._last_checkpoint_iteration is not None and \
                model.num_boosted_rounds() - 1 == self._last_checkpoint_iteration:
            return model  # the last round was checkpointed already
        metrics = self._report_dict(self._evals_log) if self._evals_log else {}
        self._report(metrics, model.save_model)
        return model


class RayTrainReportCallback(TuneReportCheckpointCallback):
    """Ray Train's name for the same callback (``ray.train.xgboost``); in a trainable it reports the same."""


class TuneReportCallback(RemovedCallback):
    """Removed in Ray Tune 2.x: constructing it raises, as in Ray 2.60."""


__all__ = ["RayTrainReportCallback", "TuneReportCallback", "TuneReportCheckpointCallback"]
