"""The searcher contract between the controller actor and a search algorithm.

The controller calls a searcher one method at a time from its message loop, so
implementations need no locking but must return quickly: a slow ``suggest``
stalls every trial's bookkeeping.  ``save``/``restore`` let a resumed experiment
continue exactly where the interrupted one stopped.
"""

from __future__ import annotations

import enum
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeAlias

from actors.search._file_state import CKPT_FILE_TMPL as _CKPT_FILE_TMPL

_MODES = ("min", "max")
DEFAULT_METRIC = "_metric"  # Ray's name for the metric of a searcher given only a mode


class SearcherSignal(enum.StrEnum):
    """Non-config answers of :meth:`Searcher.suggest` (an enum so it survives pickling by identity).

    Ray Tune's ``Searcher.FINISHED`` is the string ``"FINISHED"``: this one equals it and prints as it, so a
    searcher ported from Ray that returns the string, compares an answer with it or prints it does as there."""

    FINISHED = "FINISHED"

    def __repr__(self) -> str:
        return repr(self.value)

    @classmethod
    def _missing_(cls, value: object) -> SearcherSignal | None:
        return cls.FINISHED if value == "finished" else None  # (its value before it was Ray's string)


Suggestion: TypeAlias = "dict[str, Any] | Literal[SearcherSignal.FINISHED] | None"


def check_mode(mode: Any) -> str | None:
    """Validate a ``mode`` argument; ``None`` means "not decided yet"."""
    if mode is not None and mode not in _MODES:
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    return mode


def check_metric(metric: Any) -> str | None:
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise ValueError(f"metric must be a non-empty string naming a reported result key, got {metric!r}")
    return metric


