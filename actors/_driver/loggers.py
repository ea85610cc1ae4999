"""Logger callbacks: Ray Tune's ``LoggerCallback`` and the built-in JSON, CSV and TensorBoard loggers.

A logger runs in the driver, like every callback, unless its class sets ``in_controller``. The
JSON and CSV loggers do: ``Tuner.restore`` rebuilds histories from ``result.json``, so those rows
must be written in step with the experiment state, inside the controller (before each state write,
see ``actors._shell.experiment_io``), and survive a driver killed mid-run. TensorBoard event files are
a view for people, so that logger stays in the driver, where a slow disk never delays a trial.
"""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar

from actors._driver.callbacks import Callback
from actors._driver.errors import ConfigError
from actors._engine.trial import TrialSnapshot
from storage import CsvWriter, ExperimentLayout, JsonLinesWriter, StorageContext, flatten

# bookkeeping fields that make poor curves
_SKIP = {"trial_id", "timestamp", "done", "pid", "hostname", "member", "training_iteration", "config"}


class LoggerCallback(Callback):
    """Writes trial histories somewhere; override the ``log_*`` hooks (not the ``on_*`` ones).

    Where the hooks run:

    * ``in_controller = False`` (the default): in the driver, one at a time, from the same batched
      events as every callback; a slow logger delays only the driver.
    * ``in_controller = True``: inside the controller actor, synchronously as each result batch is
      recorded, with ``flush()`` before every experiment-state write, so what it wrote is never
      older than the state a restore starts from. Such a logger travels with the experiment (it
      must pickle: open files in ``setup`` or lazily, never in ``__init__``), delays every trial
      while it runs (a call over a second is logged as a warning), and is given the experiment's
      storage in ``setup``. A ``StorageError`` it raises stops the experiment, keeping what was
      written; any other exception is logged and the logger is switched off for the run, unless
      ``required`` is set, which makes every failure stop the experiment.
    """

    in_controller: ClassVar[bool] = False
    required: ClassVar[bool] = False

    def _logged(self) -> dict[str, int]:
        """Driver side: the last iteration logged per trial (a subclass need not call __init__)."""
        return self.__dict__.setdefault("_logged_iterations", {})  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- the hooks to override
    def setup(self, *args: Any, **info: Any) -> None:
        """In the driver, as ``Callback.setup`` (Ray's keywords: ``stop``, ``num_samples``, ...) when a subclass
        overrides it, so that Ray's ``super().setup(*args, **kwargs)`` works; an ``in_controller`` logger's
        is called ``setup(ctx, layout)`` in the controller instead, before the first trial starts."""

    def log_trial_start(self, trial: TrialSnapshot) -> None:
        """A run of ``trial`` starts (first run, resume, retry or restore)."""

    def log_trial_rewind(self, trial: TrialSnapshot, iteration: int) -> None:
        """``trial`` restarts from a checkpoint at ``iteration`` after it logged later rows (a retry,
        or a restore): those rows will be reported again, so drop them. Called before
        ``log_trial_start``."""

    def log_trial_result(self, iteration: int, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        """``trial`` reported ``result``; ``iteration`` counts results over the whole experiment."""

    def log_trial_amend(self, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        """Controller-side loggers only: the trial's last logged result became ``result`` (a driver
        callback set ``should_checkpoint`` on it, which Ray's loggers, called after the callbacks, log)."""

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        """A batch of results of one trial, oldest first; override to write a batch at once."""
        for i, result in enumerate(results):
            self.log_trial_result(iteration - len(results) + 1 + i, trial, result)

    def log_trial_save(self, trial: TrialSnapshot) -> None:
        """Driver-side loggers: ``trial`` committed a checkpoint, now ``trial.checkpoint`` (Ray Tune's
        hook of the same name)."""

    def log_trial_restore(self, trial: TrialSnapshot) -> None:
        """Ray Tune's hook of the same name, reached only through ``on_trial_restore``, which
        neither Ray 2.60 nor audition calls (``log_trial_start`` marks every new run)."""

    def log_trial_end(self, trial: TrialSnapshot, failed: bool = False) -> None:
        """``trial`` ended for good: TERMINATED, or ERROR when ``failed``."""

    def flush(self) -> None:
        """Controller-side loggers: make everything logged so far durable (before a state write)."""

    def close(self) -> None:
        """The experiment ended (or was stopped): flush and release everything."""

    # ---------------------------------------------------------------- driver-side wiring
    def on_trial_start(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                       **info: Any) -> None:
        start = trial.checkpoint_iteration or 0
        logged = self._logged()
        if logged.get(trial.trial_id, 0) > start:
            self.log_trial_rewind(trial, start)
        logged[trial.trial_id] = start
        self.log_trial_start(trial)

    def on_trial_result(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                        result: dict[str, Any], **info: Any) -> None:
        self._logged()[trial.trial_id] = int(result.get("training_iteration", 0))
        self.log_trial_result(iteration, trial, result)

    def on_trial_save(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                      **info: Any) -> None:
        self.log_trial_save(trial)

    def on_trial_restore(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                         **info: Any) -> None:
        self.log_trial_restore(trial)

    def on_trial_complete(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                          **info: Any) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                       **info: Any) -> None:
        self.log_trial_end(trial, failed=True)

    def on_experiment_end(self, trials: list[TrialSnapshot], **info: Any) -> None:
        self.close()


# On an object store a history is rewritten whole, so rewriting it on a timer of its own cost O(rows) a
# running trial every few seconds without bound (20,000 rows: ~90 ms a rewrite to a loopback S3, each
# file, each trial). The controller's files are rewritten when asked instead: with every state write
# (``ExperimentIO._write_state``, which counts them in the write's cost that spaces state writes), when
# rows go, and when the trial ends. Local disk appends each row as it comes either way.
CONTROLLER_FLUSH_INTERVAL = math.inf


class _FileLogger(LoggerCallback):
    """One writer per running trial, in the experiment's trial directories (controller side)."""

    in_controller = True

    def __init__(self) -> None:
        self._ctx: StorageContext | None = None
        self._layout: ExperimentLayout | None = None
        self._writers: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_writers": {}, "_ctx": None, "_layout": None}

    def _open(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> Any:
        raise NotImplementedError

    def setup(self, ctx: StorageContext, layout: ExperimentLayout) -> None:  # type: ignore[override]
        self._ctx, self._layout = ctx, layout

    def _writer(self, trial_id: str) -> Any:
        w = self._writers.get(trial_id)
        if w is None:
            if self._ctx is None or self._layout is None:
                raise ConfigError(f"{type(self).__name__} runs in the controller, which calls setup() "
                                  "first; it cannot be used as a driver-side callback")
            w = self._writers[trial_id] = self._open(self._ctx, self._layout, trial_id)
        return w

    def log_trial_rewind(self, trial: TrialSnapshot, iteration: int) -> None:
        self._writer(trial.trial_id).truncate(iteration)

    def log_trial_result(self, iteration: int, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        self._writer(trial.trial_id).append([result])

    def log_trial_amend(self, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        self._writer(trial.trial_id).truncate(int(result.get("training_iteration") or 0) - 1)
        self.log_trial_results(0, trial, [result])

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        self._writer(trial.trial_id).append(results)

    def log_trial_end(self, trial: TrialSnapshot, failed: bool = False) -> None:
        w = self._writers.pop(trial.trial_id, None)
        if w is not None:
            w.close()

    def flush(self) -> None:
        for w in self._writers.values():
            w.flush()

    def close(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()


class JsonLoggerCallback(_FileLogger):
    """``<trial>/result.json``: every result as one JSON line. Always on: ``Tuner.restore`` and
    ``Result.metrics_history`` read it, so any failure to write it stops the experiment."""

    required = True

    def _open(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> Any:
        return JsonLinesWriter(ctx, layout, trial_id, CONTROLLER_FLUSH_INTERVAL)


class CSVLoggerCallback(_FileLogger):
    """``<trial>/progress.csv``: every result as a CSV row, nested keys as ``a/b`` columns; the
    header widens (and the file is rewritten) when a result brings new keys."""

    def _open(self, ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> Any:
        return CsvWriter(ctx, layout, trial_id, CONTROLLER_FLUSH_INTERVAL)

    # Ray's CSV logger leaves the config out of progress.csv (it is in params.json and result.json)
    def log_trial_result(self, iteration: int, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        self._writer(trial.trial_id).append([_no_config(result)])

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        self._writer(trial.trial_id).append([_no_config(r) for r in results])


def _no_config(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "config"}


def controller_loggers(callbacks: list[Any] | None) -> list[LoggerCallback]:
    """The loggers the controller runs: the ``in_controller`` ones given, plus the JSON and CSV
    loggers unless an instance of each is among them."""
    given = [cb for cb in callbacks or [] if isinstance(cb, LoggerCallback) and cb.in_controller]
    for kind in (JsonLoggerCallback, CSVLoggerCallback):
        if not any(isinstance(cb, kind) for cb in given):
            given.append(kind())
    return given


def driver_callbacks(callbacks: list[Any] | None) -> list[Callback]:
    """The callbacks the driver runs: everything not run by the controller."""
    return [cb for cb in callbacks or [] if not (isinstance(cb, LoggerCallback) and cb.in_controller)]


class TBXLoggerCallback(LoggerCallback):
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

    def _writer(self, trial: TrialSnapshot) -> Any:
        w = self.writers.get(trial.trial_id)
        if w is None:
            from tensorboardX import SummaryWriter

            root = self.logdir or self.experiment_dir or "."
            # the trial's own directory (trial_dirname_creator's name or Ray's default one)
            where = os.path.join(root, trial.dirname or trial.trial_id)
            w = self.writers[trial.trial_id] = SummaryWriter(logdir=where, flush_secs=5)
        return w

    def log_trial_result(self, iteration: int, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        step = int(result.get("training_iteration", 0))
        w = self._writer(trial)
        for key, value in flatten({k: v for k, v in result.items() if k != "config"}).items():
            if key not in _SKIP and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value):
                w.add_scalar(key, value, global_step=step)

    def _close(self, trial_id: str) -> None:
        w = self.writers.pop(trial_id, None)
        if w is not None:
            w.close()

    def log_trial_end(self, trial: TrialSnapshot, failed: bool = False) -> None:
        self._close(trial.trial_id)

    def close(self) -> None:
        for trial_id in list(self.writers):
            self._close(trial_id)


__all__ = ["CSVLoggerCallback", "JsonLoggerCallback", "LoggerCallback", "TBXLoggerCallback",
           "controller_loggers", "driver_callbacks"]
