"""Search-space domains: the values a param_space entry may be sampled from.

Domains are frozen dataclasses so they compare by value, print readably and
pickle without help (only :class:`Function` carries a user callable, which
cloudpickle handles).  Every domain checks its arguments when it is built, so a
bad space fails when the user writes it, not hours into an experiment.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.search._domain_checks import (
    SearchSpaceError,
    as_integer,
    as_real,
    as_values,
    check_base,
    multiples,
    quantized,
    render_call,
    takes_spec,
)
from actors.search._random_state import check_size


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
        return render_call(name, lower=self.lower, upper=self.upper, q=self.q, base=self.base if self.log else None)

    def __post_init__(self) -> None:
        call = self.describe()
        lower, upper = as_real(call, "lower", self.lower), as_real(call, "upper", self.upper)
        if lower >= upper:
            hint = "use a constant value instead" if lower == upper else "swap them"
            raise SearchSpaceError(f"{call}: lower must be < upper; {hint}")
        if self.log:
            if lower <= 0:
                raise SearchSpaceError(
                    f"{call}: lower must be > 0 because values are sampled in log space; "
                    "use uniform() for ranges that include 0 or negatives"
                )
            object.__setattr__(self, "base", check_base(call, self.base))
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.q is not None:
            q = as_real(call, "q", self.q)
            if q <= 0:
                raise SearchSpaceError(f"{call}: q must be > 0, got {self.q!r}")
            kmin, kmax = multiples(call, lower, upper, q)
            object.__setattr__(self, "q", q)
            object.__setattr__(self, "_kmin", kmin)
            object.__setattr__(self, "_kmax", kmax)

    @property
    def low(self) -> float:
        """Smallest value this domain can return."""
        return quantized(self._kmin, self.q) if self.q is not None else self.lower

    @property
    def high(self) -> float:
        """Largest value this domain can return."""
        return quantized(self._kmax, self.q) if self.q is not None else self.upper

    def draw(self, rng: random.Random) -> float:
        if self.log:
            lo, hi = math.log(self.lower, self.base), math.log(self.upper, self.base)
            value = self.base ** rng.uniform(lo, hi)
        else:
            value = rng.uniform(self.lower, self.upper)
        if self.q is not None:
            k = min(max(round(value / self.q), self._kmin), self._kmax)
            value = quantized(k, self.q)
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
        return render_call(name, lower=self.lower, upper=self.upper, q=self.q, base=self.base if self.log else None)

    def __post_init__(self) -> None:
        call = self.describe()
        lower, upper = as_integer(call, "lower", self.lower), as_integer(call, "upper", self.upper)
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
            object.__setattr__(self, "base", check_base(call, self.base))
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.q is not None:
            q = as_integer(call, "q", self.q)
            if q < 1:
                raise SearchSpaceError(f"{call}: q must be a positive integer, got {self.q!r}")
            kmin, kmax = multiples(call, lower, upper, q)
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
        return render_call("qrandn" if self.q is not None else "randn", mean=self.mean, sd=self.sd, q=self.q)

    def __post_init__(self) -> None:
        call = self.describe()
        object.__setattr__(self, "mean", as_real(call, "mean", self.mean))
        sd = as_real(call, "sd", self.sd)
        if sd <= 0:
            raise SearchSpaceError(f"{call}: sd must be > 0; use a constant value for a fixed number")
        object.__setattr__(self, "sd", sd)
        if self.q is not None:
            q = as_real(call, "q", self.q)
            if q <= 0:
                raise SearchSpaceError(f"{call}: q must be > 0, got {self.q!r}")
            object.__setattr__(self, "q", q)

    def draw(self, rng: random.Random) -> float:
        value = rng.gauss(self.mean, self.sd)
        return quantized(round(value / self.q), self.q) if self.q is not None else value


@dataclass(frozen=True)
class Categorical(Domain):
    """One of ``categories``, uniformly; a category may itself hold domains (conditional spaces)."""

    categories: tuple[Any, ...]

    def describe(self) -> str:
        return f"choice({list(self.categories)!r})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "categories", as_values("choice", "categories", self.categories))

    def draw(self, rng: random.Random) -> Any:
        return self.categories[rng.randrange(len(self.categories))]


@dataclass(frozen=True)
class GridSearch(Domain):
    """Every one of ``values``, each in its own variant (expanded, never sampled)."""

    values: tuple[Any, ...]

    def describe(self) -> str:
        return f"grid_search({list(self.values)!r})"

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", as_values("grid_search", "values", self.values))


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
        object.__setattr__(self, "_pass_spec", takes_spec(self.fn))

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


__all__ = ["Categorical", "Domain", "Float", "Function", "GridSearch", "Integer", "Normal", "SearchSpaceError"]
