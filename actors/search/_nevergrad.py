"""Nevergrad-backed searcher, an optional extra: Ray Tune 2.60's ``NevergradSearch``.

``nevergrad`` is imported only when a :class:`NevergradSearch` is built. It makes the same nevergrad calls
as Ray's searcher (the optimizer built on the converted space, ``suggest`` for each point to evaluate in
reverse order, ``ask`` per trial, ``tell`` with the metric, negated for ``mode="max"``), so it suggests what
Ray's does. A nevergrad parametrization seeds its own generator from numpy's global stream the first time
it needs one; Ray's searcher runs in the driver, where the script's ``numpy.random.seed`` governs that
stream. audition's runs in the controller, so the searcher takes the driver's stream at ``fit()``, draws
from it around each nevergrad call, and hands it back after the run (as the default generator does).
Differences, on purpose: bad arguments are ``ValueError``s naming the fix (Ray: ``AssertionError``).
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from actors._engine.flat import unflatten
from actors.search._domain import Categorical, Domain, Float, GridSearch, Integer, Normal
from actors.search._driver_stream import DriverStream
from actors.search._searcher import Searcher, Suggestion, ray_restore, ray_save
from actors.search._space import flatten, has_domain, normalize, validate_param_space

log = logging.getLogger("audition")


def import_nevergrad() -> Any:
    try:
        import nevergrad
    except ImportError as exc:
        raise ImportError("NevergradSearch needs the nevergrad package: pip install 'audition[nevergrad]'") from exc
    return nevergrad


def _text_keys(value: Any) -> Any:
    """Dicts with every key as text (an int key ``0`` names ``w/0``; the Tuner maps a suggested ``"0"`` back
    onto the key ``0``), where Ray's ``flatten_dict`` raises ``TypeError`` on it."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _text_keys(v) for k, v in value.items()}
    return value


def _searched(spec: dict[str, Any]) -> list[tuple[str, Domain]]:
    """Each search domain by its ``a/b`` name, in Ray's order (its ``flatten_dict`` puts nested keys after
    the top level's): the order of nevergrad's ``Dict``, so of the optimizer's vector."""
    from actors.utils import flatten_dict  # (here: actors.utils loads datetime, which the search math may not)

    validate_param_space(spec)
    out: list[tuple[str, Domain]] = []
    for key, value in flatten_dict(_text_keys(normalize(spec)), prevent_delimiter=True).items():
        if isinstance(value, Domain):
            out.append((key, value))
        elif isinstance(value, list | tuple) and has_domain(value):  # (Ray fails with a TypeError)
            raise ValueError(f"NevergradSearch cannot search inside a list (the search domain at {key!r} is in one): "
                             "give each searched value its own key in the param_space")
    return out


def convert_space(spec: dict[str, Any]) -> Any:
    """The searched parameters as nevergrad's ``ng.p.Dict`` keyed by their ``a/b`` names, as Ray converts
    them: a float a ``Scalar`` (log-uniform: ``Log``, whatever its base), an integer an integer-cast ``Scalar``
    or ``Log`` up to ``upper - 1`` (Ray's, for ``qrandint`` too), a choice a ``Choice``; quantization is dropped with
    Ray's warning; a grid search or a function is refused, as Ray refuses it, and so is a normal (Ray makes
    it a ``Scalar`` between infinite bounds, which suggests NaN: recorded)."""
    import math

    ng = import_nevergrad()
    space: dict[str, Any] = {}
    for name, value in _searched(spec):
        if isinstance(value, GridSearch):
            raise ValueError("Grid search parameters cannot be automatically converted to a Nevergrad search space.")
        if isinstance(value, Normal):
            raise ValueError(f"NevergradSearch cannot search {value.describe()} at {name!r}: Ray Tune's converts it "
                             "to a range between infinite bounds and suggests NaN. Give it bounds: uniform(lower, "
                             "upper), or a nevergrad space, e.g. ng.p.Dict(x=ng.p.Scalar(init=mean).set_mutation("
                             "sigma=sd)), as space=")
        if isinstance(value, Float | Integer) and value.q is not None:
            log.warning("Nevergrad does not support quantization. Dropped quantization.")
        if isinstance(value, Float):
            space[name] = (ng.p.Log(lower=value.lower, upper=value.upper, exponent=math.e) if value.log
                           else ng.p.Scalar(lower=value.lower, upper=value.upper))
        elif isinstance(value, Integer):
            upper = value.upper - 1  # (Ray's domain.upper - 1: also qrandint's, whose upper Ray keeps inclusive)
            param = (ng.p.Log(lower=value.lower, upper=upper, exponent=math.e) if value.log
                     else ng.p.Scalar(lower=value.lower, upper=upper))
            space[name] = param.set_integer_casting()
        elif isinstance(value, Categorical):
            space[name] = ng.p.Choice(choices=list(value.categories))
        else:
            raise ValueError(f"Nevergrad does not support {value.describe()} at {name!r} (as in Ray Tune): it "
                             "searches floats, integers and choices")
    return ng.p.Dict(**space)


