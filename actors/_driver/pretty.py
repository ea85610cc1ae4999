"""Ray Tune's ``pretty_print`` (``ray.tune.logger``): a result as YAML, for printing in a training loop."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Set
from typing import Any

FLOW_AFTER = 3  # Ray's: a list longer than this is written on one line, [1, 2, 3, 4]


class _Fallback(json.JSONEncoder):
    """What JSON cannot encode, as Ray's ``SafeFallbackEncoder`` writes it: arrays as lists, numpy
    booleans and numbers as Python's, a NaN that is not a float as ``"null"``, anything else as ``str()``."""

    def default(self, value: Any) -> Any:
        try:
            if type(value).__module__ == "numpy" and type(value).__name__ == "ndarray":
                return value.tolist()
            if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
                return bool(value)
            if isinstance(value, numbers.Number) and math.isnan(value):  # type: ignore[arg-type]
                return "null"
            if isinstance(value, numbers.Integral):
                return int(value)
            if isinstance(value, numbers.Number):
                return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
        return str(value)


def pretty_print(result: dict[str, Any], exclude: Set[str] | None = None) -> str:
    """``result`` as YAML, without its ``config``, ``hist_stats``, ``None`` values and the keys in
    ``exclude`` (Ray 2.60's output, recorded: keys sorted, lists of more than three items on one line).
    Needs PyYAML (``pip install pyyaml``), as Ray's does."""
    try:
        import yaml
    except ImportError:
        raise ImportError("pretty_print needs PyYAML: pip install pyyaml") from None

    class Dumper(yaml.SafeDumper):
        def represent_sequence(self, tag: str, sequence: Any, flow_style: bool | None = None) -> Any:
            return super().represent_sequence(tag, sequence, flow_style=True if len(sequence) > FLOW_AFTER
                                              else flow_style)

    shown = {k: v for k, v in result.items() if k not in ("config", "hist_stats") and v is not None
             and (exclude is None or k not in exclude)}
    return yaml.dump(json.loads(json.dumps(shown, cls=_Fallback)), Dumper=Dumper, default_flow_style=False)


__all__ = ["pretty_print"]
