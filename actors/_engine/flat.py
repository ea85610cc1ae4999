"""Nested results as Ray Tune hands them to plugins: one level, keys joined by ``/``.

Ray Tune's controller flattens each result before the metric check, the scheduler's and the
searcher's hooks, so ``metric="val/loss"`` names ``{"val": {"loss": ...}}`` and a Ray plugin
reads ``result["config/lr"]``. The trial's ``last_result`` and the stopper's argument stay nested.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEP = "/"


def flatten(result: Mapping[str, Any]) -> dict[str, Any]:
    """A new one-level dict: a nested dict's entries become ``outer/inner`` keys, placed after the
    flat ones, level by level (Ray's order); an empty nested dict disappears. Lists stay values."""
    out: dict[str, Any] = {}
    nested: list[tuple[str, dict[str, Any]]] = []
    for k, v in result.items():  # once per result in the scheduler's and searcher's path: one pass
        if isinstance(v, dict):
            nested.append((k, v))
        else:
            out[k] = v
    while nested:
        level, nested = nested, []
        for k, v in level:
            for sub, value in v.items():
                key = f"{k}{SEP}{sub}"
                if isinstance(value, dict):
                    nested.append((key, value))
                else:
                    out[key] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a/b": 1, "c": 2}`` -> ``{"a": {"b": 1}, "c": 2}`` (Ray's ``unflatten_dict``), keys in first-seen order.
    A key under another key's value, or one that is also a parent, is a ``ValueError`` naming both."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(SEP)
        node = out
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"parameter {key!r} nests under {part!r}, which is already a value; "
                                 "rename one of them")
            node = child
        if isinstance(node.get(leaf), dict):
            raise ValueError(f"parameter {key!r} is also the parent of other parameters; rename one of them")
        node[leaf] = value
    return out


def is_flat(result: Mapping[str, Any]) -> bool:
    return not any(isinstance(v, dict) for v in result.values())


def lookup(result: Mapping[str, Any], key: str, default: Any = None, sequences: bool = False) -> Any:
    """``flatten(result).get(key, default)`` without building the flat dict: ``result[key]``, or for
    ``a/b`` the nested ``result["a"]["b"]`` (dicts only, as ``flatten``: a list is a value).
    ``sequences``: ``a/0/b`` also indexes lists and tuples, as Ray's ``unflattened_lookup`` (which
    ``Result.get_best_checkpoint`` uses) does."""
    if key in result:
        return result[key]
    base: Any = result
    for part in key.split(SEP):
        if isinstance(base, dict) and part in base:
            base = base[part]
        elif (sequences and isinstance(base, (list, tuple)) and part.lstrip("-").isdigit()
              and -len(base) <= int(part) < len(base)):
            base = base[int(part)]
        else:
            return default
    return base


__all__ = ["SEP", "flatten", "is_flat", "lookup"]
