"""LightGBM's callback for audition: Ray Tune 2.60's ``ray.tune.integration.lightgbm``.

``lightgbm.train(..., callbacks=[TuneReportCheckpointCallback(...)])`` inside a trainable reports each
iteration's evaluation results (``"<data name>-<metric>"``, e.g. ``"test-binary_logloss"``; from
``lightgbm.cv``, ``"-mean"`` and ``"-stdv"`` ones) with ``actors.report``, and saves the booster as a
checkpoint every ``frequency`` iterations and at the last one (``checkpoint_at_end``). Recorded from Ray
2.60: ``tests/test_integration_gbdt.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.integration._gbdt import Metrics, PostProcess, RemovedCallback, ReportSettings, needs
from actors.utils import flatten_dict

try:
    from lightgbm import Booster
except ImportError as exc:  # the module is imported for this callback alone: say what to install
    raise needs("lightgbm", __name__) from exc


class TuneReportCheckpointCallback(ReportSettings):
    """Reports LightGBM's evaluation results each iteration, with checkpoints (Ray's arguments and defaults;
    ``metrics``: None for every result, a key, a list of keys, or ``{reported name: "<data name>-<metric>"}``)."""

    CHECKPOINT_NAME = "model.txt"

    def __init__(self, metrics: Metrics = None, filename: str = CHECKPOINT_NAME, frequency: int = 0,
                 checkpoint_at_end: bool = True, results_postprocessing_fn: PostProcess | None = None) -> None:
        super().__init__(metrics, filename, frequency, checkpoint_at_end, results_postprocessing_fn)

    @classmethod
    def get_model(cls, checkpoint: Any, filename: str = CHECKPOINT_NAME) -> Booster:
        """The booster saved in ``checkpoint`` (one this callback reported) under ``filename``."""
        with checkpoint.as_directory() as path:
            return Booster(model_file=Path(path, filename).as_posix())

    @staticmethod
    def _eval_result(env: Any) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for entry in env.evaluation_result_list:
            data_name, eval_name, result = entry[0:3]
            per = out.setdefault(data_name, {})
            if len(entry) > 4:  # lightgbm.cv: a mean and its standard deviation
                per[eval_name + "-mean"] = result
                per[eval_name + "-stdv"] = entry[4]
            else:
                per[eval_name] = result
        return out

    def __call__(self, env: Any) -> None:
        metrics = self._picked(flatten_dict(self._eval_result(env), delimiter="-"))
        at_end = self._checkpoint_at_end and env.iteration == env.end_iteration - 1
        every = self._frequency != 0 and (env.iteration + 1) % self._frequency == 0
        self._report(metrics, env.model.save_model if at_end or every else None)


class RayTrainReportCallback(TuneReportCheckpointCallback):
    """Ray Train's name for the same callback (``ray.train.lightgbm``); in a trainable it reports the same."""


class TuneReportCallback(RemovedCallback):
    """Removed in Ray Tune 2.x: constructing it raises, as in Ray 2.60."""


__all__ = ["RayTrainReportCallback", "TuneReportCallback", "TuneReportCheckpointCallback"]
