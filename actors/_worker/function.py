"""Running a function trainable: what it returns or yields is reported, as in Ray Tune.

Ray 2.60 (``function_trainable.py``, ``wrap_function``): a returned or yielded dict is one more
result, a number is reported as ``{"_metric": value}``, a falsy value (``None``, ``{}``, ``0``)
reports nothing, anything else is an error. The trial ends when the function returns.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from numbers import Number
from typing import Any

from actors.result import DEFAULT_METRIC


def run_function(fn: Callable[[dict[str, Any]], Any], config: dict[str, Any],
                 report: Callable[[dict[str, Any]], None]) -> None:
    """Call ``fn(config)``; report each value a generator yields, then what it returned."""
    out = fn(config)
    if inspect.isgenerator(out):  # also a generator returned by a wrapper (with_resources, partial)
        for value in out:
            report_output(value, report)
        return
    report_output(out, report)


def report_output(value: Any, report: Callable[[dict[str, Any]], None]) -> None:
    try:
        empty = not value  # Ray's `if not output: return`: None, {}, 0 report nothing
    except Exception:  # e.g. a numpy array: neither true nor false, so not a metric either
        empty = False
    if empty:
        return
    if isinstance(value, dict):
        report(value)
    elif isinstance(value, Number):
        report({DEFAULT_METRIC: value})
    else:
        raise ValueError(f"the trainable returned or yielded a {type(value).__name__} ({value!r:.80}); "
                         "return/yield a dict of metrics or a single number (reported as '_metric'), or None")


__all__ = ["run_function"]
