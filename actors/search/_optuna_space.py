"""Translating audition search spaces to Optuna distributions and back (for :class:`OptunaSearch`).

Audition domains become Optuna distributions keyed by flattened paths
(``model/layers``); decoders turn Optuna's stored values back into the user's
values (category objects Optuna cannot store, clean quantized floats).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors._engine.flat import unflatten as unflatten_names
from actors.search._domain import (
    Categorical,
    Domain,
    Float,
    Function,
    GridSearch,
    Integer,
    SearchSpaceError,
)
from actors.search._domain_checks import quantized
from actors.search._space import Path, format_path, has_domain

_PRIMITIVES = (type(None), bool, int, float, str)

log = logging.getLogger("actors.search._optuna")  # (the searcher's logger: one name to silence)


def import_optuna() -> Any:
    try:
        import optuna
    except ImportError as exc:
        raise ImportError(
            f"OptunaSearch needs the optuna package ({exc}); install it with pip install 'audition[optuna]'"
        ) from exc
    return optuna


Decoder = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


class _Requantize:
    """Snap Optuna's ``low + k * step`` back onto clean multiples of ``q`` (picklable, unlike a lambda)."""

    def __init__(self, q: float) -> None:
        self.q = q

    def __call__(self, value: Any) -> float:
        return quantized(round(value / self.q), self.q)


class CategoryIndex:
    """Map a category index back to a category that Optuna cannot store itself."""

    def __init__(self, categories: tuple[Any, ...]) -> None:
        self.categories = categories

    def __call__(self, value: Any) -> Any:
        return self.categories[value]


def convert(optuna: Any, path: Path, domain: Any) -> tuple[Any, Decoder]:
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
        if any(has_domain(c) for c in domain.categories):
            raise SearchSpaceError(
                f"{where}: choice() categories holding domains are not supported by OptunaSearch"
            )
        if all(isinstance(c, _PRIMITIVES) for c in domain.categories):
            return dists.CategoricalDistribution(domain.categories), _identity
        return dists.CategoricalDistribution(tuple(range(len(domain.categories)))), CategoryIndex(domain.categories)
    raise SearchSpaceError(
        f"{where}: {domain.describe()} is not supported by OptunaSearch; "
        "use uniform/loguniform/quniform/randint/lograndint/qrandint/choice"
    )


def collect(space: Any, path: Path, optuna: Any, out: dict[Path, Any]) -> None:
    """Paths of every searchable leaf (audition domain or Optuna distribution), in key order."""
    if isinstance(space, Domain | optuna.distributions.BaseDistribution) and not isinstance(space, Function):
        out[path] = space
    elif isinstance(space, dict):
        for key, value in space.items():
            collect(value, (*path, key), optuna, out)
    elif isinstance(space, list | tuple):
        for i, value in enumerate(space):
            collect(value, (*path, i), optuna, out)


def fill(space: Any, path: Path, values: dict[Path, Any]) -> Any:
    """Copy ``space`` with the searched leaves replaced by ``values`` (sample_from left in place)."""
    if path in values:
        return values[path]
    if isinstance(space, dict):
        return {k: fill(v, (*path, k), values) for k, v in space.items()}
    if isinstance(space, list | tuple):
        items = [fill(v, (*path, i), values) for i, v in enumerate(space)]
        return items if isinstance(space, list) else tuple(items)
    return space


def flat_point(point: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` or ``{"a/b": 1}`` -> ``{"a/b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat_point(value, f"{name}/"))
        else:
            out[name] = value
    return out


def check_rewards(rewards: Any, points: list[dict[str, Any]], define_by_run: bool) -> list[Any] | None:
    """``evaluated_rewards`` as Ray checks it (a list, one reward per point), or None when there are none.
    Rewards without points pair with nothing: Ray ignores them silently, audition says so."""
    if rewards is None or (isinstance(rewards, list) and not rewards):
        return None
    if not isinstance(rewards, list):
        raise TypeError(f"OptunaSearch: evaluated_rewards must be a list (one reward per point of "
                        f"points_to_evaluate), got {type(rewards).__name__}")
    if not points:
        log.warning("OptunaSearch: evaluated_rewards without points_to_evaluate is ignored, as in Ray Tune; pass "
                    "the evaluated configurations as points_to_evaluate, in the same order")
        return None
    if len(rewards) != len(points):
        raise ValueError(f"OptunaSearch: evaluated_rewards has {len(rewards)} rewards for {len(points)} points of "
                         "points_to_evaluate; give one reward per point, in the same order")
    if define_by_run:
        raise TypeError("OptunaSearch: a define-by-run space cannot take evaluated_rewards (as in Ray Tune); pass "
                        "a dict space, or the search space as the Tuner's param_space")
    for reward in rewards:
        values = reward if isinstance(reward, list | tuple) else [reward]
        if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise TypeError(f"OptunaSearch: each of evaluated_rewards must be a number (a list of numbers for "
                            f"several objectives), got {reward!r}")
    return list(rewards)


def unflatten(params: dict[str, Any]) -> dict[str, Any]:
    """``{"a/b": 1}`` -> ``{"a": {"b": 1}}``, as Ray's ``unflatten_dict`` reads define-by-run names."""
    try:
        return unflatten_names(params)
    except ValueError as exc:
        raise ValueError(f"OptunaSearch: {exc}") from None


class SuggestCaptor:
    """Hands an Optuna trial to a define-by-run function and records what each ``suggest_*`` returned.

    Ray builds the config from these captured values (not ``trial.params``), so a
    category object Optuna cannot store still reaches the trainable as itself.
    """

    def __init__(self, trial: Any) -> None:
        self._trial = trial
        self.captured: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        item = getattr(self._trial, name)
        if name.startswith("suggest_") and callable(item):
            return _Capture(self, name, item)
        return item


class _Capture:
    """One ``trial.suggest_*`` method whose return value is recorded under its ``name`` argument."""

    def __init__(self, captor: SuggestCaptor, method: str, func: Callable[..., Any]) -> None:
        self._captor, self._method, self._func = captor, method, func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = kwargs["name"] if "name" in kwargs else (args[0] if args else None)
        if not isinstance(name, str):
            raise TypeError(f"trial.{self._method}() needs the parameter name as its first argument, got {name!r}")
        value = self._func(*args, **kwargs)
        self._captor.captured[name] = value
        return value
