"""What the XGBoost and LightGBM callbacks share: the metrics they pick from an evaluation log, and a report
with the booster saved as a checkpoint (Ray 2.60's ``RayReportCallback`` of each library, on ``actors.report``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

Metrics = str | list[str] | dict[str, str] | None
PostProcess = Callable[[dict[str, Any]], dict[str, Any]]


def needs(library: str, module: str, extra: str | None = None) -> ImportError:
    """The error for a missing library, naming the extra that installs it (``extra``: when not the library's name)."""
    return ImportError(f"{module} needs the {library} package: pip install 'audition[{extra or library}]' "
                       f"(or pip install {library})")


class RemovedCallback:
    """Ray's removed ``TuneReportCallback`` of a module: constructing it raises, naming its replacement."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise DeprecationWarning("`TuneReportCallback` is deprecated. Use "
                                 f"`{cls.__module__}.TuneReportCheckpointCallback` instead.")


class ReportSettings:
    """The arguments both callbacks take, as Ray's: ``metrics`` (a key, a list of keys, or a dict of
    reported name -> library key; None: every key), ``filename`` of the saved booster, ``frequency``
    (checkpoint every N iterations; 0: none during training), ``checkpoint_at_end``,
    ``results_postprocessing_fn`` (applied to the picked metrics)."""

    def __init__(self, metrics: Metrics, filename: str, frequency: int, checkpoint_at_end: bool,
                 results_postprocessing_fn: PostProcess | None) -> None:
        if isinstance(metrics, str):
            metrics = [metrics]
        self._metrics = metrics
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._results_postprocessing_fn = results_postprocessing_fn

    def _picked(self, flat: dict[str, Any]) -> dict[str, Any]:
        """The metrics to report; a key the log lacks raises ``KeyError``, as in Ray."""
        if not self._metrics:
            out = flat
        elif isinstance(self._metrics, dict):
            out = {key: flat[metric] for key, metric in self._metrics.items()}
        else:
            out = {key: flat[key] for key in self._metrics}
        if self._results_postprocessing_fn:
            out = self._results_postprocessing_fn(out)
        return out

    def _report(self, metrics: dict[str, Any], save: Callable[[str], Any] | None = None) -> None:
        """``actors.report(metrics)``; with ``save``, the booster saved by ``save(path)`` goes with it."""
        from actors import Checkpoint, report

        if save is None:
            report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            save(Path(tmp, self._filename).as_posix())
            report(metrics, checkpoint=Checkpoint.from_directory(tmp))


__all__ = ["Metrics", "PostProcess", "RemovedCallback", "ReportSettings", "needs"]
