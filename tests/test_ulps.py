"""The recordings' comparison (tests/_ulps.py) lets a float differ by a few ulps, and nothing else."""

from __future__ import annotations

import math

from tests._ulps import differences


def test_a_float_may_differ_in_its_last_places_only() -> None:
    x = 0.023877329777338932
    assert differences(0.023877329777338935, x) == []
    assert differences(math.nextafter(x, 1.0), x) == []
    assert differences(x * (1 + 1e-9), x) != []
    assert differences(float("nan"), float("nan")) == []


def test_everything_else_must_be_equal() -> None:
    assert differences({"a": [1, 0.5], "b": "x"}, {"b": "x", "a": [1, 0.5]}) == []  # (key order: as ==)
    assert differences({"a": 1}, {"a": 1.0}) != []  # an int for a float
    assert differences({"a": True}, {"a": 1}) != []
    assert differences({"a": 1, "b": 2}, {"a": 1}) != []
    assert differences([1, 2], [1, 2, 3]) != []
    assert differences([1, 2], (1, 2)) != []
    assert differences({"a": [0.1, "c"]}, {"a": [0.1, "d"]}) == ["/a[1]: 'c' != 'd'"]
