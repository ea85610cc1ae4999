"""Optuna-backed searcher (ask/tell), an optional extra.

Optuna is imported only when an :class:`OptunaSearch` is built, so
``import actors.search`` stays light.  Audition domains are translated to Optuna
distributions keyed by flattened paths (``model/layers``); constants and
``sample_from`` values are filled in around Optuna's suggestions, so
:meth:`OptunaSearch.suggest` returns complete configs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from actors.search._domain import (
    Categorical,
    Domain,
    Float,
    Function,
    GridSearch,
    Integer,
    SearchSpaceError,
    _quantized,
)
from actors.search._searcher import Searcher, Suggestion, check_state
from actors.search._space import Path, format_path, normalize, resolve, validate_param_space

_PRIMITIVES = (type(None), bool, int, float, str)


def _import_optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        raise ImportError(
            f"OptunaSearch needs the optuna package ({exc}); install it with pip install 'audition[optuna]'"
        ) from exc
    return optuna


def _has_domain(value: Any) -> bool:
    if isinstance(value, Domain):
        return True
    if isinstance(value, dict):
        return any(_has_domain(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_domain(v) for v in value)
    return False


Decoder = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


class _Requantize:
    """Snap Optuna's ``low + k * step`` back onto clean multiples of ``q`` (picklable, unlike a lambda)."""

    def __init__(self, q: float) -> None:
        self.q = q

    def __call__(self, value: Any) -> float:
        return _quantized(round(value / self.q), self.q)


class _Index:
    """Map a category index back to a category that Optuna cannot store itself."""

    def __init__(self, categories: tuple[Any, ...]) -> None:
        self.categories = categories

    def __call__(self, value: Any) -> Any:
        return self.categories[value]


def _convert(optuna: Any, path: Path, domain: Any) -> tuple[Any, Decoder]:
    """One audition domain -> (Optuna distribution, decoder of Optuna's value)."""
    dists = optuna.distributions
    where = f"OptunaSearch: {format_path(path)!r}"
    if isinstance(domain, dists.BaseDistribution):
        return domain, _identity
    if isinstance(domain, GridSearch):
        raise SearchSpaceError(
            f"{where}: grid_search is not supported by OptunaSearch; use choice() "
            "or the default BasicVariantGenerator for grid search"
        )
    if isinstance(domain, Float):
        if domain.q is not None and domain.log:
            raise SearchSpaceError(
                f"{where}: {domain.describe()} is not supported (Optuna cannot quantize log ranges); "
                "use loguniform() or quniform()"
            )
        if domain.q is not None:
            return dists.FloatDistribution(domain.low, domain.high, step=domain.q), _Requantize(domain.q)
        return dists.FloatDistribution(domain.lower, domain.upper, log=domain.log), _identity
    if isinstance(domain, Integer):
        if domain.q is not None and domain.log:
            raise SearchSpaceError(
                f"{where}: {domain.describe()} is not supported (Optuna cannot quantize log ranges); "
                "use lograndint() or qrandint()"
            )
        return dists.IntDistribution(domain.low, domain.high, log=domain.log, step=domain.q or 1), _identity
    if isinstance(domain, Categorical):
        if any(_has_domain(c) for c in domain.categories):
            raise SearchSpaceError(
                f"{where}: choice() categories holding domains are not supported by OptunaSearch"
            )
        if all(isinstance(c, _PRIMITIVES) for c in domain.categories):
            return dists.CategoricalDistribution(domain.categories), _identity
        return dists.CategoricalDistribution(tuple(range(len(domain.categories)))), _Index(domain.categories)
    raise SearchSpaceError(
        f"{where}: {domain.describe()} is not supported by OptunaSearch; "
        "use uniform/loguniform/quniform/randint/lograndint/qrandint/choice"
    )


def _collect(space: Any, path: Path, optuna: Any, out: dict[Path, Any]) -> None:
    """Paths of every searchable leaf (audition domain or Optuna distribution), in key order."""
    if isinstance(space, Domain | optuna.distributions.BaseDistribution) and not isinstance(space, Function):
        out[path] = space
    elif isinstance(space, dict):
        for key, value in space.items():
            _collect(value, (*path, key), optuna, out)
    elif isinstance(space, list | tuple):
        for i, value in enumerate(space):
            _collect(value, (*path, i), optuna, out)


def _fill(space: Any, path: Path, values: dict[Path, Any]) -> Any:
    """Copy ``space`` with the searched leaves replaced by ``values`` (sample_from left in place)."""
    if path in values:
        return values[path]
    if isinstance(space, dict):
        return {k: _fill(v, (*path, k), values) for k, v in space.items()}
    if isinstance(space, list | tuple):
        items = [_fill(v, (*path, i), values) for i, v in enumerate(space)]
        return items if isinstance(space, list) else tuple(items)
    return space


