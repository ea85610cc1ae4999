"""Walking a param_space: validation, grid expansion and per-variant resolution.

A space is a tree of dicts (keys of JSON's types, as Ray's), lists and tuples whose leaves are
constants or :class:`~actors.search._domain.Domain` objects.  Resolution happens
in two phases, as in Ray Tune: grid values and random domains first, then
``sample_from`` functions in key order, retried in passes so one function may
read another's value.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from actors.search._domain import Categorical, Domain, Function, GridSearch, SearchSpaceError

Path = tuple[Any, ...]
_KEY_TYPES = (str, int, float, type(None))  # what JSON takes as a dict key (bool is an int)


def format_path(path: Path) -> str:
    """``("model", "layers", 0)`` -> ``model/layers/0`` (Ray's flattened-key style)."""
    return "/".join(str(p) for p in path) or "<root>"


def _is_literal_grid(value: Any) -> bool:
    """Ray users write grids as ``{"grid_search": [...]}``; accept that spelling too."""
    return isinstance(value, dict) and len(value) == 1 and "grid_search" in value


def normalize(space: Any, path: Path = (), inside: str | None = None) -> Any:
    """Copy ``space`` with literal grid dicts turned into :class:`GridSearch`, validating as it goes.

    ``inside`` names the enclosing grid/choice, where a nested grid cannot be expanded.
    """
    if _is_literal_grid(space):
        try:
            space = GridSearch(space["grid_search"])
        except SearchSpaceError as exc:
            raise SearchSpaceError(f"at {format_path(path)!r}: {exc}") from None
    if isinstance(space, GridSearch):
        if inside is not None:
            raise SearchSpaceError(
                f"at {format_path(path)!r}: grid_search cannot be nested inside {inside}; "
                "move it to its own key of the param_space"
            )
        return GridSearch(tuple(normalize(v, path, "grid_search") for v in space.values))
    if isinstance(space, Categorical):
        return Categorical(tuple(normalize(v, path, inside or "choice") for v in space.categories))
    if isinstance(space, dict):
        out: dict[Any, Any] = {}
        for key, value in space.items():
            if not isinstance(key, _KEY_TYPES):  # (Ray's configs go through JSON: its key types, as Ray's)
                raise SearchSpaceError(
                    f"at {format_path(path)!r}: key {key!r} ({type(key).__name__}) cannot be a param_space key; "
                    "use a string (or an int, float, bool or None, which JSON files store as strings)"
                )
            out[key] = normalize(value, (*path, key), inside)
        return out
    if isinstance(space, list | tuple):
        items = [normalize(v, (*path, i), inside) for i, v in enumerate(space)]
        return items if isinstance(space, list) else tuple(items)
    return space


def has_domain(space: Any) -> bool:
    """Whether ``space`` holds a search domain anywhere (in a dict's values or a list's items)."""
    if isinstance(space, Domain):
        return True
    if isinstance(space, dict):
        return any(has_domain(v) for v in space.values())
    if isinstance(space, list | tuple):
        return any(has_domain(v) for v in space)
    return False


def validate_param_space(space: Any) -> None:
    """Check a whole param_space eagerly; raise :class:`SearchSpaceError` naming the bad entry."""
    if not isinstance(space, dict):
        raise SearchSpaceError(
            f"param_space must be a dict of parameter names to values or domains, got {type(space).__name__}"
        )
    normalize(space)


def find_grids(space: Any, path: Path = ()) -> list[tuple[Path, GridSearch]]:
    """Grid domains of a normalized space, in key order (the generator sorts them by path, as Ray)."""
    if isinstance(space, GridSearch):
        return [(path, space)]
    if isinstance(space, dict):
        return [g for k, v in space.items() for g in find_grids(v, (*path, k))]
    if isinstance(space, list | tuple):
        return [g for i, v in enumerate(space) for g in find_grids(v, (*path, i))]
    return []


class _Pending:
    """Placeholder for a ``sample_from`` value not computed yet."""

    __slots__ = ("domain", "path")

    def __init__(self, domain: Function, path: Path) -> None:
        self.domain, self.path = domain, path


class _Unresolved(Exception):
    """Raised through user code when it reads a ``sample_from`` value that is still pending."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{format_path(path)!r} is not resolved yet")
        self.path = path


def _view(value: Any, path: Path) -> Any:
    if isinstance(value, _Pending | GridSearch):  # a grid is unresolved while presampling
        raise _Unresolved(path)
    if isinstance(value, dict):
        return ConfigView(value, path)
    if isinstance(value, list):
        return _ListView(value, path)
    return value


class ConfigView(Mapping[str, Any]):
    """Read-only view of a resolved config with both ``view.key`` and ``view["key"]`` access."""

    __slots__ = ("_data", "_path")

    def __init__(self, data: dict[str, Any], path: Path = ()) -> None:
        self._data, self._path = data, path

    def __getitem__(self, key: str) -> Any:
        return _view(self._data[key], (*self._path, key))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            where = f"config[{format_path(self._path)!r}]" if self._path else "config"
            raise AttributeError(f"{where} has no key {name!r}; keys are {sorted(self._data)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ConfigView({self._data!r})"


class _ListView(Sequence[Any]):
    __slots__ = ("_data", "_path")

    def __init__(self, data: list[Any], path: Path) -> None:
        self._data, self._path = data, path

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._data)))]
        return _view(self._data[index], (*self._path, index))

    def __len__(self) -> int:
        return len(self._data)


class Spec:
    """What a ``sample_from`` function receives: ``spec.config`` and a seeded ``spec.random``."""

    __slots__ = ("config", "random")

    def __init__(self, config: dict[str, Any], rng: random.Random) -> None:
        self.config = ConfigView(config)
        self.random = rng

    def __getitem__(self, key: str) -> Any:
        if key == "config":
            return self.config
        raise KeyError(f"spec has no key {key!r}; use spec.config")


def _build(
    space: Any, path: Path, grid: dict[Path, Any] | None, rng: random.Random, pending: list[_Pending]
) -> Any:
    """Phase one: substitute grid values (kept as grids when ``grid`` is None), sample random
    domains, park sample_from functions."""
    if isinstance(space, GridSearch):
        return space if grid is None else _build(grid[path], path, grid, rng, pending)
    if isinstance(space, Function):
        marker = _Pending(space, path)
        pending.append(marker)
        return marker
    if isinstance(space, Domain):
        return _build(space.draw(rng), path, grid, rng, pending)
    if isinstance(space, dict):
        return {k: _build(v, (*path, k), grid, rng, pending) for k, v in space.items()}
    if isinstance(space, list | tuple):
        items = [_build(v, (*path, i), grid, rng, pending) for i, v in enumerate(space)]
        return items if isinstance(space, list) else tuple(items)
    return space


def _assign(root: Any, path: Path, value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, tuple):
        raise SearchSpaceError(
            f"at {format_path(path)!r}: sample_from inside a tuple is not supported; use a list"
        )
    node[path[-1]] = value


def _call(domain: Function, spec: Spec) -> Any:
    """As Ray's ``sample_from``: ``fn(config)``, retried as ``fn(spec)`` when it reads ``spec.config``."""
    if not domain._pass_spec:
        return domain.fn()
    try:
        return domain.fn(spec.config)
    except (AttributeError, KeyError):
        return domain.fn(spec)


def _evaluate(config: Any, pending: list[_Pending], rng: random.Random, strict: bool) -> list[_Pending]:
    """Phase two: call the parked sample_from functions in passes until none is left.

    Returns the functions that stay blocked (only when not ``strict``; then they wait for a grid value).
    """
    if pending and not pending[0].path:
        raise SearchSpaceError("the param_space itself cannot be a sample_from; use a dict of parameters")
    spec = Spec(config, rng)
    while pending:
        waiting: list[_Pending] = []
        blocked: dict[str, str] = {}
        for item in pending:
            try:
                value = _call(item.domain, spec)
            except _Unresolved as exc:
                waiting.append(item)
                blocked[format_path(item.path)] = format_path(exc.path)
                continue
            except Exception as exc:
                raise SearchSpaceError(
                    f"{item.domain.describe()} at {format_path(item.path)!r} raised "
                    f"{type(exc).__name__}: {exc}; fix the function or the keys it reads"
                ) from exc
            _assign(config, item.path, value)
        if len(waiting) == len(pending):
            if not strict:
                return waiting
            cycle = ", ".join(f"{k!r} needs {v!r}" for k, v in blocked.items())
            raise SearchSpaceError(
                f"sample_from functions depend on each other in a cycle ({cycle}); break the cycle"
            )
        pending = waiting
    return []


def resolve(space: Any, grid: dict[Path, Any], rng: random.Random) -> Any:
    """Resolve a normalized space for one grid point; every random draw comes from ``rng``."""
    pending: list[_Pending] = []
    config = _build(space, (), grid, rng, pending)
    _evaluate(config, pending, rng, strict=True)
    return config


def presample(space: Any, rng: random.Random) -> Any:
    """Draw what needs no grid value once, for Ray's ``constant_grid_search=True``.

    Random domains outside grid values, and sample_from functions that read no grid
    value, become constants; grids and the functions that read them stay, to be
    resolved per grid point.  As in Ray, domains inside a grid value are drawn per point.
    """
    pending: list[_Pending] = []
    config = _build(space, (), None, rng, pending)
    for item in _evaluate(config, pending, rng, strict=False):
        _assign(config, item.path, item.domain)
    return config


def flatten(space: Any, path: Path = ()) -> dict[Path, Any]:
    """Leaves of a (normalized) space by path; domains and constants alike."""
    if isinstance(space, dict) and space:
        out: dict[Path, Any] = {}
        for k, v in space.items():
            out.update(flatten(v, (*path, k)))
        return out
    return {path: space}
