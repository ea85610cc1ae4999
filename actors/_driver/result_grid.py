"""``ResultGrid`` / ``Result``: what ``fit()`` returns, backed by storage.

Histories are read from each trial's ``result.json`` on first access, so a grid
of thousands of trials costs only its last results until a history is asked for.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from actors._driver.checkpoint import Checkpoint, filesystem_name
from actors._driver.config import CheckpointConfig, check_mode
from actors._driver.errors import ConfigError, NoBestTrialError, TrialError, trial_error
from actors._driver.metric_analysis import UNANALYSED, MetricAnalysis
from actors._engine.flat import flatten, lookup
from actors._engine.trial import Paths, TagPaths, TrialStatus, tag_of
from actors._state_codec import load_metrics
from actors.messages import TrialSummary
from actors.result import EXPERIMENT_TAG

log = logging.getLogger("audition")
# what Ray 2.60's Result repr leaves out of the metrics (its AUTO_RESULT_KEYS and BLACKLISTED_KEYS)
_REPR_HIDDEN = frozenset({
    "training_iteration", "time_total_s", "episodes_total", "timesteps_total", "node_ip", "hostname", "pid",
    "time_this_iter_s", "timestamp", "date", "time_since_restore", "timesteps_since_restore",
    "iterations_since_restore", "config", "checkpoint_dir_name", "done", "trial_id", "experiment_tag",
    "should_checkpoint", "_report_on"})


class Result:
    """One trial's outcome (Ray Tune's ``Result``)."""

    def __init__(self, summary: TrialSummary, storage_url: str, storage_options: dict[str, Any],
                 experiment: str, checkpoint_config: CheckpointConfig | None = None,
                 searched: Searched | None = None) -> None:
        self._summary = summary
        self._checkpoint_config = checkpoint_config or CheckpointConfig()
        self._url = storage_url
        self._options = storage_options
        self._experiment = experiment
        self._history: list[dict[str, Any]] | None = None
        self.trial_id = summary.trial_id
        self.config = dict(summary.config)
        self.metrics = dict(summary.last_result)
        if "training_iteration" in self.metrics and (summary.experiment_tag or searched is not None):
            # Ray tags a reported result: the trial's tag (a PBT exploit's), else the drawn values'
            self.metrics[EXPERIMENT_TAG] = summary.experiment_tag or tag_of(
                summary.trial_id, self.config, searched.paths if searched is not None else None)[0]
        self.status = summary.status
        self.path = summary.path
        self.num_failures = summary.num_failures
        self.error: TrialError | None = None
        if summary.status is TrialStatus.ERROR:
            first = (summary.error or "").splitlines()[0] if summary.error else "unknown error"
            self.error = trial_error(summary.trial_id, first, summary.error or "")
        self.checkpoint: Checkpoint | None = None
        if summary.checkpoint is not None:
            from storage import StorageContext

            ctx = StorageContext(storage_url, storage_options)
            self.checkpoint = Checkpoint(ctx.uri(summary.checkpoint.path), storage_options)

    def _layout(self) -> tuple[Any, Any]:
        from storage import ExperimentLayout, StorageContext

        ctx = StorageContext(self._url, self._options)
        layout = ExperimentLayout(ctx, self._experiment)
        layout.set_dirname(self.trial_id, self._summary.dirname)
        return ctx, layout

    @property
    def metrics_history(self) -> list[dict[str, Any]]:
        """Every reported result of the trial, in order (read from storage once)."""
        if self._history is None:
            from storage import read_results

            ctx, layout = self._layout()
            self._history = read_results(ctx, layout, self.trial_id)
        return self._history

    @property
    def best_checkpoints(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The checkpoints kept in storage, each with the metrics of the result it was saved at,
        in Ray Tune's order: with ``checkpoint_score_attribute``, worst first and best last (equal
        scores oldest first); without it, oldest first. At most ``num_to_keep`` (Ray leaves out the
        latest checkpoint here when it is kept only for resuming)."""
        from storage import list_checkpoints

        ctx, layout = self._layout()
        found = [(Checkpoint(ctx.uri(info.path), self._options), load_metrics(info.metadata, ctx.uri(info.path)))
                 for info in list_checkpoints(ctx, layout.trial_dir(self.trial_id)) if info.committed]
        return ray_checkpoint_order(found, self._checkpoint_config)

    @property
    def metrics_dataframe(self) -> Any:
        """One row per reported result, nested keys flattened (``val/loss``, ``config/lr``), as
        Ray Tune reads ``result.json`` (``pandas.json_normalize`` with ``sep="/"``)."""
        return _frame(self.metrics_history)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], storage_options: dict[str, Any] | None = None) -> Result:
        """The result of the trial whose directory is ``path`` (local, or a URL such as ``s3://...``), as
        Ray's ``Result.from_path`` reads it: from the experiment it belongs to (its parent directory),
        without running anything. ``storage_options`` (fsspec) instead of Ray's ``storage_filesystem``."""
        from actors._driver.restore import read_results

        trial_dir = os.fspath(path).strip().rstrip("/")
        experiment, _, dirname = trial_dir.rpartition("/")
        try:
            grid = read_results(experiment, storage_options)[0]
        except ConfigError as exc:
            raise RuntimeError(f"no trial of an audition experiment at {trial_dir}: {exc}") from None
        for result in grid:
            if result.path.rstrip("/").rpartition("/")[2] == dirname:
                return result
        raise RuntimeError(f"no trial of the experiment at {experiment} has the directory {dirname!r}; its trials "
                           f"are in {sorted(r.path.rstrip('/').rpartition('/')[2] for r in grid)}")

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose result has the best ``metric`` (``"a/b"`` reads a nested value), as Ray
        2.60 chooses it: checkpoints without the metric are passed over, the first of equal ones wins, and
        a NaN is compared as Python's ``min``/``max`` compare it. Raises ``RuntimeError`` when the trial
        kept no checkpoint or none has the metric, ``ValueError`` for a mode other than min/max."""
        found = self.best_checkpoints
        if not found:
            raise RuntimeError(f"trial {self.trial_id} kept no checkpoint, so there is no best one")
        if mode not in ("min", "max"):
            raise ValueError(f"get_best_checkpoint(mode={mode!r}): use 'min' or 'max'")
        valued = [(ckpt, value) for ckpt, metrics in found
                  if (value := lookup(metrics, metric, sequences=True)) is not None]
        if not valued:
            raise RuntimeError(f"no checkpoint of trial {self.trial_id} has a value of {metric!r}; the metrics "
                               f"reported with them are {sorted(found[-1][1])}")
        choose = max if mode == "max" else min
        return choose(valued, key=lambda pair: pair[1])[0]

    def _repr(self, indent: int = 0) -> str:
        """Ray 2.60's ``Result`` repr: the error's type, the metrics without Ray's automatic and
        bookkeeping keys, path, filesystem and checkpoint, one per line."""
        shown: dict[str, Any] = {}
        if self.error is not None:
            shown["error"] = type(self.error).__name__
        shown["metrics"] = ({k: v for k, v in self.metrics.items() if k not in _REPR_HIDDEN}
                            if self.metrics else self.metrics)
        shown["path"] = self.path
        shown["filesystem"] = filesystem_name(self._url)
        shown["checkpoint"] = self.checkpoint
        pad, inner = " " * indent, " " * (indent + 2)
        body = ",\n".join(f"{inner}{key}={value!r}" for key, value in shown.items())
        return f"{pad}Result(\n{body}\n{pad})"

    def __repr__(self) -> str:
        return self._repr()


class ResultGrid:
    """All trials' results; iterable and indexable (Ray Tune's ``ResultGrid``)."""

    def __init__(self, results: list[Result], metric: str | None, mode: str | None, path: str) -> None:
        self._results = results
        self._metric = metric
        self._mode = mode
        self.experiment_path = path

    def __iter__(self) -> Iterator[Result]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> Result:
        return self._results[i]

    @property
    def errors(self) -> list[TrialError]:
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    @property
    def num_terminated(self) -> int:
        return sum(1 for r in self._results if r.status is TrialStatus.TERMINATED)

    def get_best_result(self, metric: str | None = None, mode: str | None = None, scope: str = "last",
                        filter_nan_and_inf: bool = True) -> Result:
        """The trial with the best ``metric`` (Ray Tune's ``get_best_result``): ``scope`` "last",
        "avg", "last-5-avg", "last-10-avg" compare that statistic of each trial's values, "all" its
        best value. A nested metric is named ``outer/inner``. With one trial, that trial."""
        if len(self._results) == 1:
            return self._results[0]
        metric = metric or self._metric
        mode = mode or self._mode
        if metric is None or mode is None:
            missing = " and ".join(w for w, v in (("metric", metric), ("mode", mode)) if v is None)
            raise ConfigError(f"get_best_result: no {missing} given, and TuneConfig sets none; pass them, "
                              "e.g. get_best_result(metric='loss', mode='min')")
        check_mode(mode, "get_best_result")
        if scope not in ("last", "avg", "all", "last-5-avg", "last-10-avg"):
            raise ConfigError(f"get_best_result(scope={scope!r}): use 'last', 'avg', 'all', 'last-5-avg' "
                              "or 'last-10-avg'")
        best: Result | None = None
        best_score = 0.0
        seen_metric = False
        for r in self._results:
            last = lookup(r.metrics, metric)
            if scope == "last" and _is_number(last) and metric.split("/", 1)[0] not in UNANALYSED:
                score = float(last)  # the last result has it: no need to read the history
            else:
                stats = metric_statistics(r, metric)
                if stats is None:
                    continue
                score = stats[mode if scope == "all" else scope]
            seen_metric = True
            if filter_nan_and_inf and (math.isnan(score) or math.isinf(score)):
                continue
            if best is None or (score > best_score if mode == "max" else score < best_score):
                best, best_score = r, score
        if best is None:
            if not seen_metric:
                known = sorted(flatten({k: v for r in self._results for k, v in r.metrics.items()}))
                raise NoBestTrialError(f"get_best_result: no trial reported the metric {metric!r}; "
                                       f"reported keys are {known}")
            raise NoBestTrialError(f"get_best_result: every value of {metric!r} is NaN or infinite; "
                                   "pass filter_nan_and_inf=False to compare them anyway")
        return best

    def get_dataframe(self, filter_metric: str | None = None, filter_mode: str | None = None) -> Any:
        """One row per trial that reported: its last result, or with ``filter_metric`` and
        ``filter_mode`` the result with the best value of that metric; nested keys flattened, plus
        ``config/...`` and ``logdir`` columns, as Ray Tune's (2.60's ``logdir`` holds the trial id)."""
        import pandas as pd

        if filter_mode is not None:
            check_mode(filter_mode, "get_dataframe(filter_mode=...)")
            if filter_metric is None:
                raise ConfigError("get_dataframe: filter_mode needs filter_metric too, e.g. "
                                  "get_dataframe(filter_metric='loss', filter_mode='min')")
        rows = []
        for r in self._results:
            df = r.metrics_dataframe
            if df.empty:
                continue  # no result: no row (Ray)
            at = -1
            if filter_mode is not None and filter_metric in df:
                column = pd.to_numeric(df[filter_metric], errors="coerce")
                if column.isna().all():
                    log.warning("get_dataframe: trial %s has no numeric %r; it is left out", r.trial_id,
                                filter_metric)
                    continue
                at = int(column.idxmax() if filter_mode == "max" else column.idxmin())
            row = df.iloc[at].to_dict()
            row.update(flatten({"config": r.config}))
            row["logdir"] = r.trial_id
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        body = ",\n".join(r._repr(indent=2) for r in self._results)
        return f"ResultGrid<[\n{body}\n]>"


def ray_checkpoint_order(found: list[tuple[Any, dict[str, Any]]],
                         cc: CheckpointConfig) -> list[tuple[Any, dict[str, Any]]]:
    """Ray Tune 2.60's ``best_checkpoint_results`` for checkpoints in commit order (the order retention
    keeps them by, ``storage.ray_keep_order``)."""
    from storage import ray_keep_order

    return ray_keep_order(found, cc.checkpoint_score_attribute, cc.checkpoint_score_order, cc.num_to_keep)


@dataclass(frozen=True)
class Searched:
    """What names a trial's ``experiment_tag``: the default generator's domain paths (its tag lists
    the drawn values), or ``None`` for another searcher (its tag lists the whole config)."""

    paths: Paths | TagPaths | None


def _frame(rows: list[dict[str, Any]]) -> Any:
    import pandas as pd

    return pd.json_normalize(rows, sep="/") if rows else pd.DataFrame()


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real)


def metric_statistics(r: Result, metric: str) -> dict[str, float] | None:
    """Ray Tune's per-trial ``metric_analysis`` of ``metric`` over the trial's results: max, min,
    avg (weighted by ``training_iteration``), last, last-5-avg, last-10-avg; None if no result holds a
    number there (or Ray leaves the key out of its analysis: no trial is best by it)."""
    if metric.split("/", 1)[0] in UNANALYSED:
        return None
    stats = MetricAnalysis()
    for row in r.metrics_history:
        value = lookup(row, metric)
        if _is_number(value):
            stats.add(metric, value, row.get("training_iteration"))
    return stats.analysis.get(metric)


def grid_of(trials: Iterable[TrialSummary], ctx: Any, name: str, metric: str | None, mode: str | None,
            checkpoint_config: CheckpointConfig | None, searched: Searched | None = None) -> ResultGrid:
    """The grid ``fit()`` returns for the controller's final summaries (``actors.testing.simulate``
    builds its grid here too); ``ctx`` is the experiment's ``storage.StorageContext``."""
    from storage import ExperimentLayout

    results = [Result(s, ctx.url, dict(ctx.options), name, checkpoint_config, searched) for s in trials]
    return ResultGrid(results, metric, mode, ctx.uri(ExperimentLayout(ctx, name).experiment_dir))


__all__ = ["Result", "ResultGrid", "Searched", "grid_of"]