def _flat_point(point: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` or ``{"a/b": 1}`` -> ``{"a/b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_point(value, f"{name}/"))
        else:
            out[name] = value
    return out


class OptunaSearch(Searcher):
    """Searcher driven by an Optuna study through ask/tell (TPE by default).

    Intermediate results are reported with ``trial.report(value, step=training_iteration)``;
    a failed trial is told FAIL, one that ended without the metric PRUNED.
    ``save()`` pickles the study (in-memory storage and sampler RNG included), so a
    restored searcher makes exactly the suggestions the original would have made.
    """

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        sampler: Any = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(metric, mode)
        self._optuna = _import_optuna()
        if sampler is not None and seed is not None:
            raise ValueError(
                "OptunaSearch: pass either sampler= or seed=, not both; seed the sampler you pass"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"OptunaSearch: seed must be an int or None, got {seed!r}")
        if sampler is not None and not isinstance(sampler, self._optuna.samplers.BaseSampler):
            raise TypeError(f"OptunaSearch: sampler must be an optuna sampler, got {type(sampler).__name__}")
        if points_to_evaluate is not None and (
            not isinstance(points_to_evaluate, list)
            or not all(isinstance(p, dict) for p in points_to_evaluate)
        ):
            raise ValueError("OptunaSearch: points_to_evaluate must be a list of config dicts")
        self._sampler = sampler or self._optuna.samplers.TPESampler(seed=seed)
        self._seed = seed if seed is not None else random.SystemRandom().getrandbits(63)
        self._points = [_flat_point(p) for p in points_to_evaluate or []]
        self._space: dict[str, Any] | None = None
        self._study: Any = None
        self._trials: dict[str, Any] = {}
        self._steps: dict[str, int] = {}
        if space:
            self._set_space(space)

    def _set_space(self, space: dict[str, Any]) -> None:
        validate_param_space(space)
        normalized = normalize(space)
        leaves: dict[Path, Any] = {}
        _collect(normalized, (), self._optuna, leaves)
        converted = {path: _convert(self._optuna, path, leaf) for path, leaf in leaves.items()}
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

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Adopt the experiment's space unless one was given here (then ``False``: two spaces clash)."""
        if config and (self._space is not None or self._study is not None):
            return False
        if not self._set_metric_mode(metric, mode):
            return False
        if config:
            self._set_space(config)
        return True

    def _ensure_study(self) -> Any:
        if self._study is not None:
            return self._study
        if self._space is None:
            raise ValueError("OptunaSearch has no search space: pass space= or a param_space to the Tuner")
        if self._metric is None or self._mode is None:
            raise ValueError(
                "OptunaSearch needs metric and mode: pass them to OptunaSearch(...) or TuneConfig(...)"
            )
        direction = "minimize" if self._mode == "min" else "maximize"
        self._study = self._optuna.create_study(direction=direction, sampler=self._sampler)
        for point in self._points:
            self._study.enqueue_trial(self._encode(point))
        return self._study

    def _encode(self, point: dict[str, Any]) -> dict[str, Any]:
        """Turn a user config point into Optuna params (category indices where needed)."""
        out = {}
        for name, value in point.items():
            decoder = self._decoders[name]
            if isinstance(decoder, _Index):
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
        trial = study.ask(fixed_distributions=self._dists)
        self._trials[trial_id] = trial
        values = {self._names[name]: self._decoders[name](value) for name, value in trial.params.items()}
        assert self._space is not None
        filled = _fill(self._space, (), values)
        config: dict[str, Any] = resolve(
            filled, {}, random.Random(f"audition-optuna:{self._seed}:{trial.number}")
        )
        return config

    def _value(self, result: dict[str, Any] | None) -> float | None:
        if not result or self._metric not in result:
            return None
        try:
            value = float(result[self._metric])
        except (TypeError, ValueError):
            raise ValueError(
                f"OptunaSearch: metric {self._metric!r} must be a number, got {result[self._metric]!r}"
            ) from None
        return value if math.isfinite(value) else None

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        trial = self._trials.get(trial_id)
        value = self._value(result)
        if trial is None or value is None:
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
        value = None if error else self._value(result)
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

    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (cloudpickle: the space may hold sample_from callables)."""
        import cloudpickle

        payload = {
            "space": self._space,
            "points": self._points,
            "seed": self._seed,
            "sampler": self._sampler,
            "study": self._study,
            "trials": self._trials,
            "steps": self._steps,
        }
        return {"kind": "OptunaSearch", **self._base_state(), "payload": cloudpickle.dumps(payload)}

    def restore(self, state: dict[str, Any]) -> None:
        import cloudpickle

        check_state("OptunaSearch", state, "OptunaSearch")
        self._restore_base(state)
        payload = cloudpickle.loads(state["payload"])
        self._points, self._seed = payload["points"], payload["seed"]
        if payload["space"] is not None:
            self._set_space(payload["space"])
        else:
            self._space = None
        self._sampler, self._study = payload["sampler"], payload["study"]
        self._trials, self._steps = payload["trials"], payload["steps"]
