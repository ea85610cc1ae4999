"""Search-space domains: the values a param_space entry may be sampled from.

Domains are frozen dataclasses so they compare by value, print readably and
pickle without help (only :class:`Function` carries a user callable, which
cloudpickle handles).  Every domain checks its arguments when it is built, so a
bad space fails when the user writes it, not hours into an experiment.
"""

from __future__ import annotations

import inspect
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from actors.search._random_state import check_size


class SearchSpaceError(ValueError):
    """A param_space or one of its domains is malformed; the message says how to fix it."""


def _call(name: str, **kwargs: Any) -> str:
    """Render a constructor call the way the user wrote it, for error messages."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items() if v is not None)})"


def _real(call: str, param: str, value: Any) -> float:
    """Return ``value`` as a finite float, or raise naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SearchSpaceError(f"{call}: {param} must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise SearchSpaceError(f"{call}: {param} must be finite, got {value!r}; use a finite bound")
    return float(value)


def _integer(call: str, param: str, value: Any) -> int:
    """Return ``value`` as an int (integral floats such as ``1e3`` are accepted)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SearchSpaceError(f"{call}: {param} must be an integer, got {type(value).__name__} {value!r}")
    return value


def _check_base(call: str, base: Any) -> float:
    base_f = _real(call, "base", base)
    if base_f <= 0 or base_f == 1:
        raise SearchSpaceError(f"{call}: base must be > 0 and != 1, got {base!r}; the usual choice is 10")
    return base_f


def _multiples(call: str, lower: float, upper: float, q: float) -> tuple[int, int]:
    """Index range ``[kmin, kmax]`` of the multiples ``k * q`` inside ``[lower, upper]``.

    Decimal arithmetic on the literals the user typed keeps ``quniform(0, 0.3, 0.1)``
    able to return 0.3 (binary floats would put 0.3 / 0.1 just below 3).
    """
    dq = Decimal(repr(q))
    kmin = int((Decimal(repr(lower)) / dq).to_integral_value(ROUND_CEILING))
    kmax = int((Decimal(repr(upper)) / dq).to_integral_value(ROUND_FLOOR))
    if kmin > kmax:
        raise SearchSpaceError(
            f"{call}: no multiple of q={q!r} lies between lower and upper; use a smaller q or wider bounds"
        )
    return kmin, kmax


def _quantized(k: int, q: float) -> float:
    """``k * q`` without binary noise (3 * 0.1 is 0.3, not 0.30000000000000004)."""
    return float(Decimal(k) * Decimal(repr(q)))


class Domain(ABC):
    """A param_space entry that is resolved to a concrete value per trial."""

    @abstractmethod
    def describe(self) -> str:
        """The constructor call that builds this domain, e.g. ``uniform(lower=0, upper=1)``."""

    def sample(self, config: Any = None, size: int = 1, random_state: Any = None) -> Any:
        """Ray Tune's ``Domain.sample``: one value, or a list of ``size`` values when ``size > 1``.

        ``random_state`` is an int seed, a numpy generator or ``None`` (numpy's global stream):
        with numpy installed the draws are Ray's own; a ``random.Random`` (also as the first
        argument, audition's older ``sample(rng)``) or no numpy draws with Python's ``random``.
        """
        from actors.search._numpy_draws import sample_values

        if isinstance(config, random.Random) and random_state is None:
            config, random_state = None, config
        values = sample_values(self, config, check_size(size), random_state)
        return values[0] if len(values) == 1 else values

    def _draw_for(self, config: Any, rng: random.Random) -> Any:
        return self.draw(rng)

    def draw(self, rng: random.Random) -> Any:
        """Draw one value using ``rng`` (never the global RNG, so runs are reproducible)."""
        raise SearchSpaceError(f"{self.describe()} cannot be sampled on its own")


@dataclass(frozen=True)
class Float(Domain):
    """Real numbers in ``[lower, upper]``, optionally log-scaled and/or quantized to ``q``."""

    lower: float
    upper: float
    q: float | None = None
    log: bool = False
    base: float = 10.0
    _kmin: int = field(default=0, init=False, repr=False, compare=False)
    _kmax: int = field(default=0, init=False, repr=False, compare=False)

    def describe(self) -> str:
        name = ("q" if self.q is not None else "") + ("loguniform" if self.log else "uniform")
        return _call(name, lower=self.lower, upper=self.upper, q=self.q, base=self.base if self.log else None)

    def __post_init__(self) -> None:
        call = self.describe()
        lower, upper = _real(call, "lower", self.lower), _real(call, "upper", self.upper)
        if lower >= upper:
            hint = "use a constant value instead" if lower == upper else "swap them"
            raise SearchSpaceError(f"{call}: lower must be < upper; {hint}")
        if self.log:
            if lower <= 0:
                raise SearchSpaceError(
                    f"{call}: lower must be > 0 because values are sampled in log space; "
                    "use uniform() for ranges that include 0 or negatives"
                )
            object.__setattr__(self, "base", _check_base(call, self.base))
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.q is not None:
            q = _real(call, "q", self.q)
            if q <= 0:
                raise SearchSpaceError(f"{call}: q must be > 0, got {self.q!r}")
            kmin, kmax = _multiples(call, lower, upper, q)
            object.__setattr__(self, "q", q)
            object.__setattr__(self, "_kmin", kmin)
            object.__setattr__(self, "_kmax", kmax)

    @property
    def low(self) -> float:
        """Smallest value this domain can return."""
        return _quantized(self._kmin, self.q) if self.q is not None else self.lower

    @property
    def high(self) -> float:
        """Largest value this domain can return."""
        return _quantized(self._kmax, self.q) if self.q is not None else self.upper

    def draw(self, rng: random.Random) -> float:
        if self.log:
            lo, hi = math.log(self.lower, self.base), math.log(self.upper, self.base)
            value = self.base ** rng.uniform(lo, hi)
        else:
            value = rng.uniform(self.lower, self.upper)
        if self.q is not None:
            k = min(max(round(value / self.q), self._kmin), self._kmax)
            value = _quantized(k, self.q)
        return min(max(value, self.lower), self.upper)


@dataclass(frozen=True)
class Integer(Domain):
    """Integers from ``lower``; ``upper`` is exclusive, or inclusive when quantized (Ray's rule)."""

    lower: int
    upper: int
    q: int | None = None
    log: bool = False
    base: float = 10.0
    _kmin: int = field(default=0, init=False, repr=False, compare=False)
    _kmax: int = field(default=0, init=False, repr=False, compare=False)

    def describe(self) -> str:
        name = ("q" if self.q is not None else "") + ("lograndint" if self.log else "randint")
        return _call(name, lower=self.lower, upper=self.upper, q=self.q, base=self.base if self.log else None)

    def __post_init__(self) -> None:
        call = self.describe()
        lower, upper = _integer(call, "lower", self.lower), _integer(call, "upper", self.upper)
        if self.q is None and lower >= upper:
            raise SearchSpaceError(
                f"{call}: upper is exclusive, so upper must be > lower; "
                f"use upper={lower + 1} to allow {lower}"
            )
        if self.q is not None and lower > upper:
            raise SearchSpaceError(f"{call}: lower must be <= upper (upper is inclusive here); swap them")
        if self.log:
            if lower < 1:
                raise SearchSpaceError(
                    f"{call}: lower must be >= 1 because values are sampled in log space; "
                    "use randint() for ranges that include 0 or negatives"
                )
            object.__setattr__(self, "base", _check_base(call, self.base))
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.q is not None:
            q = _integer(call, "q", self.q)
            if q < 1:
                raise SearchSpaceError(f"{call}: q must be a positive integer, got {self.q!r}")
            kmin, kmax = _multiples(call, lower, upper, q)
            object.__setattr__(self, "q", q)
            object.__setattr__(self, "_kmin", kmin)
            object.__setattr__(self, "_kmax", kmax)

    @property
    def high(self) -> int:
        """Largest value this domain can return (inclusive)."""
        return self._kmax * self.q if self.q is not None else self.upper - 1

    @property
    def low(self) -> int:
        """Smallest value this domain can return."""
        return self._kmin * self.q if self.q is not None else self.lower

    def draw(self, rng: random.Random) -> int:
        if not self.log:
            if self.q is None:
                return rng.randrange(self.lower, self.upper)
            return rng.randint(self._kmin, self._kmax) * self.q
        value = self.base ** rng.uniform(math.log(self.lower, self.base), math.log(self.upper, self.base))
        if self.q is None:
            return min(max(math.floor(value), self.lower), self.upper - 1)
        return min(max(round(value / self.q), self._kmin), self._kmax) * self.q


@dataclass(frozen=True)
class Normal(Domain):
    """Normally distributed reals, optionally quantized to ``q`` (unbounded)."""

    mean: float = 0.0
    sd: float = 1.0
    q: float | None = None

    def describe(self) -> str:
        return _call("qrandn" if self.q is not None else "randn", mean=self.mean, sd=self.sd, q=self.q)

    def __post_init__(self) -> None:
        call = self.describe()
        object.__setattr__(self, "mean", _real(call, "mean", self.mean))
        sd = _real(call, "sd", self.sd)
        if sd <= 0:
            raise SearchSpaceError(f"{call}: sd must be > 0; use a constant value for a fixed number")
        object.__setattr__(self, "sd", sd)
        if self.q is not None:
            q = _real(call, "q", self.q)
            if q <= 0:
                raise SearchSpaceError(f"{call}: q must be > 0, got {self.q!r}")
            object.__setattr__(self, "q", q)

    def draw(self, rng: random.Random) -> float:
        value = rng.gauss(self.mean, self.sd)
        return _quantized(round(value / self.q), self.q) if self.q is not None else value


def _as_values(name: str, param: str, values: Any) -> tuple[Any, ...]:
    """Turn a user's list of options into a tuple, rejecting empties and lookalikes."""
    shown = repr(list(values) if isinstance(values, tuple) else values)
    call = f"{name}({shown if len(shown) <= 60 else shown[:57] + '...'})"
    if isinstance(values, str | bytes | dict) or not isinstance(values, Iterable):
        raise SearchSpaceError(
            f"{call}: {param} must be a list of options, got {type(values).__name__}; wrap it in a list"
        )
    out = tuple(values)
    if not out:
        raise SearchSpaceError(f"{call}: {param} is empty; give at least one option")
    return out


@dataclass(frozen=True)
class Categorical(Domain):
    """One of ``categories``, uniformly; a category may itself hold domains (conditional spaces)."""

    categories: tuple[Any, ...]

    def describe(self) -> str:
        return f"choice({list(self.categories)!r})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "categories", _as_values("choice", "categories", self.categories))

    def draw(self, rng: random.Random) -> Any:
        return self.categories[rng.randrange(len(self.categories))]


@dataclass(frozen=True)
class GridSearch(Domain):
    """Every one of ``values``, each in its own variant (expanded, never sampled)."""

    values: tuple[Any, ...]

    def describe(self) -> str:
        return f"grid_search({list(self.values)!r})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _as_values("grid_search", "values", self.values))


def _takes_spec(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` wants the spec argument (Ray accepts zero-argument functions too)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


@dataclass(frozen=True)
class Function(Domain):
    """A value computed by ``fn(spec)`` after the rest of the config is resolved."""

    fn: Callable[..., Any]
    _pass_spec: bool = field(default=True, init=False, repr=False, compare=False)

    def describe(self) -> str:
        return f"sample_from({getattr(self.fn, '__qualname__', self.fn)!s})"

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise SearchSpaceError(
                f"sample_from(func={self.fn!r}): func must be callable, e.g. sample_from(lambda spec: ...)"
            )
        object.__setattr__(self, "_pass_spec", _takes_spec(self.fn))

    def call(self, spec: Any) -> Any:
        return self.fn(spec) if self._pass_spec else self.fn()

    def _draw_for(self, config: Any, rng: random.Random) -> Any:
        """As Ray's ``sample(config)``: ``fn(config)``, retried as ``fn(spec)`` for ``spec.config`` readers."""
        if not self._pass_spec:
            return self.fn()
        try:
            return self.fn(config)
        except (AttributeError, KeyError):
            if not isinstance(config, dict):
                raise
            from actors.search._space import Spec

            return self.fn(Spec(config, rng))


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
