"""PyTorch Lightning's callbacks for audition: Ray Tune 2.60's ``ray.tune.integration.pytorch_lightning``.

``Trainer(callbacks=[TuneReportCheckpointCallback(...)])`` inside a trainable reports the trainer's
``callback_metrics`` with ``actors.report`` at each hook named by ``on`` (``"validation_end"`` by default; any
of Lightning's ``Callback.on_*`` hooks without its ``on_``), never while Lightning runs its sanity check, each
time with a checkpoint holding ``trainer.save_checkpoint(filename)`` unless ``save_checkpoints=False``.
``metrics``: None for every logged metric, a name, a list of names, or ``{reported name: Lightning's name}``;
a name Lightning did not log is left out with a warning, and nothing is reported when none is left.
``TuneReportCallback`` (deprecated in Ray, with its warning) reports without checkpoints. Recorded from Ray
2.60: ``tests/test_integration_lightning.py``.
"""

from __future__ import annotations

import inspect
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

from actors.integration._gbdt import needs

try:
    from lightning.pytorch import Callback
except ImportError:
    try:  # the package's older name, which Ray takes too
        from pytorch_lightning import Callback  # type: ignore[assignment]
    except ImportError as exc:
        raise needs("lightning", __name__) from exc

log = logging.getLogger(__name__)

Metrics = str | list[str] | dict[str, str] | None

# every hook Lightning calls on a callback (this version's), each of which `on` may name
HOOKS = frozenset(name for name, _ in inspect.getmembers(Callback, inspect.isfunction) if name.startswith("on_"))


class TuneCallback(Callback):  # type: ignore[misc]
    """Ray's base class: runs ``_handle(trainer, pl_module)`` at the hooks ``on`` names."""

    def __init__(self, on: str | list[str] = "validation_end") -> None:
        names = on if isinstance(on, list) else [on]
        for name in names:
            if f"on_{name}" not in HOOKS:
                raise ValueError(f"Invalid hook selected: {name}. Must be one of "
                                 f"{sorted(h[len('on_'):] for h in HOOKS)}")
        self._on = {f"on_{name}" for name in names}

    def _handle(self, trainer: Any, pl_module: Any) -> None:
        raise NotImplementedError


def _hook(name: str) -> Callable[..., None]:
    def hook(self: TuneCallback, trainer: Any, *args: Any, **kwargs: Any) -> None:
        if name in self._on:
            self._handle(trainer, kwargs.get("pl_module", args[0] if args else None))

    hook.__name__ = name
    return hook


for _name in HOOKS:
    setattr(TuneCallback, _name, _hook(_name))


class TuneReportCheckpointCallback(TuneCallback):
    """Reports the trainer's metrics, each time with a checkpoint of the trainer (Ray's arguments and defaults)."""

    def __init__(self, metrics: Metrics = None, filename: str = "checkpoint", save_checkpoints: bool = True,
                 on: str | list[str] = "validation_end") -> None:
        super().__init__(on=on)
        self._metrics = [metrics] if isinstance(metrics, str) else metrics
        self._filename = filename
        self._save_checkpoints = save_checkpoints

    def _report_dict(self, trainer: Any) -> dict[str, Any]:
        logged = trainer.callback_metrics
        if not self._metrics:
            return {key: value.item() for key, value in logged.items()}
        names = self._metrics if isinstance(self._metrics, dict) else {m: m for m in self._metrics}
        out = {}
        for reported, name in names.items():
            if name in logged:
                out[reported] = logged[name].item()
            else:
                log.warning("Metric %s does not exist in `trainer.callback_metrics.", name)
        return out

    def _handle(self, trainer: Any, pl_module: Any) -> None:
        from actors import Checkpoint, report

        if trainer.sanity_checking:
            return
        metrics = self._report_dict(trainer)
        if not metrics:
            return
        if not self._save_checkpoints:
            report(metrics)
            return
        with tempfile.TemporaryDirectory() as directory:  # (report() has committed it once it returns)
            trainer.save_checkpoint(os.path.join(directory, self._filename))
            report(metrics, checkpoint=Checkpoint.from_directory(directory))


class TuneReportCallback(TuneReportCheckpointCallback):
    """Reports the trainer's metrics without checkpoints (deprecated in Ray, which warns as this does)."""

    _warned = False

    def __init__(self, metrics: Metrics = None, on: str | list[str] = "validation_end") -> None:
        if not TuneReportCallback._warned:
            TuneReportCallback._warned = True
            warnings.warn("`ray.tune.integration.pytorch_lightning.TuneReportCallback` is deprecated. Use "
                          "`ray.tune.integration.pytorch_lightning.TuneReportCheckpointCallback` instead.",
                          stacklevel=2)
        super().__init__(metrics=metrics, save_checkpoints=False, on=on)


__all__ = ["TuneCallback", "TuneReportCallback", "TuneReportCheckpointCallback"]
