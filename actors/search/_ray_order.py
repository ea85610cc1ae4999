"""Ray Tune 2.60's order of draws for one sweep of ``BasicVariantGenerator``.

A seed reproduces Ray's configs only if the draws happen in Ray's order
(``ray/tune/search/variant_generator.py``): a sweep draws all its grid points at
once; per grid point the random domains in key order (dicts, lists, tuples),
then the domains that the drawn values bring (a ``choice`` of dicts, a grid
value holding domains) one level at a time.  ``sample_from`` functions are not
drawn here: Ray's Tuner resolves them when each trial is added
(:func:`park_functions`), after every domain of the sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.search._domain import Domain, Function, GridSearch, SearchSpaceError
from actors.search._space import Path, _Pending, format_path


def copy_space(space: Any) -> Any:
    """Ray deep-copies the spec per grid point; domains are immutable, so containers suffice."""
    if isinstance(space, dict):
        return {k: copy_space(v) for k, v in space.items()}
    if isinstance(space, list):
        return [copy_space(v) for v in space]
    if isinstance(space, tuple):
        return tuple(copy_space(v) for v in space)
    return space


def _unresolved(space: Any, path: Path = ()) -> list[tuple[Path, Domain]]:
    """Ray's ``_split_resolved_unresolved_values``: domains and grids by path, functions left out."""
    if isinstance(space, Function):
        return []
    if isinstance(space, Domain):
        return [(path, space)]
    if isinstance(space, dict):
        return [u for k, v in space.items() for u in _unresolved(v, (*path, k))]
    if isinstance(space, list | tuple):
        return [u for i, v in enumerate(space) for u in _unresolved(v, (*path, i))]
    return []


def _assign(root: Any, path: Path, value: Any) -> Any:
    """``root`` with ``value`` at ``path`` (a tuple on the way is rebuilt, as Ray's ``assign_value``)."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(root, tuple):
        assert isinstance(key, int)
        return (*root[:key], _assign(root[key], rest, value), *root[key + 1:])
    root[key] = _assign(root[key], rest, value)
    return root


def ray_sweep(space: Any, constant: bool, draw: Callable[[Domain], Any]) -> list[Any]:
    """Every grid point of one sweep of ``space``, drawn in Ray's order (``_generate_variants_internal``).

    ``constant`` is ``constant_grid_search``: the domains outside grid values are drawn once for
    the sweep.  Functions stay in the configs for :func:`park_functions`.
    """
    spec = copy_space(space)
    found = _unresolved(spec)
    if not found:
        return [spec]
    domains = [(p, d) for p, d in found if not isinstance(d, GridSearch)]
    grids = sorted(((p, d) for p, d in found if isinstance(d, GridSearch)), key=lambda item: item[0])
    if constant:
        for path, domain in domains:
            spec = _assign(spec, path, draw(domain))
    out: list[Any] = []
    picks = [0] * len(grids)
    while True:
        point = copy_space(spec)
        for (path, grid), pick in zip(grids, picks, strict=True):
            point = _assign(point, path, grid.values[pick])
        if not constant:
            for path, domain in domains:
                point = _assign(point, path, draw(domain))
        out.extend(ray_sweep(point, constant, draw))
        for i, (_, grid) in enumerate(grids):  # the first grid key changes fastest
            picks[i] = (picks[i] + 1) % len(grid.values)
            if picks[i]:
                break
        else:
            return out


def park_functions(config: Any, path: Path = (), pending: list[_Pending] | None = None) -> list[_Pending]:
    """Replace the ``sample_from`` functions left in ``config`` by placeholders, in key order."""
    pending = [] if pending is None else pending
    if isinstance(config, tuple) and _unresolved_functions(config):
        raise SearchSpaceError(f"at {format_path(path)!r}: sample_from inside a tuple is not supported; use a list")
    items = config.items() if isinstance(config, dict) else enumerate(config) if isinstance(config, list) else ()
    for key, value in items:
        if isinstance(value, Function):
            marker = _Pending(value, (*path, key))
            pending.append(marker)
            config[key] = marker
        else:
            park_functions(value, (*path, key), pending)
    return pending


def _unresolved_functions(space: Any) -> bool:
    if isinstance(space, Function):
        return True
    values = space.values() if isinstance(space, dict) else space if isinstance(space, list | tuple) else ()
    return any(_unresolved_functions(v) for v in values)
