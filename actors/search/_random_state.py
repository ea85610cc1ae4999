"""Ray Tune's ``random_state`` arguments, mapped onto Python's ``random``.

Ray samples with numpy and takes an int seed, a ``numpy.random.Generator`` or
``RandomState``, or ``None`` for numpy's global generator.  audition samples
with :class:`random.Random` (numpy is not a dependency), so the same seed gives
other values than Ray, but the same seed always gives the same values.
"""

from __future__ import annotations

import random
from typing import Any

_HELP = "an int seed, a random.Random, a numpy.random.Generator or RandomState, or None"


def _numpy_seed(value: Any) -> int | None:
    """A seed drawn from a numpy Generator/RandomState (duck-typed: numpy is never imported here)."""
    if not type(value).__module__.startswith("numpy.random"):
        return None
    if callable(getattr(value, "integers", None)):  # Generator
        return int(value.integers(0, 2**63 - 1))
    if callable(getattr(value, "randint", None)):  # legacy RandomState
        return int(value.randint(0, 2**31 - 1))
    return None


def seed_of(value: Any, name: str = "random_state") -> int:
    """A fixed int seed for a searcher: ``value`` itself, one drawn from a generator, or a fresh one."""
    if value is None:
        return random.SystemRandom().getrandbits(63)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, random.Random):
        return value.getrandbits(63)
    drawn = _numpy_seed(value)
    if drawn is None:
        raise TypeError(f"{name} must be {_HELP}; got {type(value).__name__} {value!r}")
    return drawn


def rng_of(value: Any) -> random.Random:
    """The generator ``Domain.sample(random_state=...)`` draws from.

    ``None`` seeds from the global ``random`` module, so ``random.seed(n)`` makes
    unseeded draws reproducible, as ``numpy.random.seed(n)`` does in Ray.
    """
    if isinstance(value, random.Random):
        return value
    if value is None:
        return random.Random(random.getrandbits(64))
    return random.Random(seed_of(value))


def check_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(
            f"size must be an integer >= 1, got {size!r}; use size=1 (the default) for one value "
            "and size=n for a list of n values"
        )
    return size
