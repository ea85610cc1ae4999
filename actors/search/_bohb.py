"""BOHB's search half, an optional extra: Ray Tune 2.60's ``TuneBOHB`` (hpbandster's model over a ConfigSpace).

``hpbandster`` and ``ConfigSpace`` are imported only when a :class:`TuneBOHB` is built. It makes the same
library calls as Ray's searcher: a configuration from hpbandster's ``BOHB`` generator (random at first, then
from kernel density models fitted per budget), and each result that ``HyperBandForBOHB`` marked with a budget
given back to it. hpbandster draws from numpy's global stream; Ray's searcher runs in the driver, where the
script's ``numpy.random.seed`` governs it, so this one draws from the driver's stream as it was at ``fit()``
(as ZOOptSearch does); ConfigSpace draws from the space's own generator, seeded by ``seed=``. Its concurrency
counts running trials only (a paused one frees its place: ``on_pause``), so with ``max_concurrent_trials`` BOHB
starts new trials while others wait at a milestone, as in Ray.
"""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

from actors._engine.flat import unflatten
from actors.search._domain import Categorical, Domain, Float, GridSearch, Integer, Normal
from actors.search._driver_stream import DriverStream
from actors.search._searcher import Searcher, Suggestion, ray_restore, ray_save
from actors.search._space import flatten, normalize, validate_param_space

log = logging.getLogger("audition")

_MISSING_INFO = "BOHB Info not detected in result. Are you using HyperBandForBOHB as a scheduler?"  # (Ray's words)


def import_bohb() -> tuple[Any, Any]:
    """``ConfigSpace`` and hpbandster's ``BOHB`` config generator."""
    try:
        import ConfigSpace
        from hpbandster.optimizers.config_generators.bohb import BOHB
    except ImportError as exc:
        raise ImportError("TuneBOHB needs the hpbandster and ConfigSpace packages: pip install 'audition[bohb]'") \
            from exc
    return ConfigSpace, BOHB


def convert_space(spec: dict[str, Any]) -> Any:
    """The searched parameters as a ``ConfigSpace.ConfigurationSpace`` keyed by their ``a/b`` names, as Ray
    converts them: a float ``UniformFloatHyperparameter`` (``log`` for a log-uniform one), an integer
    ``UniformIntegerHyperparameter`` up to ``upper - 1``, a choice ``CategoricalHyperparameter``; quantization is
    dropped with Ray's warning; a grid search, an unbounded normal or a function is refused, with Ray's words."""
    cs_mod, _ = import_bohb()
    validate_param_space(spec)
    searched = [(p, v) for p, v in flatten(normalize(spec)).items() if isinstance(v, Domain)]
    if any(isinstance(v, GridSearch) for _, v in searched):
        raise ValueError("Grid search parameters cannot be automatically converted to a TuneBOHB search space.")
    cs = cs_mod.ConfigurationSpace()
    for path, value in searched:
        name = "/".join(str(p) for p in path)
        if isinstance(value, Float | Integer) and value.q is not None:
            log.warning("TuneBOHB does not support quantization. Dropped quantization for parameter '%s'.", name)
        if isinstance(value, Normal):
            raise ValueError(f"TuneBOHB does not support unbounded normal distributions. Please specify bounds for "
                             f"parameter '{name}' using tune.uniform(lower, upper) (audition's randn has no clip)")
        if isinstance(value, Float):
            hp = cs_mod.UniformFloatHyperparameter(name, lower=value.lower, upper=value.upper, log=value.log)
        elif isinstance(value, Integer):  # (Ray's: Tune's integer upper bound is exclusive)
            hp = cs_mod.UniformIntegerHyperparameter(name, lower=value.lower, upper=value.upper - 1, log=value.log)
        elif isinstance(value, Categorical):
            hp = cs_mod.CategoricalHyperparameter(name, choices=list(value.categories))
        else:
            raise ValueError(f"TuneBOHB does not support {value.describe()} at {name!r} (as in Ray Tune): it "
                             "searches uniform and log-uniform floats and integers, and choices")
        cs.add(hp)
    return cs


class _Job:
    """What hpbandster's ``new_result`` reads of a finished job (Ray's ``_BOHBJobWrapper``)."""

    def __init__(self, loss: float, budget: float, config: dict[str, Any]) -> None:
        self.result = {"loss": loss}
        self.kwargs = {"budget": budget, "config": config.copy()}
        self.exception = None


