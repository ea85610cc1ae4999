"""A domain's arguments, checked when it is built: every bad one raises ``SearchSpaceError`` naming the fix.

Also the arithmetic of a quantized domain's grid (``multiples``, ``quantized``), done in decimal on
the literals the user typed, which both the checks and the draws use.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any


class SearchSpaceError(ValueError):
    """A param_space or one of its domains is malformed; the message says how to fix it."""


def render_call(name: str, **kwargs: Any) -> str:
    """Render a constructor call the way the user wrote it, for error messages."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items() if v is not None)})"


def as_real(call: str, param: str, value: Any) -> float:
    """Return ``value`` as a finite float, or raise naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SearchSpaceError(f"{call}: {param} must be a real number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise SearchSpaceError(f"{call}: {param} must be finite, got {value!r}; use a finite bound")
    return float(value)


def as_integer(call: str, param: str, value: Any) -> int:
    """Return ``value`` as an int (integral floats such as ``1e3`` are accepted)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SearchSpaceError(f"{call}: {param} must be an integer, got {type(value).__name__} {value!r}")
    return value


def check_base(call: str, base: Any) -> float:
    base_f = as_real(call, "base", base)
    if base_f <= 0 or base_f == 1:
        raise SearchSpaceError(f"{call}: base must be > 0 and != 1, got {base!r}; the usual choice is 10")
    return base_f


def multiples(call: str, lower: float, upper: float, q: float) -> tuple[int, int]:
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


def quantized(k: int, q: float) -> float:
    """``k * q`` without binary noise (3 * 0.1 is 0.3, not 0.30000000000000004)."""
    return float(Decimal(k) * Decimal(repr(q)))


def as_values(name: str, param: str, values: Any) -> tuple[Any, ...]:
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


def takes_spec(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` wants the spec argument (Ray accepts zero-argument functions too)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


__all__ = ["SearchSpaceError", "as_integer", "as_real", "as_values", "check_base", "multiples", "quantized",
           "render_call", "takes_spec"]
