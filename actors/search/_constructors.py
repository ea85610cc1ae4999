"""Ray Tune's search-space functions (``tune.uniform``, ``tune.choice``, ...): each builds a domain.

The domains check their arguments (``actors.search._domain``), so a bad space fails here, when
the user writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from actors.search._domain import Categorical, Float, Function, GridSearch, Integer, Normal


def uniform(lower: float, upper: float) -> Float:
    """A float drawn uniformly from ``[lower, upper]``."""
    return Float(lower, upper)


def quniform(lower: float, upper: float, q: float) -> Float:
    """A uniform float rounded to a multiple of ``q`` (kept inside the bounds)."""
    return Float(lower, upper, q=q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """A float drawn uniformly in log space; for scales such as learning rates."""
    return Float(lower, upper, log=True, base=base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """A log-uniform float rounded to a multiple of ``q``."""
    return Float(lower, upper, q=q, log=True, base=base)


def randint(lower: int, upper: int) -> Integer:
    """An integer in ``[lower, upper)`` (upper exclusive, like ``random.randrange``)."""
    return Integer(lower, upper)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """A multiple of ``q`` in ``[lower, upper]`` (upper inclusive, as in Ray Tune)."""
    return Integer(lower, upper, q=q)


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """An integer in ``[lower, upper)`` drawn uniformly in log space."""
    return Integer(lower, upper, log=True, base=base)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    """A log-uniform multiple of ``q`` in ``[lower, upper]`` (upper inclusive)."""
    return Integer(lower, upper, q=q, log=True, base=base)


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """A normally distributed float."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Normal:
    """A normally distributed float rounded to a multiple of ``q``."""
    return Normal(mean, sd, q=q)


def choice(categories: Iterable[Any]) -> Categorical:
    """One of ``categories``, chosen uniformly."""
    values: Any = tuple(categories) if isinstance(categories, list | tuple | range) else categories
    return Categorical(values)


def grid_search(values: Iterable[Any]) -> GridSearch:
    """Run every value in ``values`` (the variants are the cartesian product of all grids)."""
    items: Any = tuple(values) if isinstance(values, list | tuple | range) else values
    return GridSearch(items)


def sample_from(func: Callable[..., Any]) -> Function:
    """A value computed as ``func(spec)``; ``spec.config`` is the rest of the resolved config."""
    return Function(func)


__all__ = ["choice", "grid_search", "lograndint", "loguniform", "qlograndint", "qloguniform", "qrandint", "qrandn",
           "quniform", "randint", "randn", "sample_from", "uniform"]