class Searcher(ABC):
    """Base class of search algorithms (Ray Tune's ``Searcher`` contract).

    ``suggest`` returns a config dict, ``None`` ("nothing now, ask again after a
    trial completes") or :attr:`FINISHED` ("no more trials, ever").
    """

    FINISHED: ClassVar[Literal[SearcherSignal.FINISHED]] = SearcherSignal.FINISHED
    #: Ray's name for the file :meth:`save_to_dir` writes (``{}``: the session string)
    CKPT_FILE_TMPL: ClassVar[str] = _CKPT_FILE_TMPL

    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        # lists only in multi-objective searchers (OptunaSearch(metric=[...], mode=[...]), as in Ray Tune)
        self._metric: str | list[str] | None = check_metric(metric)
        self._mode: str | list[str] | None = check_mode(mode)

    @property
    def metric(self) -> str | list[str] | None:
        return self._metric

    @property
    def mode(self) -> str | list[str] | None:
        return self._mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Receive the experiment's metric, mode and param_space if the searcher lacks them.

        Returns ``False`` when they conflict with what the searcher was built with,
        so the controller can report the clash instead of silently picking one.
        Subclasses that accept a space override this and call :meth:`_set_metric_mode`.
        """
        return self._set_metric_mode(metric, mode) and not config

    def _set_metric_mode(self, metric: str | None, mode: str | None) -> bool:
        metric, mode = check_metric(metric), check_mode(mode)
        if (metric and self._metric and metric != self._metric) or (
            mode and self._mode and mode != self._mode
        ):
            return False
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def _adopt_properties(self, metric: str | None, mode: str | None, has_space: bool) -> bool:
        """Ray's model-based searchers' ``set_search_properties`` rule; True: take the config's space.

        Without a space of its own yet, the experiment's metric and mode win over the searcher's; with one,
        they only fill in what it lacks (Ray 2.60 leaves them unset there, and its searcher fails at the first
        suggestion). A mode alone searches Ray's anonymous metric ``"_metric"``.
        """
        if has_space:
            self._set_metric_mode(metric, mode)
        else:
            self._metric = check_metric(metric) or self._metric
            self._mode = check_mode(mode) or self._mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        return not has_space

    def _check_metric_mode(self) -> None:
        """Raise, naming the fix, unless the searcher has a metric and a mode (before a suggestion)."""
        if not self._metric or not self._mode:
            name = type(self).__name__
            raise RuntimeError(f"{name} needs metric and mode (it has metric={self._metric!r}, mode={self._mode!r}): "
                               f"pass them to {name}(...), or to TuneConfig(...) when it takes the Tuner's param_space")

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Called by a ``ConcurrencyLimiter`` around this searcher (also the one the Tuner adds for
        ``TuneConfig(max_concurrent_trials=...)``): return True if the searcher keeps at most
        ``max_concurrent`` trials live itself, and the limiter then leaves it to it (Ray Tune's contract)."""
        return False

    @abstractmethod
    def suggest(self, trial_id: str) -> Suggestion:
        """A config for new trial ``trial_id``, ``None`` for "not now", or :attr:`FINISHED`."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """An intermediate result of a live trial (optional to use)."""
        return None

    @abstractmethod
    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Trial ``trial_id`` ended: ``result`` is its last result, ``error`` says it failed."""

    def add_evaluated_point(self, parameters: dict[str, Any], value: Any, error: bool = False, pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        """Ray's: tell the searcher of a configuration evaluated outside its suggest/complete loop. A searcher
        that can learn from one overrides this (``OptunaSearch``); the others raise, as in Ray."""
        raise NotImplementedError(f"{type(self).__name__} cannot be told of evaluated points (add_evaluated_point)")

    def add_evaluated_trials(self, trials_or_analysis: Any, metric: str) -> None:
        """Ray's: ``add_evaluated_point`` for each trial of an ``ExperimentAnalysis`` (or a trial, or a list
        of them) that has ``metric`` in its last result, as Ray 2.60 reads them: an ERROR trial is told
        failed, a TERMINATED one whose last result is not ``done`` pruned. Warns when no finished trial
        had the metric (a misspelt name), as Ray does."""
        import warnings

        if isinstance(trials_or_analysis, list | tuple):
            trials = list(trials_or_analysis)
        elif hasattr(trials_or_analysis, "last_result") and hasattr(trials_or_analysis, "status"):
            trials = [trials_or_analysis]
        elif hasattr(trials_or_analysis, "trials"):  # an ExperimentAnalysis (the driver's: not imported here)
            trials = list(trials_or_analysis.trials)
        else:
            raise NotImplementedError(f"add_evaluated_trials() takes a trial, a list of trials or an "
                                      f"ExperimentAnalysis, got {type(trials_or_analysis).__name__} (for a "
                                      "ResultGrid, pass ExperimentAnalysis(grid.experiment_path))")
        any_finished = False
        for trial in trials:
            status = str(getattr(trial.status, "value", trial.status))
            last = trial.last_result or {}
            finished = status == "TERMINATED" and bool(last.get("done", False))
            any_finished = any_finished or (finished and metric in last)
            if metric not in last:
                continue
            self.add_evaluated_point(trial.config, last[metric], error=status == "ERROR",
                                     pruned=status == "TERMINATED" and not finished)
        if not any_finished:
            warnings.warn(f"add_evaluated_trials(metric={metric!r}): no finished trial reported {metric!r}; "
                          "is the name right?", stacklevel=2)

    def save(self) -> dict[str, Any]:
        """A picklable snapshot of the whole search state (not a live reference)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement save()/restore(), so experiments using it "
            "cannot be resumed; override both to make it resumable"
        )

    def restore(self, state: dict[str, Any]) -> None:
        """Load a :meth:`save` snapshot so the next suggestions continue the saved run exactly."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement restore(); override save/restore"
        )

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Ray's: this searcher's state in ``checkpoint_dir`` as ``CKPT_FILE_TMPL.format(session_str)``
        (written whole or not at all), for :meth:`restore_from_dir`. audition's engine keeps the state in
        the experiment's own state instead, so it never calls this."""
        from actors.search import _file_state

        _file_state.files().save_to_dir(self, checkpoint_dir, session_str)

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        """Ray's: the newest ``searcher-state-*.pkl`` file in ``checkpoint_dir`` (:meth:`save_to_dir`'s,
        or Ray's), else this searcher's state as the experiment in ``checkpoint_dir`` last saved it (the
        one of its kind there, inside the wrappers the run used). Both are read through the
        ``_file_state.SearcherFiles`` port (this module does no I/O)."""
        from actors.search import _file_state

        files = _file_state.files()
        if files.restore_from_dir(self, checkpoint_dir):
            return
        kind = type(self).__name__
        state = inner_state(files.experiment_searcher_state(checkpoint_dir), kind)
        if state is None:
            raise ValueError(f"the experiment at {checkpoint_dir} was not run with a {kind}, so there is no "
                             f"{kind} state to restore, and it holds no {self.CKPT_FILE_TMPL.format('*')} file")
        _file_state.load_state(self, state)

    def _pickled_state(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The saved state of a searcher that holds a library's objects (a study, an optimizer): metric,
        mode and ``payload`` cloudpickled (it may hold the user's functions)."""
        import cloudpickle

        return {"kind": kind, **self._base_state(), "payload": cloudpickle.dumps(payload)}

    def _unpickled_payload(self, kind: str, state: Any) -> dict[str, Any]:
        """``_pickled_state``'s payload back, with metric and mode restored (a state of another kind refused)."""
        from actors._legacy import loads

        check_state(kind, state, kind)
        self._restore_base(state)
        payload: dict[str, Any] = loads(state["payload"])
        return payload

    def _base_state(self) -> dict[str, Any]:
        return {"metric": self._metric, "mode": self._mode}

    def _restore_base(self, state: dict[str, Any]) -> None:
        self._metric, self._mode = state["metric"], state["mode"]


def inner_state(state: Any, kind: str) -> dict[str, Any] | None:
    """The saved state of the ``kind`` searcher inside a saved state's wrappers (ConcurrencyLimiter,
    Repeater, ConstantsMerged keep the inner one's under ``"searcher"``); None if there is none."""
    while isinstance(state, dict) and state.get("kind") != kind and "searcher" in state:
        state = state["searcher"]
    return state if isinstance(state, dict) and state.get("kind") == kind else None




def ray_save(save: Callable[[Any], dict[str, Any]]) -> Callable[..., Any]:
    """Ray's ``searcher.save(checkpoint_path)`` beside audition's ``save()``: given a file path, the state
    is also written there (cloudpickled), as Ray's guide saves a searcher after ``fit()``; a file
    ``restore(path)`` reads back. Without a path it returns the state, as before."""

    @functools.wraps(save)
    def wrapper(self: Any, checkpoint_path: Any = None) -> Any:
        state = save(self)
        if checkpoint_path is None:
            return state
        import cloudpickle

        with open(checkpoint_path, "wb") as f:  # (an explicit call of the user's, not the engine's I/O)
            cloudpickle.dump(state, f)
        return None

    return wrapper


def ray_restore(restore: Callable[[Any, dict[str, Any]], None]) -> Callable[[Any, Any], None]:
    """``restore(state)``, or Ray's ``restore(checkpoint_path)``: a file ``save(path)`` wrote."""

    @functools.wraps(restore)
    def wrapper(self: Any, state: Any) -> None:
        if isinstance(state, str) or hasattr(state, "__fspath__"):
            from actors._legacy import loads

            with open(state, "rb") as f:
                state = loads(f.read())
        restore(self, state)

    return wrapper


def check_state(owner: str, state: Any, kind: str) -> dict[str, Any]:
    """Reject snapshots taken from a different searcher type with a clear message."""
    if not isinstance(state, dict) or state.get("kind") != kind:
        found = state.get("kind") if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"{owner}.restore(): state was saved by {found!r}, not {kind!r}; pass that searcher's save()"
        )
    return state


def innermost(searcher: Any) -> Any:
    """The search algorithm inside its wrappers (``ConcurrencyLimiter``, ``Repeater``, the Tuner's own)."""
    while hasattr(searcher, "searcher"):
        searcher = searcher.searcher
    return searcher
