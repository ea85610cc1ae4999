"""numpy's float arithmetic for the few statistics Ray Tune's schedulers take, in pure Python.

Ray decides with ``numpy.nanpercentile`` (ASHA), ``numpy.mean`` and ``numpy.median``
(median stopping rule).  A decision flips when a value sits exactly on a cutoff, so
"close enough" is not enough: these functions repeat numpy's operations in numpy's
order (linear interpolation as ``numpy._lerp`` does it, pairwise summation as
``numpy.add.reduce`` does it), which gives bit-identical floats without making numpy
a dependency.  ``tests/test_ray_scheduler_fidelity.py`` checks them against values
recorded from numpy.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

_BLOCK = 128  # numpy's PW_BLOCKSIZE


def _pairwise_sum(a: Sequence[float], lo: int, n: int) -> float:
    """numpy's ``pairwise_sum`` for float64 (8 accumulators, blocks of 128)."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= _BLOCK:
        r = [a[lo + j] for j in range(8)]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[lo + i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for k in range(i, n):
            res += a[lo + k]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, lo, n2) + _pairwise_sum(a, lo + n2, n - n2)


def np_sum(values: Sequence[float]) -> float:
    """``numpy.sum`` of a float64 vector."""
    a = [float(v) for v in values]
    return _pairwise_sum(a, 0, len(a))


def np_mean(values: Sequence[float]) -> float:
    """``numpy.mean`` of a non-empty float64 vector."""
    return np_sum(values) / len(values)


def np_std(values: Sequence[float]) -> float:
    """``numpy.std`` (population) of a non-empty float64 vector: the mean, the squared
    deviations, their pairwise sum over ``n``, its square root; NaN in, NaN out."""
    a = [float(v) for v in values]
    mean = np_sum(a) / len(a)
    sq = [(v - mean) * (v - mean) for v in a]
    return math.sqrt(_pairwise_sum(sq, 0, len(sq)) / len(sq))


def np_median(values: Sequence[float]) -> float:
    """``numpy.median`` of a non-empty vector of finite floats."""
    s = sorted(float(v) for v in values)
    n = len(s)
    h = n // 2
    return np_mean(s[h - 1:h + 1]) if n % 2 == 0 else np_mean(s[h:h + 1])


def _lerp(a: float, b: float, t: float) -> float:
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def nanpercentile(values: Sequence[float], q: float) -> float:
    """``numpy.nanpercentile(values, q)`` with the default linear method (NaN if all are NaN)."""
    s = sorted(v for v in (float(x) for x in values) if not math.isnan(v))
    n = len(s)
    if n == 0:
        return math.nan
    vi = (n - 1) * (q / 100)
    if vi >= n - 1:
        prev = nxt = n - 1
        gamma = vi - (-1)  # numpy computes gamma after moving the index to -1
    elif vi < 0:
        prev = nxt = 0
        gamma = vi - 0
    else:
        prev = math.floor(vi)
        nxt = prev + 1
        gamma = vi - prev
    return _lerp(s[prev], s[nxt], gamma)


def numpy_legacy_rng(seed: int) -> random.Random:
    """A ``random.Random`` whose ``random()`` returns what ``numpy.random.random_sample()`` returns
    after ``numpy.random.seed(seed)``: the same Mersenne Twister, seeded as numpy's legacy
    ``RandomState`` seeds it from an integer (``init_genrand``, where Python's seeding uses
    ``init_by_array``), and both make a double from two 32-bit draws the same way."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 0xFFFFFFFF:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1] (numpy's range), got {seed!r}")
    key = [seed]
    for i in range(1, 624):
        prev = key[-1]
        key.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, (*key, 624), None))
    return rng


def numpy_choice(rng: random.Random, p: Sequence[float]) -> int:
    """``numpy.random.choice(len(p), p=p)`` for the legacy generator: the running sum of ``p``,
    normalised by its last value, searched (``side="right"``) for one uniform draw."""
    cdf: list[float] = []
    acc = 0.0
    for x in p:
        acc = acc + x if cdf else x
        cdf.append(acc)
    cdf = [c / cdf[-1] for c in cdf]
    return bisect.bisect_right(cdf, rng.random())


__all__ = ["nanpercentile", "np_mean", "np_median", "np_std", "np_sum", "numpy_choice", "numpy_legacy_rng"]
