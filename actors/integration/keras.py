"""Keras's callback for audition: Ray Tune 2.60's ``ray.tune.integration.keras``.

``model.fit(..., callbacks=[TuneReportCheckpointCallback(...)])`` inside a trainable reports Keras's ``logs``
with ``actors.report`` at the hooks ``report_metrics_on`` names (``"epoch_end"`` by default), and at those
``checkpoint_on`` names (``"epoch_end"`` by default; ``[]`` for none) with a checkpoint of the model, as Ray's
``TensorflowCheckpoint`` holds one: ``model.keras`` (``model.save``) and the metadata
``{"_model_filename": "model.keras"}``, so ``keras.models.load_model`` reads it back (as does Ray Train's
``TensorflowCheckpoint.get_model``). ``metrics``: None for all of ``logs``, a name, a list of names, or
``{reported name: Keras's name}`` (a name Keras did not log raises ``KeyError``, as in Ray). ``TuneReportCallback``
raises ``DeprecationWarning``, as Ray's. Recorded from Ray 2.60: ``tests/test_integration_keras.py``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from actors.integration._gbdt import needs

try:
    from keras.callbacks import Callback
except ImportError as exc:
    raise needs("keras", __name__) from exc

Metrics = str | list[str] | dict[str, str] | None

# Ray's: the Keras hooks a report or a checkpoint may be tied to (without their "on_")
HOOKS = ("epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end", "test_batch_begin", "test_batch_end",
         "predict_batch_begin", "predict_batch_end", "train_begin", "train_end", "test_begin", "test_end",
         "predict_begin", "predict_end")
MODEL_FILENAME = "model.keras"
MODEL_FILENAME_KEY = "_model_filename"  # (Ray's TensorflowCheckpoint metadata key)

_DEPRECATED = ("The `ray.tune.integration.keras` module is deprecated in favor of "
               "`ray.train.tensorflow.keras.ReportCheckpointCallback`.")


class TuneReportCheckpointCallback(Callback):  # type: ignore[misc]
    """Reports Keras's logs, with a checkpoint of the model at the ``checkpoint_on`` hooks (Ray's arguments)."""

    def __init__(self, metrics: Metrics = None, report_metrics_on: str | list[str] = "epoch_end",
                 checkpoint_on: str | list[str] = "epoch_end") -> None:
        super().__init__()
        self._checkpoint_on = [checkpoint_on] if isinstance(checkpoint_on, str) else list(checkpoint_on)
        self._report_metrics_on = [report_metrics_on] if isinstance(report_metrics_on, str) else list(report_metrics_on)
        on = list(dict.fromkeys(self._checkpoint_on + self._report_metrics_on))
        if any(hook not in HOOKS for hook in on):
            raise ValueError(f"Invalid trigger time selected: {on}. Must be one of {list(HOOKS)}")
        self._on = set(on)
        self._metrics = metrics

    def _reported(self, logs: dict[str, Any] | None) -> dict[str, Any]:
        logs = dict(logs or {})
        if self._metrics is None:
            return logs
        if isinstance(self._metrics, str):
            return {self._metrics: logs[self._metrics]}
        if isinstance(self._metrics, dict):
            return {reported: logs[name] for reported, name in self._metrics.items()}
        return {name: logs[name] for name in self._metrics}

    def _handle(self, logs: dict[str, Any] | None, when: str) -> None:
        from actors import Checkpoint, report

        metrics = self._reported(logs)
        if when not in self._checkpoint_on:
            report(metrics)
            return
        directory = tempfile.mkdtemp()
        try:
            self.model.save(os.path.join(directory, MODEL_FILENAME))
            checkpoint = Checkpoint.from_directory(directory)
            checkpoint.update_metadata({MODEL_FILENAME_KEY: MODEL_FILENAME})
            report(metrics, checkpoint=checkpoint)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


def _hook(when: str, takes_index: bool) -> Callable[..., None]:
    if takes_index:  # on_epoch_end(epoch, logs), on_train_batch_end(batch, logs), ...
        def hook(self: TuneReportCheckpointCallback, index: int, logs: dict[str, Any] | None = None) -> None:
            if when in self._on:
                self._handle(logs, when)
    else:  # on_train_end(logs), ...
        def hook(self: TuneReportCheckpointCallback, logs: dict[str, Any] | None = None) -> None:  # type: ignore[misc]
            if when in self._on:
                self._handle(logs, when)
    hook.__name__ = f"on_{when}"
    return hook


_INDEXED = ("epoch_", "train_batch_", "test_batch_", "predict_batch_")  # hooks called with (epoch or batch, logs)
for _when in HOOKS:
    setattr(TuneReportCheckpointCallback, f"on_{_when}", _hook(_when, _when.startswith(_INDEXED)))


class TuneReportCallback:
    """Removed in Ray 2.60: constructing it raises ``DeprecationWarning``, as Ray's does."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise DeprecationWarning(_DEPRECATED)


__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]