class NevergradSearch(Searcher):
    """Searcher driven by a nevergrad optimizer, with Ray Tune's arguments: ``optimizer`` (an ``Optimizer``
    class, a ``ConfiguredOptimizer`` or a built ``Optimizer``), ``optimizer_kwargs``, ``space`` (nevergrad's
    parametrization, a search space, or parameter names for a built optimizer), ``metric``, ``mode``,
    ``points_to_evaluate``."""

    def __init__(self, optimizer: Any = None, optimizer_kwargs: dict[str, Any] | None = None, space: Any = None,
                 metric: str | None = None, mode: str | None = None,
                 points_to_evaluate: list[dict[str, Any]] | None = None) -> None:
        import_nevergrad()  # (the error naming the extra, before nevergrad's own imports)
        from nevergrad.optimization import Optimizer
        from nevergrad.optimization.base import ConfiguredOptimizer

        if mode and mode not in ("min", "max"):
            raise ValueError(f"NevergradSearch: mode must be 'min' or 'max', got {mode!r}")
        super().__init__(metric, mode)
        self._space: Any = None
        self._opt_factory: Any = None
        self._opt: Any = None
        self._parameters: list[str] | None = None
        self._optimizer_kwargs = dict(optimizer_kwargs or {})
        if points_to_evaluate is None:
            self._points: list[dict[str, Any]] | None = None
        elif not isinstance(points_to_evaluate, Sequence) or isinstance(points_to_evaluate, str | bytes):
            raise ValueError(f"Invalid object type passed for `points_to_evaluate`: {type(points_to_evaluate)}. "
                             "Please pass a list of points (dictionaries) instead.")
        else:
            self._points = copy.deepcopy(list(points_to_evaluate))
        if isinstance(space, dict) and space and any(
                isinstance(v, Domain) for v in flatten(normalize(space)).values()):
            space = convert_space(space)
        if isinstance(optimizer, Optimizer):
            if space is not None and not isinstance(space, list):
                raise ValueError("If you pass a configured optimizer to Nevergrad, either pass a list of parameter "
                                 "names or None as the `space` parameter.")
            if self._optimizer_kwargs:
                raise ValueError("If you pass in optimizer kwargs, either pass an `Optimizer` subclass or an "
                                 "instance of `ConfiguredOptimizer`.")
            self._parameters, self._opt = space, optimizer
        elif (inspect.isclass(optimizer) and issubclass(optimizer, Optimizer)) or isinstance(
                optimizer, ConfiguredOptimizer):
            self._opt_factory, self._space = optimizer, space
        else:
            raise ValueError("The `optimizer` argument passed to NevergradSearch must be either an `Optimizer` or a "
                             "`ConfiguredOptimizer` (e.g. nevergrad.optimizers.OnePlusOne).")
        self._live: dict[str, Any] = {}  # trial id -> the candidate nevergrad asked for it
        self._stream = DriverStream()  # numpy's global stream, as the driver's was at fit()
        if self._opt is not None or self._space is not None:
            self._setup()

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """Ray's: the searched parameters as nevergrad's ``ng.p.Dict``."""
        return convert_space(spec)

    def capture_driver_stream(self) -> None:
        """At ``fit()``, in the driver: numpy's global stream as the script left it."""
        self._stream.capture()

    def driver_stream(self) -> Any:
        """After the run: the stream to hand back to the driver (None: it drew from the driver's own)."""
        return self._stream.state

    def _setup(self) -> None:
        with self._stream.use():
            if self._opt_factory is not None:
                self._opt = self._opt_factory(self._space, **self._optimizer_kwargs)
            if self._metric is None and self._mode:
                self._metric = "_metric"  # (Ray's anonymous metric)
            if self._parameters is not None and self._opt.dimension != len(self._parameters):
                raise ValueError("len(parameters_names) must match optimizer dimension for non-instrumented "
                                 "optimizers")
            for point in reversed(self._points or []):  # nevergrad is LIFO: Ray adds them in reverse
                self._opt.suggest(self._as_named(point))

    def _as_named(self, point: Any) -> Any:
        """A point given nested (``{"nest": {"y": 1}}``) for a space converted to ``a/b`` names (Ray takes
        only ``{"nest/y": 1}``): flattened when that is what the parametrization's keys need."""
        from actors.utils import flatten_dict

        keys = set(getattr(self._opt.parametrization, "keys", lambda: ())())
        if isinstance(point, dict) and keys and set(point) != keys:
            flat = flatten_dict(point)
            if set(flat) == keys:
                return flat
        return point

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any] | None,
                              **spec: Any) -> bool:
        has_space = self._opt is not None or self._space is not None
        if not self._adopt_properties(metric, mode, has_space=has_space):
            return not config  # (the Tuner merges a constants-only param_space into each suggestion)
        self._space = convert_space(config or {})
        self._setup()
        return True

    def suggest(self, trial_id: str) -> Suggestion:
        if self._opt is None:
            raise RuntimeError("NevergradSearch has no search space: pass space= to NevergradSearch, or a "
                               "param_space with search domains to the Tuner")
        self._check_metric_mode()
        with self._stream.use():
            candidate = self._opt.ask()
        self._live[trial_id] = candidate
        if not candidate.kwargs:
            if self._parameters:
                return unflatten(dict(zip(self._parameters, candidate.args[0], strict=False)))
            return unflatten(dict(candidate.value))
        return unflatten(dict(candidate.kwargs))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        candidate = self._live.pop(trial_id, None)
        if not result or candidate is None:
            return
        if self._metric not in result:
            raise RuntimeError(f"NevergradSearch: a trial's last result has no {self._metric!r}; report it from the "
                               "trainable, or give the searcher the metric it reports")
        sign = -1.0 if self._mode == "max" else 1.0  # nevergrad minimises
        with self._stream.use():
            self._opt.tell(candidate, sign * result[self._metric])

    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (the optimizer, the live candidates, numpy's stream)."""
        payload = {"opt": self._opt, "space": self._space, "parameters": self._parameters, "live": self._live,
                   "np_state": self._stream.state, "points": self._points, "kwargs": self._optimizer_kwargs,
                   "factory": self._opt_factory}
        return self._pickled_state("NevergradSearch", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        p = self._unpickled_payload("NevergradSearch", state)
        self._opt, self._space, self._parameters, self._live = p["opt"], p["space"], p["parameters"], dict(p["live"])
        self._stream.state, self._points, self._optimizer_kwargs = p["np_state"], p["points"], dict(p["kwargs"])
        self._opt_factory = p["factory"]


__all__ = ["NevergradSearch", "convert_space"]
