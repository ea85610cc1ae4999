"""ZOOpt-backed searcher (derivative-free "SRacos"), an optional extra: Ray Tune 2.60's ``ZOOptSearch``.

``zoopt`` is imported only when a :class:`ZOOptSearch` is built. It drives zoopt's ``SRacosTune`` as Ray's
searcher does (the same suggest and complete calls), so it suggests what Ray's does. zoopt draws from
numpy's global stream; Ray's searcher runs in the driver, where the script's ``numpy.random.seed`` governs
that stream. audition's runs in the controller, so the searcher takes the driver's stream at ``fit()``,
draws from it around each zoopt call, and hands it back after the run (as the default generator does).
Differences, on purpose: bad arguments are ``ValueError``s naming the fix (Ray: ``AssertionError``); a
searcher returning no configuration while no trial runs ends the run with that message (zoopt's initial phase
never resumes under ``max_concurrent_trials=1``: Ray 2.60 was still waiting after two minutes).
"""

from __future__ import annotations

import copy
from typing import Any

from actors._engine.flat import unflatten
from actors.search._domain import Categorical, Domain, Float, GridSearch, Integer
from actors.search._driver_stream import DriverStream
from actors.search._searcher import Searcher, Suggestion, ray_restore, ray_save
from actors.search._space import flatten, normalize, validate_param_space


def import_zoopt() -> Any:
    try:
        import zoopt
    except ImportError as exc:
        raise ImportError("ZOOptSearch needs the zoopt package: pip install 'audition[zoopt]'") from exc
    return zoopt


