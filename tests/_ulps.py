"""Comparing values recorded from Ray with audition's, floats to a few units in the last place.

numpy's ``exp``/``log`` take a SIMD path chosen by the CPU at run time, and two CPUs can round the same
draw one unit in the last place apart: a log-uniform value recorded from Ray on one machine was
``0.023877329777338932``, and the same seeded draw here (an AMD EPYC without AVX-512) is
``...8935`` (the same draw, a different rounding). Everything else (keys, ints, strings, which trial got
what) must be equal.
"""

from __future__ import annotations

import math
from typing import Any

REL = 1e-12  # a few ulps of a double, far below any difference a sampler or a decision could make


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Where ``got`` and ``want`` differ (empty: the same, floats within ``REL``)."""
    if isinstance(want, float) and isinstance(got, float) and not isinstance(got, bool):
        same = got == want or math.isclose(got, want, rel_tol=REL, abs_tol=0.0) or (math.isnan(got)
                                                                                   and math.isnan(want))
        return [] if same else [f"{path or '.'}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):  # (as ==: a recording that keeps an order holds it as a list)
            return [f"{path or '.'}: keys {sorted(map(str, got))} != {sorted(map(str, want))}"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}/{k}")]
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)) and type(got) is type(want):
        if len(got) != len(want):
            return [f"{path or '.'}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}[{i}]")]
    return [] if (type(got) is type(want) and got == want) else [f"{path or '.'}: {got!r} != {want!r}"]


def assert_close(got: Any, want: Any) -> None:
    found = differences(got, want)
    assert not found, "differs from the recording:\n" + "\n".join(found[:20])
