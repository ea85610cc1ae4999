"""``ExperimentAnalysis``: Ray Tune's result of the classic ``tune.run(...)``, over a ``ResultGrid``.

Ray's class reads its trials from the experiment state; this one reads the same facts from the
``ResultGrid`` that ``Tuner.fit()`` returns (or that storage holds), so there is one source of
results. Each method keeps Ray 2.60's semantics, including where they differ from the grid's:
``get_best_trial`` returns ``None`` (and warns) where ``get_best_result`` raises, and the
``best_*`` properties need the ``metric``/``mode`` given to ``run``.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Any

from actors._driver.checkpoint import Checkpoint
from actors._driver.config import check_mode
from actors._driver.errors import ConfigError
from actors._driver.metric_analysis import UNANALYSED, analysed
from actors._driver.result_grid import Result, ResultGrid, metric_statistics
from actors._engine.flat import flatten, lookup
from actors._engine.trial import TrialSnapshot

log = logging.getLogger("audition")
SCOPES = ("all", "last", "avg", "last-5-avg", "last-10-avg")
DEFAULT_METRIC = "_metric"  # Ray's name for a metric never named (a trainable that returns a number)


@dataclass(frozen=True, eq=False, repr=False)
class Trial(TrialSnapshot):
    """One trial of an ``ExperimentAnalysis`` (Ray's ``Trial`` as ``analysis.trials`` holds it):
    the snapshot callbacks see, plus ``metric_analysis`` and ``error``; ``repr`` is its name, as
    Ray's, so ``TuneError("Trials did not complete", [...])`` reads the same."""

    result: Result | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return str(self)

    @property
    def metric_analysis(self) -> dict[str, dict[str, float]]:
        """Ray's ``Trial.metric_analysis``: for each numeric result key (bools too; nested ones as
        ``a/b``; not ``config``, ``trial_id``, ``date``, ``timestamp``, ``pid``, ``hostname``,
        ``node_ip``) its max, min, avg, last and last-5/10-avg over the trial's history, keys in the order
        Ray's ``flatten_dict`` first met them."""
        return {} if self.result is None else analysed(self.result.metrics_history).analysis

    @property
    def metric_n_steps(self) -> dict[str, dict[str, Any]]:
        """Ray's ``Trial.metric_n_steps``: per metric, the last 5 and 10 values (``{"5": deque, "10": deque}``)."""
        return {} if self.result is None else analysed(self.result.metrics_history).windows

    @property
    def error(self) -> Exception | None:
        """The trial's error (an ``actors.TrialError``) if it ended in ERROR (Ray keeps a file)."""
        return None if self.result is None else self.result.error


_ABSENT = object()


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _trial(r: Result, trainable_name: str) -> Trial:
    local = r.path if r.path and "://" not in r.path else None
    return Trial(trial_id=r.trial_id, config=r.config, status=r.status, last_result=r.metrics,
                 num_failures=r.num_failures, trainable_name=trainable_name, path=r.path, local_path=local,
                 custom_trial_name=r._summary.name,
                 custom_dirname=r._summary.dirname if r._summary.dirname_custom else None,
                 experiment_tag=str(r.metrics.get("experiment_tag", "")), checkpoint=r.checkpoint, result=r,
                 resources=r._summary.resources)


class ExperimentAnalysis:
    """What ``run(...)`` returns (Ray Tune's ``ExperimentAnalysis``); also
    ``ExperimentAnalysis("<storage>/<name>")`` reads a finished experiment from storage."""

    def __init__(self, experiment_checkpoint_path: str | os.PathLike[str] | ResultGrid, *,
                 storage_filesystem: Any = None, trials: Any = None, default_metric: str | None = None,
                 default_mode: str | None = None, storage_options: dict[str, Any] | None = None,
                 trainable_name: str = "") -> None:
        if storage_filesystem is not None:
            raise ConfigError("ExperimentAnalysis(storage_filesystem=...): audition reads storage through "
                              "fsspec; pass storage_options={...} (e.g. S3 credentials) instead")
        if trials is not None:
            raise ConfigError("ExperimentAnalysis(trials=...): the trials are read from the experiment; "
                              "pass only its path (or use the analysis run() returned)")
        if default_mode is not None and default_mode not in ("min", "max"):
            raise ConfigError(f"ExperimentAnalysis(default_mode={default_mode!r}): use None, 'min' or 'max'")
        if isinstance(experiment_checkpoint_path, ResultGrid):
            grid = experiment_checkpoint_path
        else:
            from actors._driver.restore import read_results

            path = os.fspath(experiment_checkpoint_path)
            if path.endswith(".json"):  # Ray also takes the state file itself
                path = path.rsplit("/", 1)[0]
            grid, tune_config, trainable_name = read_results(path, storage_options)
            if default_metric is None and default_mode is None:  # only if neither is given, as a fresh run
                default_metric, default_mode = tune_config.metric, tune_config.mode
        self.default_metric = default_metric
        self.default_mode = default_mode
        if default_metric is None and default_mode is not None:
            self.default_metric = DEFAULT_METRIC  # as Ray: a mode alone compares the unnamed metric
        self._grid = grid
        self.trials: list[Trial] = [_trial(r, trainable_name) for r in grid]
        self._by_id = {t.trial_id: t for t in self.trials}

    # ------------------------------------------------------------------ Ray's properties
    @property
    def experiment_path(self) -> str:
        return self._grid.experiment_path

    @property
    def result_grid(self) -> ResultGrid:
        """The same results as a ``ResultGrid`` (what ``Tuner.fit()`` returns): audition's bridge."""
        return self._grid

    def _need_default(self, what: str, instead: str) -> None:
        if not self.default_metric or not self.default_mode:
            raise ConfigError(f"To fetch the `{what}`, pass a `metric` and `mode` to run(...); or call "
                              f"{instead} with the metric and mode")

    @property
    def best_trial(self) -> Trial | None:
        self._need_default("best_trial", "get_best_trial(metric, mode)")
        return self.get_best_trial(self.default_metric, self.default_mode)

    @property
    def best_config(self) -> dict[str, Any] | None:
        self._need_default("best_config", "get_best_config(metric, mode)")
        return self.get_best_config(self.default_metric, self.default_mode)

    @property
    def best_checkpoint(self) -> Checkpoint | None:
        self._need_default("best_checkpoint", "get_best_checkpoint(trial, metric, mode)")
        best = self.best_trial
        if best is None:
            raise ConfigError(f"No best trial found: did any trial report the metric {self.default_metric!r} "
                              f"(mode {self.default_mode!r})?")
        return self.get_best_checkpoint(best, self.default_metric, self.default_mode)

    @property
    def best_result(self) -> dict[str, Any]:
        self._need_default("best_result", "get_best_trial(metric, mode).last_result")
        best = self.best_trial
        if best is None:
            raise ConfigError(f"No best trial found: no trial reported {self.default_metric!r}")
        return best.last_result

    @property
    def best_dataframe(self) -> Any:
        self._need_default("best_dataframe", "trial_dataframes[get_best_trial(metric, mode).trial_id]")
        best = self.best_trial
        if best is None:
            raise ConfigError(f"No best trial found: no trial reported {self.default_metric!r}")
        return self.trial_dataframes[best.trial_id]

    @property
    def best_result_df(self) -> Any:
        import pandas as pd

        return pd.DataFrame.from_records([flatten(self.best_result)], index="trial_id")

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        """Each trial's last result, by trial id."""
        return {t.trial_id: t.last_result for t in self.trials}

    @property
    def results_df(self) -> Any:
        """One row per trial, its last result flattened (``config/x``), indexed by ``trial_id``."""
        import pandas as pd

        return pd.DataFrame.from_records([flatten(t.last_result) for t in self.trials], index="trial_id")

    @property
    def trial_dataframes(self) -> dict[str, Any]:
        """Each trial's every result (one row per report), by trial id; empty if it never reported."""
        frames: dict[str, Any] | None = getattr(self, "_frames", None)
        if frames is None:
            frames = self._frames = {t.trial_id: t.result.metrics_dataframe for t in self.trials if t.result}
        return frames

    # ------------------------------------------------------------------ Ray's methods
    def dataframe(self, metric: str | None = None, mode: str | None = None) -> Any:
        """One row per trial that reported: its last result, or with ``metric`` and ``mode`` the row
        with that metric's best value ever (not the defaults from ``run``, as Ray); plus
        ``config/...`` columns and ``logdir`` (the trial id, as Ray 2.60 fills it)."""
        import pandas as pd

        if mode and mode not in ("min", "max"):
            raise ConfigError(f"dataframe(mode={mode!r}): use None, 'min' or 'max'")
        if mode and not metric:
            raise ConfigError("dataframe(mode=...) needs a metric too, e.g. dataframe(metric='loss', mode='min')")
        rows = []
        for trial_id, df in self.trial_dataframes.items():
            if df.empty:
                continue
            at: Any = -1
            if metric in df and mode:
                # the numbers of a column that mixes in strings, as get_dataframe (Ray raises TypeError)
                column = pd.to_numeric(df[metric], errors="coerce")
                if column.isna().all():
                    log.warning("dataframe: trial %s has no numeric %r; it is left out", trial_id, metric)
                    continue
                row = df.loc[column.idxmax() if mode == "max" else column.idxmin()].to_dict()
            else:
                row = df.iloc[at].to_dict()
            row.update(flatten({"config": self._by_id[trial_id].config}))
            row["logdir"] = trial_id
            rows.append(row)
        return pd.DataFrame(rows)

    def get_all_configs(self, prefix: bool = False) -> dict[str, dict[str, Any]]:
        """Each trial's config by trial id (``prefix=True``: flattened as ``config/x``)."""
        return {t.trial_id: flatten({"config": t.config}) if prefix else t.config for t in self.trials}

    def _metric(self, metric: str | None) -> str:
        if not metric and not self.default_metric:
            raise ConfigError("No `metric` was passed and run(...) was given none: pass metric='<name>'")
        return metric or self.default_metric  # type: ignore[return-value]

    def _mode(self, mode: str | None) -> str:
        if not mode and not self.default_mode:
            raise ConfigError("No `mode` was passed and run(...) was given none: pass mode='min' or 'max'")
        if mode:
            check_mode(mode, "ExperimentAnalysis")
        return mode or self.default_mode  # type: ignore[return-value]

    def get_best_trial(self, metric: str | None = None, mode: str | None = None, scope: str = "last",
                       filter_nan_and_inf: bool = True) -> Trial | None:
        """The trial with the best ``metric`` by ``scope`` (Ray's: "last", "avg", "last-5-avg",
        "last-10-avg" compare that statistic, "all" each trial's best value); with one trial, it;
        ``None`` (with a warning) when no trial reported the metric."""
        if len(self.trials) == 1:
            return self.trials[0]
        metric, mode = self._metric(metric), self._mode(mode)
        if scope not in SCOPES:
            raise ConfigError(f"get_best_trial(scope={scope!r}): use one of {list(SCOPES)}")
        best: Trial | None = None
        best_score = 0.0
        for t in self.trials:
            last = lookup(t.last_result, metric)
            if scope == "last" and _number(last) and metric.split("/", 1)[0] not in UNANALYSED:
                score = float(last)  # settled by the last result: no history read
            else:
                stats = metric_statistics(t.result, metric) if t.result is not None else None
                if stats is None:
                    continue
                score = stats[mode if scope == "all" else scope]
            if filter_nan_and_inf and (math.isnan(score) or math.isinf(score)):
                continue
            if best is None or (score > best_score if mode == "max" else score < best_score):
                best, best_score = t, score
        if best is None:
            log.warning("get_best_trial: no trial has a value of %r to compare; did you pass the metric the "
                        "trials report?", metric)
        return best

    def get_best_config(self, metric: str | None = None, mode: str | None = None,
                        scope: str = "last") -> dict[str, Any] | None:
        best = self.get_best_trial(metric, mode, scope)
        return best.config if best is not None else None

    def get_best_checkpoint(self, trial: Trial | str, metric: str | None = None,
                            mode: str | None = None) -> Checkpoint | None:
        """The trial's kept checkpoint with the best ``metric`` (default: ``run``'s metric, else
        ``training_iteration``) at the result it was saved at; None (logged) if it has none."""
        metric = metric or self.default_metric or "training_iteration"
        mode = self._mode(mode)
        found = self._find(trial)
        scored = []
        for ckpt, metrics in (found.result.best_checkpoints if found.result is not None else []):
            value = lookup(metrics, metric, _ABSENT, sequences=True)  # "l/0" indexes a list, as Ray's
            if value is _ABSENT:  # Ray 2.60's unflattened_lookup raises KeyError here (recorded)
                raise KeyError(f"get_best_checkpoint: a kept checkpoint of trial {found} has no {metric!r} in "
                               f"the result it was saved with ({sorted(metrics)}); pass a metric every "
                               "checkpointed result reports, or use Result.get_best_checkpoint, which passes "
                               "such checkpoints over")
            if isinstance(value, numbers.Real) and not math.isnan(value):
                scored.append((ckpt, float(value)))
        if not scored:
            log.error("No checkpoints have been found for trial %s.", found)
            return None
        sign = -1.0 if mode == "min" else 1.0
        return max(scored, key=lambda pair: sign * pair[1])[0]

    def get_last_checkpoint(self, trial: Trial | str | None = None, metric: str = "training_iteration",
                            mode: str = "max") -> Checkpoint | None:
        """The newest kept checkpoint of ``trial`` (default: the best trial by ``metric``/``mode``)."""
        chosen = trial if trial is not None else self.get_best_trial(metric, mode)
        if chosen is None:
            return None
        return self.get_best_checkpoint(chosen, "training_iteration", "max")

    def _find(self, trial: Trial | str) -> Trial:
        key = trial.trial_id if isinstance(trial, TrialSnapshot) else trial
        found = self._by_id.get(key) if isinstance(key, str) else None
        if found is None and isinstance(key, str):  # Ray also took the trial's directory
            found = next((t for t in self.trials if t.path and t.path.rstrip("/") == key.rstrip("/")), None)
        if found is None:
            raise ConfigError(f"{trial!r} is not a trial of this experiment; pass one of analysis.trials")
        return found

    def __repr__(self) -> str:
        return f"ExperimentAnalysis({self.experiment_path!r}, {len(self.trials)} trials)"


__all__ = ["ExperimentAnalysis", "Trial"]
