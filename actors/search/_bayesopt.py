"""BayesOpt-backed searcher (a Gaussian process over real ranges), an optional extra.

``bayes_opt`` (the ``bayesian-optimization`` package, 1.x: Ray Tune 2.60's searcher uses its
``UtilityFunction``, gone in 2.0) is imported only when a :class:`BayesOptSearch` is built. It follows Ray's
``BayesOptSearch`` step by step: the first ``random_search_steps`` trials are the optimizer's random points
and their results are told together, a configuration suggested again is skipped (``None``) and one suggested
more than ``patience`` times ends the search, so the same ``random_state`` gives the same trials as under
Ray. Differences, on purpose: a nested parameter may be given nested in ``points_to_evaluate``, a point that
lacks a parameter is refused when the searcher is set up (Ray fails when its result is told), ``analysis``
also works for nested spaces and spaces with constants, and bad arguments are named in the error.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

from actors._engine.flat import unflatten
from actors.search._domain import Domain, Float, Function, GridSearch, Normal
from actors.search._optuna_space import flat_point
from actors.search._searcher import (
    Searcher,
    Suggestion,
    ray_restore,
    ray_save,
)
from actors.search._space import Path, flatten, normalize, validate_param_space

log = logging.getLogger("audition")


def import_bayes_opt() -> Any:
    try:
        import bayes_opt
    except ImportError as exc:
        raise ImportError("BayesOptSearch needs the bayesian-optimization package (1.x): "
                          "pip install 'audition[bayesopt]'") from exc
    if not hasattr(bayes_opt, "UtilityFunction"):
        raise ImportError(f"BayesOptSearch needs bayesian-optimization 1.x, as Ray Tune 2.60's does (it uses its "
                          f"UtilityFunction, removed in 2.0); this is {getattr(bayes_opt, '__version__', '2+')}: "
                          "pip install 'bayesian-optimization<2'")
    return bayes_opt


def bounds_of(space: Any) -> dict[str, tuple[float, float]]:
    """Each searched parameter's ``(lower, upper)`` by its ``a/b`` name, as Ray converts a space: real
    ranges only, their quantization and log scale dropped with a warning."""
    bounds: dict[str, tuple[float, float]] = {}

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*path, k))
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                walk(v, (*path, i))
        elif isinstance(value, Domain):
            name = "/".join(str(p) for p in path)
            bounds[name] = _bounds(value, name)

    walk(space, ())
    return bounds


def _bounds(domain: Domain, name: str) -> tuple[float, float]:
    if isinstance(domain, GridSearch):
        raise ValueError(f"BayesOptSearch: grid_search at {name!r} cannot be converted to a BayesOpt search space "
                         "(as in Ray Tune); run the grid without a searcher")
    if isinstance(domain, Float):
        if domain.q is not None:
            log.warning("BayesOpt search does not support quantization. Dropped quantization.")
        if domain.log:
            log.warning("BayesOpt does not support specific sampling methods. The LogUniform sampler will be dropped.")
        return (domain.lower, domain.upper)
    if isinstance(domain, Normal):
        raise ValueError(f"BayesOptSearch: {domain.describe()} at {name!r} has no bounds, and BayesOpt searches a "
                         "range; use uniform(lower, upper) (Ray Tune fails on it inside bayes_opt)")
    kind = "Function" if isinstance(domain, Function) else type(domain).__name__
    raise ValueError(f"BayesOptSearch: BayesOpt does not support parameters of type `{kind}` ({domain.describe()} at "
                     f"{name!r}), as in Ray Tune; it searches real ranges: uniform(lower, upper)")


class BayesOptSearch(Searcher):
    """Searcher driven by ``bayes_opt``'s Gaussian process, with Ray Tune's arguments and defaults.

    Only real ranges (``uniform``; ``loguniform`` and ``quniform`` are searched as plain ranges, with a
    warning, as in Ray) can be searched. ``save()`` pickles the optimizer and the counters, so a restored
    searcher suggests what the original would have.
    """

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        utility_kwargs: dict[str, Any] | None = None,
        random_state: int = 42,
        random_search_steps: int = 10,
        verbose: int = 0,
        patience: int = 5,
        skip_duplicate: bool = True,
        analysis: Any = None,
        repeat_float_precision: int = 5,
    ) -> None:
        super().__init__(metric, mode)
        self._byo = import_bayes_opt()
        if isinstance(repeat_float_precision, bool) or not isinstance(repeat_float_precision, int):
            raise TypeError("repeat_float_precision must be an integer.")
        if repeat_float_precision < 0:
            raise ValueError("repeat_float_precision must be non-negative.")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience <= 0:
            raise ValueError(f"BayesOptSearch: patience must be an integer greater than 0, got {patience!r}")
        if isinstance(random_search_steps, bool) or not isinstance(random_search_steps, int) or random_search_steps < 0:
            raise ValueError(f"BayesOptSearch: random_search_steps must be an integer >= 0, got "
                             f"{random_search_steps!r}")
        if points_to_evaluate is not None and (not isinstance(points_to_evaluate, list | tuple)
                                               or not all(isinstance(p, dict) for p in points_to_evaluate)):
            raise ValueError("BayesOptSearch: points_to_evaluate must be a list of config dicts")
        self._patience, self._skip_duplicate, self._precision = patience, skip_duplicate, repeat_float_precision
        self._utility = self._byo.UtilityFunction(
            **(utility_kwargs if utility_kwargs is not None else {"kind": "ucb", "kappa": 2.576, "xi": 0.0}))
        self._random_state, self._verbose, self._analysis = random_state, verbose, analysis
        self._points = [flat_point(p) for p in points_to_evaluate or []]
        self._random_steps = random_search_steps
        self._random_given = 0  # random trials suggested before the first results are told
        self._buffered: list[tuple[dict[str, Any], dict[str, Any]]] = []  # their (params, result), told together
        self._seen: defaultdict[tuple[Any, ...], int] = defaultdict(int)  # how often each config was suggested
        self._live: dict[str, dict[str, Any]] = {}  # trial id -> the params suggested to it
        self._warned_duplicate = self._warned_patience = False
        self._optimizer: Any = None
        if space:
            self._set_space(space)

    def _set_space(self, space: dict[str, Any]) -> None:
        validate_param_space(space)
        normalized = normalize(space)
        bounds = bounds_of(normalized)
        if not bounds:
            raise RuntimeError("BayesOptSearch has no search space: its space holds no uniform(lower, upper) range; "
                               "pass space= to BayesOptSearch, or a param_space with ranges to the Tuner")
        for point in self._points:
            unknown, missing = sorted(set(point) - set(bounds)), sorted(set(bounds) - set(point))
            if unknown or missing:
                raise ValueError(f"BayesOptSearch: each point of points_to_evaluate needs a value for every searched "
                                 f"parameter ({sorted(bounds)}) and nothing else; {point} "
                                 + (f"lacks {missing}" if missing else f"names {unknown}"))
        self._adopt_properties(None, None, has_space=True)  # (a mode alone: Ray's "_metric")
        self._optimizer = self._byo.BayesianOptimization(f=None, pbounds=bounds,
                                                         verbose=self._verbose,
                                                         random_state=self._random_state)
        if self._analysis is not None:
            self.register_analysis(self._analysis)

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, Any]:
        """Ray's: each searched range's ``(lower, upper)`` by its ``a/b`` name; with ``join``, every leaf of
        ``spec`` by its ``a/b`` name, the ranges in place of their domains."""
        validate_param_space(spec)
        normalized = normalize(spec)
        bounds = bounds_of(normalized)
        if not join:
            return bounds
        return {"/".join(map(str, path)): bounds.get("/".join(map(str, path)), value)
                for path, value in flatten(normalized).items()}

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Take the experiment's space, metric and mode, as Ray's (``False`` for a space when the searcher
        already has one; TuneConfig's metric and mode win then, and fill in what a searcher built with its
        own space lacks, where Ray 2.60 leaves them unset and fails at its first suggestion)."""
        if not self._adopt_properties(metric, mode, has_space=self._optimizer is not None):
            return not config  # (the Tuner merges a constants-only param_space into each suggestion)
        self._set_space(config or {})
        return True

    # ------------------------------------------------------------------ suggest / complete
    def _key(self, params: dict[str, Any]) -> tuple[Any, ...]:
        """A config as Ray compares them for repeats: floats to ``repeat_float_precision`` digits."""
        return tuple(sorted((k, f"{v:.{self._precision}f}" if isinstance(v, float) else repr(v))
                            for k, v in params.items()))

    def suggest(self, trial_id: str) -> Suggestion:
        if self._optimizer is None:
            raise RuntimeError("BayesOptSearch has no search space: pass space= to BayesOptSearch, or a param_space "
                               "with uniform(lower, upper) ranges to the Tuner")
        self._check_metric_mode()
        params = self._points.pop(0) if self._points else self._optimizer.suggest(self._utility)
        key = self._key(params)
        again = key in self._seen
        self._seen[key] += 1
        if max(self._seen.values()) > self._patience:
            if not self._warned_patience:
                self._warned_patience = True
                log.warning("BayesOptSearch is stopping early: a configuration was suggested more than patience (%d) "
                            "times, which usually means the search has converged; raise patience, set "
                            "skip_duplicate=False or widen the space to run more trials", self._patience)
            return Searcher.FINISHED
        if again and self._skip_duplicate:
            if not self._warned_duplicate:
                self._warned_duplicate = True
                log.warning("BayesOptSearch is suggesting configurations it already suggested (the Gaussian process "
                            "has likely converged); they are skipped, and one suggested more than patience (%d) "
                            "times ends the search (skip_duplicate=False, a larger patience or a wider space keep "
                            "it exploring)", self._patience)
            return None
        if len(self._buffered) < self._random_steps:  # (Ray: random trials wait until all of them are told)
            if self._random_given == self._random_steps:
                return None
            if params:
                self._random_given += 1
        self._live[trial_id] = params
        # the searched values only, nested by their "a/b" names (Ray's unflatten_dict), in bayes_opt's order, as
        # Ray's searcher returns them: the Tuner merges them into the param_space (ConstantsMerged), whose
        # constants and key order the trial's config then has
        return unflatten(params)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        params = self._live.pop(trial_id, None)
        if result is None or params is None or error:
            return
        if len(self._buffered) >= self._random_steps:
            self._register(params, result)
            return
        self._buffered.append((params, result))
        if len(self._buffered) == self._random_steps:
            for p, r in self._buffered:
                self._register(p, r)

    def _register(self, params: dict[str, Any], result: dict[str, Any]) -> None:
        if self._metric not in result:
            raise RuntimeError(f"BayesOptSearch: a trial's last result has no {self._metric!r} (its keys: "
                               f"{', '.join(sorted(map(str, result))[:12])}); report it from the trainable, or give "
                               "the searcher the metric it reports")
        value = result[self._metric]
        if not isinstance(value, int | float) or math.isnan(value) or math.isinf(value):
            return
        self._optimizer.register(params, (1.0 if self._mode == "max" else -1.0) * value)

    def register_analysis(self, analysis: Any) -> None:
        """Tell the optimizer of an earlier experiment's trials (``ExperimentAnalysis``): each trial's best
        result of the metric, at its searched parameters."""
        names = list(self._optimizer.space.keys)
        self._check_metric_mode()  # (the earlier trials are read by the metric and mode)
        metric = str(self._metric)
        frame = analysis.dataframe(metric=metric, mode=self._mode)
        for _, row in frame.iterrows():
            columns = {n: row.get(f"config/{n}") for n in names}
            if any(v is None for v in columns.values()) or metric not in row:
                continue
            self._register(columns, {metric: row[metric]})

    # ------------------------------------------------------------------ state
    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (the optimizer with its Gaussian process and random state, the counters)."""
        payload = {
            "optimizer": self._optimizer, "utility": self._utility, "points": self._points,
            "random_steps": self._random_steps,
            "random_given": self._random_given, "buffered": self._buffered, "seen": dict(self._seen),
            "live": self._live, "patience": self._patience, "skip_duplicate": self._skip_duplicate,
            "precision": self._precision, "warned": (self._warned_duplicate, self._warned_patience),
        }
        return self._pickled_state("BayesOptSearch", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        p = self._unpickled_payload("BayesOptSearch", state)
        self._optimizer, self._utility = p["optimizer"], p["utility"]
        self._points, self._random_steps, self._random_given = list(p["points"]), p["random_steps"], p["random_given"]
        self._buffered, self._seen, self._live = list(p["buffered"]), defaultdict(int, p["seen"]), dict(p["live"])
        self._patience, self._skip_duplicate, self._precision = p["patience"], p["skip_duplicate"], p["precision"]
        self._warned_duplicate, self._warned_patience = p["warned"]
