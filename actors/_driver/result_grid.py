"""``ResultGrid`` / ``Result``: what ``fit()`` returns, backed by storage.

Histories are read from each trial's ``result.json`` on first access, so a grid
of thousands of trials costs only its last results until a history is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from actors._driver.checkpoint import Checkpoint
from actors._driver.config import CheckpointConfig, check_mode
from actors._driver.errors import ConfigError, TrialError
from actors._engine.trial import TrialStatus
from actors.messages import TrialSummary


class Result:
    """One trial's outcome (Ray Tune's ``Result``)."""

    def __init__(self, summary: TrialSummary, storage_url: str, storage_options: dict[str, Any],
                 experiment: str, checkpoint_config: CheckpointConfig | None = None) -> None:
        self._summary = summary
        self._checkpoint_config = checkpoint_config or CheckpointConfig()
        self._url = storage_url
        self._options = storage_options
        self._experiment = experiment
        self._history: list[dict[str, Any]] | None = None
        self.trial_id = summary.trial_id
        self.config = dict(summary.config)
        self.metrics = dict(summary.last_result)
        self.status = summary.status
        self.path = summary.path
        self.num_failures = summary.num_failures
        self.error: TrialError | None = None
        if summary.status is TrialStatus.ERROR:
            first = (summary.error or "").splitlines()[0] if summary.error else "unknown error"
            self.error = TrialError(summary.trial_id, first, summary.error or "")
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
        found = [(Checkpoint(ctx.uri(info.path), self._options), dict(info.metadata.get("metrics") or {}))
                 for info in list_checkpoints(ctx, layout.trial_dir(self.trial_id)) if info.committed]
        return ray_checkpoint_order(found, self._checkpoint_config)

    @property
    def metrics_dataframe(self) -> Any:
        import pandas as pd

        return pd.DataFrame(self.metrics_history)

    def __repr__(self) -> str:
        return f"Result(trial_id={self.trial_id!r}, status={self.status.value}, metrics={self.metrics!r})"


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
        """The trial with the best ``metric`` (``scope``: "last", "all", "last-5-avg", "last-10-avg")."""
        metric = metric or self._metric
        mode = mode or self._mode
        if metric is None or mode is None:
            raise ConfigError("get_best_result: no metric/mode given and none set in TuneConfig; "
                              "pass get_best_result(metric='loss', mode='min')")
        check_mode(mode, "get_best_result")
        if scope not in ("last", "all", "last-5-avg", "last-10-avg"):
            raise ConfigError(f"get_best_result(scope={scope!r}): use 'last', 'all', 'last-5-avg' "
                              "or 'last-10-avg'")
        scored: list[tuple[float, Result]] = []
        seen_metric = False
        for r in self._results:
            value = self._score(r, metric, mode, scope)
            if value is None:
                continue
            seen_metric = True
            if filter_nan_and_inf and (math.isnan(value) or math.isinf(value)):
                continue
            scored.append((value, r))
        if not seen_metric:
            known = sorted({k for r in self._results for k in r.metrics})
            raise ConfigError(f"get_best_result: no trial reported the metric {metric!r}; "
                              f"reported keys are {known}")
        if not scored:
            raise ConfigError(f"get_best_result: every value of {metric!r} is NaN or infinite; "
                              "pass filter_nan_and_inf=False to compare them anyway")
        pick = min if mode == "min" else max
        return pick(scored, key=lambda p: p[0])[1]

    @staticmethod
    def _score(r: Result, metric: str, mode: str, scope: str) -> float | None:
        if scope == "last":
            v = r.metrics.get(metric)
            return None if v is None else float(v)
        values = [float(h[metric]) for h in r.metrics_history if metric in h]
        if not values:
            return None
        if scope == "all":
            return min(values) if mode == "min" else max(values)
        n = 5 if scope == "last-5-avg" else 10
        tail = values[-n:]
        return sum(tail) / len(tail)

    def get_dataframe(self, filter_metric: str | None = None, filter_mode: str | None = None) -> Any:
        """One row per trial: its last result, or with ``filter_metric``/``filter_mode`` the result
        in its history with the best value of that metric (Ray Tune's ``get_dataframe``)."""
        import pandas as pd

        if (filter_metric is None) != (filter_mode is None):
            raise ConfigError("get_dataframe: pass filter_metric and filter_mode together, e.g. "
                              "get_dataframe(filter_metric='loss', filter_mode='min')")
        check_mode(filter_mode, "get_dataframe(filter_mode=...)")
        rows = []
        for r in self._results:
            row = dict(r.metrics)
            if filter_metric is not None:
                scored = [h for h in r.metrics_history if isinstance(h.get(filter_metric), (int, float))
                          and not math.isnan(h[filter_metric])]
                if scored:
                    pick = min if filter_mode == "min" else max
                    row = dict(pick(scored, key=lambda h: h[filter_metric]))
            row.update({f"config/{k}": v for k, v in _flatten(r.config).items()})
            row["trial_id"] = r.trial_id
            row["status"] = r.status.value
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"ResultGrid({len(self._results)} trials, {self.num_errors} errors)"


def ray_checkpoint_order(found: list[tuple[Any, dict[str, Any]]],
                         cc: CheckpointConfig) -> list[tuple[Any, dict[str, Any]]]:
    """Ray Tune 2.60's ``_CheckpointManager.best_checkpoint_results`` for checkpoints in commit order:
    one with the score attribute is inserted after every entry whose score is not higher (NaN lowest,
    ``min`` negates), one without it is appended; then the last ``num_to_keep``."""
    attr, sign = cc.checkpoint_score_attribute, 1.0 if cc.checkpoint_score_order == "max" else -1.0

    def score(metrics: dict[str, Any]) -> tuple[bool, float]:
        value = _flatten(metrics).get(attr or "", float("-inf"))
        try:
            s = sign * float(value)
        except (TypeError, ValueError):
            s = float("-inf")
        return (False, float("-inf")) if math.isnan(s) else (True, s)

    out: list[tuple[Any, dict[str, Any]]] = []
    for item in found:
        if attr is not None and attr in item[1]:
            key = score(item[1])
            at = next((i for i, other in enumerate(out) if score(other[1]) > key), len(out))
            out.insert(at, item)
        else:
            out.append(item)
    return out if cc.num_to_keep is None else out[-cc.num_to_keep:]


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def grid_of(trials: Iterable[TrialSummary], ctx: Any, name: str, metric: str | None, mode: str | None,
            checkpoint_config: CheckpointConfig | None) -> ResultGrid:
    """The grid ``fit()`` returns for the controller's final summaries (``actors.testing.simulate``
    builds its grid here too); ``ctx`` is the experiment's ``storage.StorageContext``."""
    from storage import ExperimentLayout

    results = [Result(s, ctx.url, dict(ctx.options), name, checkpoint_config) for s in trials]
    return ResultGrid(results, metric, mode, ctx.uri(ExperimentLayout(ctx, name).experiment_dir))


__all__ = ["Result", "ResultGrid", "grid_of"]
