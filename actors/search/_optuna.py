"""Optuna-backed searcher (ask/tell), an optional extra.

Optuna is imported only when an :class:`OptunaSearch` is built, so
``import actors.search`` stays light.  The space is either an audition/Optuna
space dict (translated in :mod:`actors.search._optuna_space`; constants and
``sample_from`` values are filled in around Optuna's suggestions) or, as in
Ray Tune, a define-by-run function that calls ``trial.suggest_*`` and may
return a dict of constants.  ``metric``/``mode`` may be lists: a
multi-objective study told every metric's value of a trial's last result.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from typing import Any

from actors.search._optuna_space import (
    CategoryIndex,
    SuggestCaptor,
    check_rewards,
    collect,
    convert,
    fill,
    flat_point,
    import_optuna,
    unflatten,
)
from actors.search._searcher import Searcher, Suggestion, check_metric, ray_restore, ray_save
from actors.search._space import Path, format_path, normalize, resolve, validate_param_space

DefineByRun = Callable[[Any], "dict[str, Any] | None"]

log = logging.getLogger(__name__)


def _objectives(metric: Any, mode: Any) -> tuple[list[str], list[str]] | None:
    """Validated multi-objective ``metric``/``mode`` lists, or ``None`` for a single objective."""
    if not isinstance(metric, list | tuple) and not isinstance(mode, list | tuple):
        return None
    if not isinstance(metric, list | tuple) or not isinstance(mode, list | tuple) or len(metric) != len(mode):
        raise ValueError(
            f"OptunaSearch: for multi-objective search pass metric and mode as lists of the same length "
            f"(one mode per metric), got metric={metric!r}, mode={mode!r}"
        )
    if not metric or len(set(metric)) != len(metric):
        raise ValueError(f"OptunaSearch: metric must list distinct metric names, got {metric!r}")
    for m, d in zip(metric, mode, strict=True):
        check_metric(m)
        if d not in ("min", "max"):
            raise ValueError(f"OptunaSearch: every mode must be 'min' or 'max', got {d!r} for metric {m!r}")
    return list(metric), list(mode)


class OptunaSearch(Searcher):
    """Searcher driven by an Optuna study through ask/tell (TPE by default).

    Intermediate results are reported with ``trial.report(value, step=training_iteration)``
    (single objective only: Optuna has no intermediate values for several);
    a failed trial is told FAIL, one that ended without every metric PRUNED.
    ``save()`` pickles the study (in-memory storage and sampler RNG included), so a
    restored searcher makes exactly the suggestions the original would have made.
    """

    def __init__(
        self,
        space: dict[str, Any] | DefineByRun | None = None,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        sampler: Any = None,
        study_name: str | None = None,
        storage: Any = None,
        seed: int | None = None,
        evaluated_rewards: list[Any] | None = None,
    ) -> None:
        objectives = _objectives(metric, mode)
        if objectives is None:
            super().__init__(metric, mode)  # type: ignore[arg-type]  # lists were handled above
        else:
            super().__init__()
            self._metric, self._mode = objectives
        self._optuna = import_optuna()
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"OptunaSearch: seed must be an int or None, got {seed!r}")
        if sampler is not None and not isinstance(sampler, self._optuna.samplers.BaseSampler):
            raise TypeError(f"OptunaSearch: sampler must be an optuna sampler, got {type(sampler).__name__}")
        if sampler is not None and seed:  # (as Ray 2.60: a warning, and seed=0 passes unremarked)
            log.warning("OptunaSearch: seed=%d is ignored because a sampler was passed, as in Ray Tune; "
                        "seed the sampler itself (e.g. optuna.samplers.TPESampler(seed=%d))", seed, seed)
        if storage is not None and not isinstance(storage, self._optuna.storages.BaseStorage):
            hint = (f" (for a URL: storage=optuna.storages.RDBStorage({storage!r}))"
                    if isinstance(storage, str) else "")
            raise TypeError(f"OptunaSearch: storage must be an optuna storage (optuna.storages.BaseStorage), got "
                            f"{type(storage).__name__}{hint}")
        self._storage = storage
        if points_to_evaluate is not None and (
            not isinstance(points_to_evaluate, list)
            or not all(isinstance(p, dict) for p in points_to_evaluate)
        ):
            raise ValueError("OptunaSearch: points_to_evaluate must be a list of config dicts")
        if space is not None and not isinstance(space, dict) and not callable(space):
            raise TypeError(
                f"OptunaSearch: space must be a dict of parameters or a define-by-run function "
                f"(trial) -> dict | None, got {type(space).__name__}"
            )
        if study_name is not None and not isinstance(study_name, str):
            raise TypeError(f"OptunaSearch: study_name must be a str, got {type(study_name).__name__}")
        # Ray 2.60 names every study "optuna" unless given a (non-empty) name
        self._study_name = study_name or "optuna"
        self._sampler = sampler or self._optuna.samplers.TPESampler(seed=seed)
        self._seed = seed if seed is not None else random.SystemRandom().getrandbits(63)
        self._points = [flat_point(p) for p in points_to_evaluate or []]
        self._rewards = check_rewards(evaluated_rewards, self._points, callable(space))
        self._space: dict[str, Any] | None = None
        self._define: DefineByRun | None = space if callable(space) else None
        self._study: Any = None
        self._trials: dict[str, Any] = {}
        self._steps: dict[str, int] = {}
        if isinstance(space, dict) and space:
            self._set_space(space)

    @property
    def multi_objective(self) -> bool:
        """Whether the study optimises several metrics (``metric``/``mode`` are lists)."""
        return isinstance(self._metric, list)

    def _set_space(self, space: dict[str, Any]) -> None:
        validate_param_space(space)
        normalized = normalize(space)
        leaves: dict[Path, Any] = {}
        collect(normalized, (), self._optuna, leaves)
        converted = {path: convert(self._optuna, path, leaf) for path, leaf in leaves.items()}
        self._space = normalized
        self._names = {format_path(path): path for path in converted}
        self._dists = {format_path(path): dist for path, (dist, _) in converted.items()}
        self._decoders = {format_path(path): decode for path, (_, decode) in converted.items()}
        for point in self._points:
            unknown = sorted(set(point) - set(self._dists))
            if unknown:
                raise ValueError(
                    f"OptunaSearch: points_to_evaluate names {unknown}, which are not searched parameters; "
                    f"use names from {sorted(self._dists)}"
                )
            missing = sorted(set(self._dists) - set(point))
            if self._rewards and missing:  # (an evaluated point is a whole trial; Ray refuses it too)
                raise ValueError(
                    f"OptunaSearch: with evaluated_rewards, every point of points_to_evaluate needs a value for "
                    f"each searched parameter; {point} has none for {missing}"
                )

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Adopt the experiment's space unless one was given here (then ``False``: two spaces clash).

        A multi-objective searcher keeps its metric lists; TuneConfig's metric
        (used for the best result and schedulers) must be one of them.
        """
        has_space = self._space is not None or self._define is not None or self._study is not None
        if config and has_space:
            return False
        if isinstance(self._metric, list) and isinstance(self._mode, list):
            known = dict(zip(self._metric, self._mode, strict=True))
            if metric is not None and (metric not in known or mode not in (None, known[metric])):
                return False
        elif not self._set_metric_mode(metric, mode):
            return False
        if config:
            self._set_space(config)
        return True

    def _ensure_study(self) -> Any:
        if self._study is not None:
            return self._study
        if self._space is None and self._define is None:
            raise ValueError(
                "OptunaSearch has no search space: pass space= (a dict or a define-by-run function) "
                "or a param_space to the Tuner"
            )
        if self._metric is None or self._mode is None:
            raise ValueError(
                "OptunaSearch needs metric and mode: pass them to OptunaSearch(...), or to TuneConfig(...) when "
                "OptunaSearch takes its space from the Tuner's param_space (built with its own space, it does not "
                "take TuneConfig's, as in Ray Tune)"
            )
        directions: dict[str, Any]
        if isinstance(self._mode, list):
            directions = {"directions": ["minimize" if m == "min" else "maximize" for m in self._mode]}
        else:
            directions = {"direction": "minimize" if self._mode == "min" else "maximize"}
        # as Ray 2.60: no pruner (trials end by the scheduler), and a stored study of this name is continued
        self._study = self._optuna.create_study(
            storage=self._storage, sampler=self._sampler, pruner=self._optuna.pruners.NopPruner(),
            study_name=self._study_name, load_if_exists=True, **directions)
        if self._rewards:  # already evaluated: told to the study as finished trials, never run
            for point, reward in zip(self._points, self._rewards, strict=True):
                self.add_evaluated_point(point, reward)
        else:
            for point in self._points:
                self._study.enqueue_trial(point if self._define is not None else self._encode(point))
        return self._study

    def add_evaluated_point(self, parameters: dict[str, Any], value: float | list[float], error: bool = False,
                            pruned: bool = False, intermediate_values: list[float] | None = None) -> None:
        """Tell the study of a configuration evaluated elsewhere, as Ray's method of this name: a finished
        (or, with ``error``/``pruned``, failed or pruned) trial that informs later suggestions."""
        if self._define is not None:
            raise TypeError("OptunaSearch: a define-by-run space cannot take evaluated points (nor "
                            "evaluated_rewards); pass a dict space, or the Tuner's param_space")
        if self._space is None:
            raise RuntimeError("OptunaSearch.add_evaluated_point: no search space yet; pass space= to "
                               "OptunaSearch, or call it once the Tuner has given the searcher its param_space")
        if self._metric is None or self._mode is None:
            raise RuntimeError("OptunaSearch.add_evaluated_point: the searcher has no metric and mode yet; pass "
                               "them to OptunaSearch(...)")
        point = flat_point(parameters)
        unknown = sorted(set(point) - set(self._dists))
        if unknown:
            raise ValueError(f"OptunaSearch.add_evaluated_point: {unknown} are not searched parameters; use names "
                             f"from {sorted(self._dists)}")
        study = self._ensure_study()
        states = self._optuna.trial.TrialState
        state = states.FAIL if error else states.PRUNED if pruned else states.COMPLETE
        told: dict[str, Any] = {}
        if state is not states.FAIL:  # (optuna refuses a value for a failed trial)
            told = {"values": list(value)} if isinstance(value, list | tuple) else {"value": value}
        study.add_trial(self._optuna.trial.create_trial(
            state=state, params=self._encode(point), distributions={n: self._dists[n] for n in point},
            intermediate_values=dict(enumerate(intermediate_values)) if intermediate_values else None, **told))

    def _encode(self, point: dict[str, Any]) -> dict[str, Any]:
        """Turn a user config point into Optuna params (category indices where needed)."""
        out = {}
        for name, value in point.items():
            decoder = self._decoders[name]
            if isinstance(decoder, CategoryIndex):
                matches = [i for i, c in enumerate(decoder.categories) if c == value]
                if not matches:
                    raise ValueError(
                        f"OptunaSearch: points_to_evaluate value {value!r} for {name!r} is not a choice"
                    )
                value = matches[0]
            out[name] = value
        return out

    def suggest(self, trial_id: str) -> Suggestion:
        study = self._ensure_study()
        if trial_id in self._trials:
            raise ValueError(
                f"suggest(): trial_id {trial_id!r} is already live; every trial needs a fresh id"
            )
        if self._define is not None:
            trial = study.ask()
            defined = self._run_define(trial)
            self._trials[trial_id] = trial
            return defined
        trial = study.ask(fixed_distributions=self._dists)
        self._trials[trial_id] = trial
        values = {self._names[name]: self._decoders[name](value) for name, value in trial.params.items()}
        assert self._space is not None
        filled = fill(self._space, (), values)
        config: dict[str, Any] = resolve(
            filled, {}, random.Random(f"audition-optuna:{self._seed}:{trial.number}")
        )
        return config

    def _run_define(self, trial: Any) -> dict[str, Any]:
        """Ray's define-by-run config: every captured ``suggest_*`` value, then the returned constants."""
        assert self._define is not None
        captor = SuggestCaptor(trial)
        name = getattr(self._define, "__name__", type(self._define).__name__)
        try:
            constants = self._define(captor)
        except Exception as exc:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            exc.add_note(f"(raised by OptunaSearch's define-by-run function {name}(trial))")
            raise
        problem = None
        if constants is not None and not isinstance(constants, dict):
            problem = f"returned a {type(constants).__name__}"
        elif constants and not all(isinstance(k, str) for k in constants):
            problem = "returned a dict with a key that is not a str"
        if problem:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            raise TypeError(
                f"OptunaSearch: the define-by-run function {name}(trial) {problem}; it should only call "
                "trial.suggest_* and return None or a dict of constants with str keys"
            )
        return unflatten({**captor.captured, **(constants or {})})

    def _number(self, result: dict[str, Any], metric: str) -> float | None:
        if metric not in result:
            return None
        try:
            value = float(result[metric])
        except (TypeError, ValueError):
            raise ValueError(
                f"OptunaSearch: metric {metric!r} must be a number, got {result[metric]!r}"
            ) from None
        return value if math.isfinite(value) else None

    def _values(self, result: dict[str, Any] | None) -> float | list[float] | None:
        """The value (or, multi-objective, the values) Optuna is told; ``None`` if any is missing."""
        if not result or self._metric is None:
            return None
        if isinstance(self._metric, str):
            return self._number(result, self._metric)
        values = [self._number(result, m) for m in self._metric]
        return None if any(v is None for v in values) else [v for v in values if v is not None]

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        trial = self._trials.get(trial_id)
        if trial is None or self.multi_objective:
            return
        value = self._values(result)
        if value is None:
            return
        step = result.get("training_iteration")
        step = int(step) if isinstance(step, int | float) else self._steps.get(trial_id, 0) + 1
        self._steps[trial_id] = step
        trial.report(value, step=step)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        trial = self._trials.pop(trial_id, None)
        self._steps.pop(trial_id, None)
        if trial is None:
            return
        states = self._optuna.trial.TrialState
        value = None if error else self._values(result)
        if error:
            self._study.tell(trial, state=states.FAIL)
        elif value is None:
            self._study.tell(trial, state=states.PRUNED)
        else:
            self._study.tell(trial, value)

    @property
    def study(self) -> Any:
        """The underlying ``optuna.Study`` (``None`` before the first suggestion)."""
        return self._study

    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (cloudpickle: the space may hold sample_from callables)."""
        payload = {
            "space": self._space,
            "define": self._define,
            "points": self._points,
            "seed": self._seed,
            "sampler": self._sampler,
            "study": self._study,
            "study_name": self._study_name,
            "storage": self._storage,
            "rewards": self._rewards,
            "trials": self._trials,
            "steps": self._steps,
        }
        return self._pickled_state("OptunaSearch", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        payload = self._unpickled_payload("OptunaSearch", state)
        self._points, self._seed = payload["points"], payload["seed"]
        self._define = payload.get("define")
        if payload["space"] is not None:
            self._set_space(payload["space"])
        else:
            self._space = None
        self._sampler, self._study = payload["sampler"], payload["study"]
        self._study_name = payload.get("study_name", self._study_name)  # (not in states saved before)
        self._storage, self._rewards = payload.get("storage"), payload.get("rewards")
        self._trials, self._steps = payload["trials"], payload["steps"]