def convert_space(spec: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Each searched parameter as zoopt's ``(ValueType, range, ...)`` by its ``a/b`` name, as Ray converts
    it: a uniform float is CONTINUOUS (its ``q`` the precision, else 1e-12), a uniform integer DISCRETE
    ``[lower, upper - 1]`` (Ray's, for ``randint``; ``qrandint`` keeps its upper bound and loses its ``q``), a
    choice GRID over its categories; anything else is refused, as Ray refuses it."""
    from zoopt import ValueType

    validate_param_space(spec)
    out: dict[str, tuple[Any, ...]] = {}
    for path, value in flatten(normalize(spec)).items():
        if not isinstance(value, Domain):
            continue
        name = "/".join(str(p) for p in path)
        if isinstance(value, GridSearch):
            raise ValueError("Grid search parameters cannot be automatically converted to a ZOOpt search space.")
        if isinstance(value, Float) and not value.log:
            out[name] = (ValueType.CONTINUOUS, [value.lower, value.upper], value.q or 1e-12)
        elif isinstance(value, Integer) and not value.log:
            upper = value.upper if value.q is not None else value.upper - 1
            out[name] = (ValueType.DISCRETE, [value.lower, upper], True)
        elif isinstance(value, Categorical):
            out[name] = (ValueType.GRID, list(value.categories))
        else:
            raise ValueError(f"ZOOpt does not support {value.describe()} at {name!r} (as in Ray Tune): it searches "
                             "uniform floats and integers and choices")
    return out


class ZOOptSearch(Searcher):
    """Searcher driven by zoopt's SRacos, with Ray Tune's arguments: ``algo`` ("asracos" or "sracos"),
    ``budget`` (required), ``dim_dict`` (zoopt's own space, or a search space), ``metric``, ``mode``,
    ``points_to_evaluate``, ``parallel_num``, and zoopt's own keyword arguments."""

    def __init__(self, algo: str = "asracos", budget: int | None = None, dim_dict: dict[str, Any] | None = None,
                 metric: str | None = None, mode: str | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None, parallel_num: int = 1,
                 **kwargs: Any) -> None:
        self._zoopt = import_zoopt()
        if budget is None:
            raise ValueError("ZOOptSearch needs budget=N, the number of evaluations (as Ray's: match TuneConfig's "
                             "num_samples)")
        if mode and mode not in ("min", "max"):
            raise ValueError(f"ZOOptSearch: mode must be 'min' or 'max', got {mode!r}")
        if not isinstance(algo, str) or algo.lower() not in ("asracos", "sracos"):
            raise ValueError(f"ZOOptSearch: algo must be 'asracos' or 'sracos' (as in Ray Tune), got {algo!r}")
        super().__init__(metric, mode)
        self._algo, self._budget, self._parallel_num, self._kwargs = algo.lower(), budget, parallel_num, kwargs
        self._points = copy.deepcopy(points_to_evaluate)
        self._dims: dict[str, Any] = {}
        self._solutions: dict[str, Any] = {}  # trial id -> the zoopt solution suggested to it
        self.best_solution_list: list[Any] = []
        self.optimizer: Any = None
        self._stream = DriverStream()  # numpy's global stream, as the driver's was at fit()
        if dim_dict:
            if any(isinstance(v, Domain) or (isinstance(v, dict) and "grid_search" in v) for v in dim_dict.values()):
                dim_dict = convert_space(dim_dict)
            self._dims = dict(dim_dict)
            self._setup()

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_stream" not in state:  # pickled by audition before DriverStream (its tuner.pkl): the bare state
            state["_stream"] = DriverStream()
            state["_stream"].state = state.pop("_np_state", None)
        self.__dict__.update(state)

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, Any]:
        """Ray's: each searched parameter as zoopt's tuple by its ``a/b`` name; with ``join``, the rest of
        ``spec`` kept beside them."""
        converted = convert_space(spec)
        if not join:
            return converted
        return {**copy.deepcopy(spec), **converted}

    def capture_driver_stream(self) -> None:
        """At ``fit()``, in the driver: numpy's global stream as the script left it."""
        self._stream.capture()

    def driver_stream(self) -> Any:
        """After the run: the stream to hand back to the driver (None: it drew from the driver's own)."""
        return self._stream.state

    def _setup(self) -> None:
        if self._metric is None and self._mode:
            self._metric = "_metric"  # (Ray's anonymous metric)
        keys = list(self._dims)
        init = None
        if self._points:
            init = [self._zoopt.Solution(x=tuple(point[k] for k in keys)) for point in self._points]
        from zoopt.algos.opt_algorithms.racos.sracos import SRacosTune

        with self._stream.use():
            dimension = self._zoopt.Dimension2([self._dims[k] for k in keys])
            parameter = self._zoopt.Parameter(budget=self._budget, init_samples=init)
            self.optimizer = SRacosTune(dimension=dimension, parameter=parameter, parallel_num=self._parallel_num,
                                        **self._kwargs)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any] | None,
                              **spec: Any) -> bool:
        if not self._adopt_properties(metric, mode, has_space=bool(self._dims)):
            return not config  # (the Tuner merges a constants-only param_space into each suggestion)
        self._dims = convert_space(config or {})
        self._setup()
        return True

    def suggest(self, trial_id: str) -> Suggestion:
        if not self._dims or self.optimizer is None:
            raise RuntimeError("ZOOptSearch has no search space: pass dim_dict= to ZOOptSearch, or a param_space "
                               "with search domains to the Tuner")
        self._check_metric_mode()
        with self._stream.use():
            # zoopt keeps the continuous dimensions' rounding in a process-wide list that building a Dimension2
            # fills; this process may have built none (a searcher unpickled in an actor system started afresh:
            # an IndexError in zoopt) or another searcher's since
            self._zoopt.Dimension2([self._dims[k] for k in self._dims])
            solution = self.optimizer.suggest()
        if isinstance(solution, str) and solution == "FINISHED":
            return Searcher.FINISHED
        if not solution:
            return None
        self._solutions[trial_id] = solution
        return unflatten(dict(zip(self._dims, solution.get_x())))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        solution = self._solutions.pop(trial_id, None)
        if not result or solution is None:
            return
        if self._metric not in result:
            raise RuntimeError(f"ZOOptSearch: a trial's last result has no {self._metric!r}; report it from the "
                               "trainable, or give the searcher the metric it reports")
        sign = -1.0 if self._mode == "max" else 1.0
        with self._stream.use():
            best = self.optimizer.complete(solution, sign * result[self._metric])
        if best:
            self.best_solution_list.append(best)

    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (the optimizer, the live solutions, numpy's stream)."""
        payload = {"optimizer": self.optimizer, "dims": self._dims, "solutions": self._solutions,
                   "best": self.best_solution_list, "np_state": self._stream.state, "points": self._points,
                   "budget": self._budget, "algo": self._algo, "parallel_num": self._parallel_num,
                   "kwargs": self._kwargs}
        return self._pickled_state("ZOOptSearch", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        p = self._unpickled_payload("ZOOptSearch", state)
        self.optimizer, self._dims, self._solutions = p["optimizer"], dict(p["dims"]), dict(p["solutions"])
        self.best_solution_list, self._stream.state, self._points = list(p["best"]), p["np_state"], p["points"]
        self._budget, self._algo, self._parallel_num, self._kwargs = (p["budget"], p["algo"], p["parallel_num"],
                                                                     dict(p["kwargs"]))


__all__ = ["ZOOptSearch", "convert_space"]
