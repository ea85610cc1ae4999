"""``points_to_evaluate``: configs the default generator runs first (Ray Tune's semantics).

Each point takes the place of one of the ``num_samples`` sweeps: its values
replace the space's entries at the same paths (a grid, a domain or a constant),
and what it leaves out is swept or sampled as usual, so a point that fixes no
grid key still yields one trial per grid point.
"""

from __future__ import annotations

from typing import Any

from actors.search._domain import Domain, SearchSpaceError
from actors.search._space import Path, format_path, normalize


def check_points(points: Any) -> list[dict[str, Any]]:
    """Validate ``points_to_evaluate`` and normalize each point (literal grid dicts become grids)."""
    if points is None:
        return []
    if isinstance(points, dict):
        raise TypeError(
            "points_to_evaluate must be a list of dicts, got a dict; wrap one point in a list "
            "([{...}]), or pass a search space as BasicVariantGenerator(param_space={...})"
        )
    if isinstance(points, str | bytes) or not isinstance(points, list | tuple):
        raise TypeError(
            f"points_to_evaluate must be a list of dicts of parameter values, got {type(points).__name__} "
            f"{points!r}"
        )
    out: list[dict[str, Any]] = []
    for i, point in enumerate(points):
        if not isinstance(point, dict):
            raise TypeError(
                f"points_to_evaluate[{i}] must be a dict of parameter values such as {{'lr': 0.01}}, "
                f"got {type(point).__name__} {point!r}"
            )
        try:
            out.append(normalize(point))
        except SearchSpaceError as exc:
            raise SearchSpaceError(f"points_to_evaluate[{i}]: {exc}") from None
    return out


def _missing(where: str, path: Path) -> SearchSpaceError:
    return SearchSpaceError(
        f"{where} sets {format_path(path)!r}, which is not in the param_space; add that key to "
        "Tuner(param_space=...) or remove it from the point"
    )


def _apply(node: Any, value: Any, path: Path, where: str) -> Any:
    if isinstance(value, Domain):
        return node  # as Ray: a point's own grids and domains are left out
    if isinstance(value, dict) and type(node) is dict:
        out = dict(node)
        for key, item in value.items():
            if key not in node:
                raise _missing(where, (*path, key))
            out[key] = _apply(node[key], item, (*path, key), where)
        return out
    if isinstance(value, list | tuple) and isinstance(node, list | tuple):
        if len(value) > len(node):
            raise _missing(where, (*path, len(node)))
        items = list(node)
        for i, item in enumerate(value):
            items[i] = _apply(node[i], item, (*path, i), where)
        return items if isinstance(node, list) else tuple(items)
    if isinstance(value, dict) and not value:
        return node  # as Ray: an empty dict sets nothing
    return value  # replaces a constant, a domain, a grid or a whole sub-dict


def apply_point(space: dict[str, Any], point: dict[str, Any], index: int) -> dict[str, Any]:
    """``space`` with point ``index``'s values in place; raises naming a path the space lacks."""
    applied: dict[str, Any] = _apply(space, point, (), f"points_to_evaluate[{index}]")
    return applied
