"""Ray Tune 2.60's numpy draws, call for call, so a seed gives Ray's configs.

Ray samples every domain with numpy (``ray/tune/search/sample.py``): an int
``random_state`` becomes ``numpy.random.default_rng(seed)``, a ``Generator`` or
``RandomState`` is used as given, ``None`` means numpy's global stream.  These
functions make the same calls with the same arguments in the same order, so the
values are bit-identical.  numpy stays optional: :func:`numpy_or_none` is the one
import, and callers fall back to Python's ``random`` (other values) without it.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from typing import Any


def numpy_or_none() -> Any:
    """The numpy module, or None when it is not installed (it is never a dependency)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def warn_without_numpy(what: str) -> None:
    """Say once per call site that a seed gives audition's own values, not Ray's, without numpy."""
    warnings.warn(
        f"{what} is seeded but numpy is not installed, so the draws use Python's random module: "
        "reproducible, but not the values Ray Tune draws for this seed; pip install numpy to get Ray's",
        RuntimeWarning, stacklevel=3)


def is_numpy_rng(value: Any) -> bool:
    """A ``numpy.random.Generator`` or ``RandomState`` (duck-typed: numpy is not imported for this)."""
    return type(value).__module__.startswith("numpy.random") and (
        callable(getattr(value, "integers", None)) or callable(getattr(value, "randint", None)))


def rng_state(rng: Any) -> Any:
    """What a saved searcher state holds of its generator: a ``numpy.random.Generator`` as its bit
    generator's state (plain ints, which pickle ~6x faster than the object: a simulated experiment
    saves it every second), anything else (a ``RandomState``, ``None``) as it is."""
    np = numpy_or_none()
    if np is not None and isinstance(rng, np.random.Generator):
        return {"numpy_generator": dict(rng.bit_generator.state)}
    return rng


def rng_from_state(saved: Any) -> Any:
    """The generator ``rng_state`` saved (a Generator object itself, as the first states held, too)."""
    if isinstance(saved, dict) and "numpy_generator" in saved:
        np = numpy_or_none()
        if np is None:
            raise RuntimeError("this search was saved drawing with numpy (Ray's draws), which is not "
                               "installed here: pip install numpy to resume it")
        state = saved["numpy_generator"]
        bit_generator = getattr(np.random, state["bit_generator"])()
        bit_generator.state = state
        return np.random.Generator(bit_generator)
    return saved


class RayRng:
    """Ray's ``_BackwardsCompatibleNumpyRng``: one set of calls for a Generator, a RandomState or
    the global stream (``None``), with ``integers`` meaning ``randint`` on the legacy ones."""

    def __init__(self, np: Any, source: Any) -> None:
        self.np = np
        if source is None or is_numpy_rng(source):
            self.rng = source
        else:
            self.rng = np.random.default_rng(source)

    @property
    def _target(self) -> Any:
        return self.np.random if self.rng is None else self.rng

    @property
    def legacy(self) -> bool:
        return not isinstance(self.rng, self.np.random.Generator)

    def uniform(self, low: Any, high: Any, size: int) -> Any:
        return self._target.uniform(low, high, size=size)

    def integers(self, low: int, high: int, size: int) -> Any:
        target = self._target
        return (target.randint if self.legacy else target.integers)(low, high, size=size)

    def normal(self, mean: float, sd: float, size: int) -> Any:
        return self._target.normal(mean, sd, size=size)

    def choice(self, count: int, size: int) -> Any:
        return self._target.choice(self.np.arange(0, count), size=size)


def _grid_index(bound: float, q: float, round_fn: Callable[[float], int]) -> float:
    """Ray's ``Quantized._grid_index``: ``bound / q`` snapped inwards (infinite bounds kept)."""
    if not math.isfinite(bound):
        return bound
    scaled = bound / q
    nearest = round(scaled)
    if math.isclose(scaled, nearest):
        return nearest
    return round_fn(scaled)


def _floats(domain: Any, rng: RayRng, lower: float, upper: float, size: int) -> Any:
    np = rng.np
    if type(domain).__name__ == "Normal":
        return rng.normal(domain.mean, domain.sd, size)
    if domain.log:
        return np.exp(rng.uniform(np.log(lower), np.log(upper), size))
    return rng.uniform(lower, upper, size)


def _ints(domain: Any, rng: RayRng, lower: int, upper: int, size: int) -> Any:
    np = rng.np
    if domain.log:
        return np.floor(np.exp(rng.uniform(np.log(lower), np.log(upper), size))).astype(int)
    return rng.integers(lower, upper, size)


def ray_sample(domain: Any, rng: RayRng, size: int) -> list[Any]:
    """``size`` values of ``domain`` drawn exactly as Ray 2.60's samplers draw them."""
    kind = type(domain).__name__
    np = rng.np
    if kind == "Categorical":
        return [domain.categories[int(i)] for i in rng.choice(len(domain.categories), size)]
    if kind == "Integer":
        if domain.q is None:
            return [int(v) for v in _ints(domain, rng, domain.lower, domain.upper, size)]
        low = int(_grid_index(domain.lower, domain.q, math.ceil))
        high = int(_grid_index(domain.upper, domain.q, math.floor))
        # as Ray: the index range is upper-exclusive when q == 1, inclusive otherwise
        indices = _ints(domain, rng, low, high + (0 if domain.q == 1 else 1), size)
        return [int(v) for v in np.multiply(indices, domain.q)]
    if kind in ("Float", "Normal"):
        lower, upper = (-math.inf, math.inf) if kind == "Normal" else (domain.lower, domain.upper)
        if domain.q is None:
            return [float(v) for v in _floats(domain, rng, lower, upper, size)]
        low = _grid_index(lower, domain.q, math.ceil) * domain.q
        high = _grid_index(upper, domain.q, math.floor) * domain.q
        values = _floats(domain, rng, low, high, size)
        return [float(v) for v in np.round(np.divide(values, domain.q)) * domain.q]
    from actors.search._domain import SearchSpaceError

    raise SearchSpaceError(f"{domain.describe()} cannot be sampled on its own")


def sample_values(domain: Any, config: Any, size: int, random_state: Any) -> list[Any]:
    """``Domain.sample``'s values: Ray's numpy draws when numpy is there and the state is not a
    ``random.Random``; else Python's ``random`` (audition's values), warning if a seed was given."""
    from actors.search._random_state import rng_of, seed_of

    np = None if isinstance(random_state, random.Random) else numpy_or_none()
    if np is None and random_state is not None and not isinstance(random_state, random.Random):
        warn_without_numpy("Domain.sample(random_state=...)")
    if type(domain).__name__ == "Function":
        rng = random.Random() if np is not None else rng_of(random_state)
        return [domain._draw_for(config[i] if isinstance(config, list) else config, rng) for i in range(size)]
    if np is None:
        rng = rng_of(random_state)
        return [domain.draw(rng) for _ in range(size)]
    source = random_state if random_state is None or is_numpy_rng(random_state) else seed_of(random_state)
    return ray_sample(domain, RayRng(np, source), size)
