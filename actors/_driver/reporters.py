"""Ray Tune's progress reporter classes, accepted where Ray accepts them and, as in Ray 2.60, not used.

Ray Tune 2.60 renders progress with its new output engine by default and ignores a
``RunConfig(progress_reporter=...)`` with a warning (recorded: ``tune.py`` warns "AIR_VERBOSITY is set,
ignoring passed-in ProgressReporter for now." for a ``CLIReporter`` and even for a string). audition's
display is its own (``RunConfig(verbose=...)``, ``max_progress_rows``); these classes exist so that a Ray
script that builds a reporter runs unchanged, with the same warning, instead of failing on an import.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("audition")

IGNORED = ("RunConfig(progress_reporter=...) is ignored, as Ray Tune 2.60 ignores it by default (its new output "
           "engine draws the progress); audition's own display follows RunConfig(verbose=0/1/2) and "
           "max_progress_rows")


def warn_ignored(reporter: Any) -> None:
    """Said once per ``fit()`` that was given a reporter (Ray says it once per run too)."""
    if reporter is not None:
        log.warning("%s (got %s)", IGNORED, type(reporter).__name__)


class ProgressReporter:
    """Ray Tune's base class of progress reporters. A subclass's ``should_report``/``report`` are never
    called, by audition or, by default, by Ray Tune 2.60."""

    def setup(self, start_time: float | None = None, total_samples: int | None = None,
              metric: str | None = None, mode: str | None = None, **kwargs: Any) -> None:
        """Ray calls this before the first report; kept for subclasses that override it."""

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        raise NotImplementedError("progress reporters are not called (see RunConfig(verbose=...))")

    def report(self, trials: list[Any], done: bool, *sys_info: dict[str, Any]) -> None:
        raise NotImplementedError("progress reporters are not called (see RunConfig(verbose=...))")

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        return True


def _columns(what: str, cols: Any) -> dict[str, str]:
    """Ray's column spec: a list of keys, or a dict key -> header (order kept)."""
    if cols is None:
        return {}
    if isinstance(cols, Mapping):
        return {str(k): str(v) for k, v in cols.items()}
    if isinstance(cols, Sequence) and not isinstance(cols, str):
        return {str(k): str(k) for k in cols}
    raise ValueError(f"{what} must be a list of keys or a dict of key -> column header, got {cols!r}")


class TuneReporterBase(ProgressReporter):
    """The columns and limits Ray's table reporters take (kept, for a script that reads them back)."""

    def __init__(self, metric_columns: list[str] | dict[str, str] | None = None,
                 parameter_columns: list[str] | dict[str, str] | None = None, total_samples: int | None = None,
                 max_progress_rows: int = 20, max_error_rows: int = 20, max_column_length: int = 20,
                 max_report_frequency: int = 5, infer_limit: int = 3, print_intermediate_tables: bool | None = None,
                 metric: str | None = None, mode: str | None = None, sort_by_metric: bool = False) -> None:
        if mode not in (None, "min", "max"):
            raise ValueError(f"{type(self).__name__}(mode={mode!r}): use 'min' or 'max'")
        self._metric_columns = _columns("metric_columns", metric_columns)
        self._parameter_columns = _columns("parameter_columns", parameter_columns)
        self._total_samples = total_samples
        self._max_progress_rows = max_progress_rows
        self._max_error_rows = max_error_rows
        self._max_column_length = max_column_length
        self._max_report_frequency = max_report_frequency
        self._infer_limit = infer_limit
        self._print_intermediate_tables = print_intermediate_tables
        self._metric = metric
        self._mode = mode
        self._sort_by_metric = sort_by_metric

    def _add(self, columns: dict[str, str], what: str, key: str, representation: str | None) -> None:
        if key in columns:
            raise ValueError(f"the {what} column {key!r} is already there (a ValueError in Ray Tune too)")
        columns[key] = representation or key

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        self._add(self._metric_columns, "metric", metric, representation)

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        self._add(self._parameter_columns, "parameter", parameter, representation)

    def set_total_samples(self, total_samples: int) -> None:
        self._total_samples = total_samples

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        if (self._metric and metric) or (self._mode and mode):
            raise ValueError(f"{type(self).__name__} was built with its own metric/mode; give them to the "
                             "reporter or to TuneConfig, not both")
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        return True


class CLIReporter(TuneReporterBase):
    """Ray Tune's terminal table reporter (accepted; see the module's note)."""


class JupyterNotebookReporter(TuneReporterBase):
    """Ray Tune's notebook reporter (accepted; see the module's note)."""

    def __init__(self, overwrite: bool = True, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._overwrite = overwrite


__all__ = ["CLIReporter", "JupyterNotebookReporter", "ProgressReporter", "TuneReporterBase", "warn_ignored"]