class TuneBOHB(Searcher):
    """BOHB's searcher, with Ray Tune's arguments: ``space`` (a ConfigSpace, or a search space converted as
    Ray's), ``bohb_config`` (hpbandster ``BOHB``'s keyword arguments), ``metric``, ``mode``,
    ``points_to_evaluate``, ``seed`` (ConfigSpace's), ``max_concurrent`` (running trials; 0: no limit).
    Use it with ``HyperBandForBOHB``, which gives it each trial's budget."""

    def __init__(self, space: Any = None, bohb_config: dict[str, Any] | None = None, metric: str | None = None,
                 mode: str | None = None, points_to_evaluate: list[dict[str, Any]] | None = None,
                 seed: int | None = None, max_concurrent: int = 0) -> None:
        import_bohb()
        if mode and mode not in ("min", "max"):
            raise ValueError(f"TuneBOHB: mode must be 'min' or 'max', got {mode!r}")
        super().__init__(metric, mode)
        self.trial_to_params: dict[str, dict[str, Any]] = {}
        self._bohb_config = bohb_config
        if isinstance(space, dict) and space:
            if any(isinstance(v, Domain) for v in flatten(normalize(space)).values()):
                log.warning("You passed a `space` parameter to TuneBOHB that contained unresolved search space "
                            "definitions. TuneBOHB should however be instantiated with fully configured search "
                            "spaces only. To use automatic search space conversion, pass the space definition as "
                            "part of the `param_space` argument to `Tuner()` instead.")  # (Ray's warning)
                space = convert_space(space)
        self._space = space
        self._seed = seed
        self.running: set[str] = set()
        self.paused: set[str] = set()
        self._max_concurrent = max_concurrent
        self._points = copy.deepcopy(points_to_evaluate)
        self.bohber: Any = None
        self._stream = DriverStream()  # numpy's global stream, as the driver's was at fit()
        if self._space:
            self._setup()

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """Ray's: the searched parameters of ``spec`` as a ``ConfigSpace.ConfigurationSpace``."""
        return convert_space(spec)

    def capture_driver_stream(self) -> None:
        """At ``fit()``, in the driver: numpy's global stream as the script left it."""
        self._stream.capture()

    def driver_stream(self) -> Any:
        """After the run: the stream to hand back to the driver (None: it drew from the driver's own)."""
        return self._stream.state

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self._max_concurrent = max_concurrent
        return True

    def _setup(self) -> None:
        _, bohb = import_bohb()
        if self._metric is None and self._mode:
            self._metric = "_metric"  # (Ray's anonymous metric)
        if self._seed is not None:
            self._space.seed(self._seed)
        self.running, self.paused = set(), set()
        with self._stream.use():
            self.bohber = bohb(self._space, **(self._bohb_config or {}))

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any] | None,
                              **spec: Any) -> bool:
        if not self._adopt_properties(metric, mode, has_space=bool(self._space)):
            return not config  # (the Tuner merges a constants-only param_space into each suggestion)
        self._space = convert_space(config or {})
        self._setup()
        return True

    def suggest(self, trial_id: str) -> Suggestion:
        if not self._space:
            raise RuntimeError("TuneBOHB has no search space: pass space= to TuneBOHB, or a param_space with "
                               "search domains to the Tuner")
        self._check_metric_mode()
        limit = self._max_concurrent if self._max_concurrent > 0 else math.inf
        if len(self.running) >= limit:
            return None
        if self._points:
            config = self._points.pop(0)
        else:
            with self._stream.use():
                config, _ = self.bohber.get_config(None)  # (hpbandster ignores the budget here)
        self.trial_to_params[trial_id] = copy.deepcopy(config)
        self.running.add(trial_id)
        return unflatten(dict(config))

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if trial_id not in self.paused:
            self.running.add(trial_id)
        if "hyperband_info" not in result:
            log.warning(_MISSING_INFO)
        elif "budget" in result.get("hyperband_info", {}):
            if self._metric not in result:
                raise RuntimeError(f"TuneBOHB: a result has no {self._metric!r}; report it from the trainable, or "
                                   "give the searcher the metric it reports")
            sign = -1.0 if self._mode == "max" else 1.0  # (hpbandster minimises its loss)
            job = _Job(sign * result[self._metric], result["hyperband_info"]["budget"],
                       self.trial_to_params[trial_id])
            with self._stream.use():
                self.bohber.new_result(job)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        self.trial_to_params.pop(trial_id, None)
        self.paused.discard(trial_id)
        self.running.discard(trial_id)

    def on_pause(self, trial_id: str) -> None:
        """``HyperBandForBOHB`` paused the trial: it no longer counts against ``max_concurrent``."""
        self.paused.add(trial_id)
        self.running.discard(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        """``HyperBandForBOHB`` promoted the paused trial: it counts again."""
        self.paused.discard(trial_id)
        self.running.add(trial_id)

    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (the space, hpbandster's generator, the live trials, numpy's stream)."""
        payload = {"space": self._space, "bohber": self.bohber, "trial_to_params": self.trial_to_params,
                   "running": self.running, "paused": self.paused, "points": self._points,
                   "max_concurrent": self._max_concurrent, "seed": self._seed, "bohb_config": self._bohb_config,
                   "np_state": self._stream.state}
        return self._pickled_state("TuneBOHB", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        p = self._unpickled_payload("TuneBOHB", state)
        self._space, self.bohber, self.trial_to_params = p["space"], p["bohber"], dict(p["trial_to_params"])
        self.running, self.paused, self._points = set(p["running"]), set(p["paused"]), p["points"]
        self._max_concurrent, self._seed, self._bohb_config = p["max_concurrent"], p["seed"], p["bohb_config"]
        self._stream.state = p["np_state"]


__all__ = ["TuneBOHB", "convert_space"]
