"""audition search spaces as HyperOpt expressions, the way Ray Tune 2.60 converts them.

The conversion decides which labels HyperOpt draws and in what shape, so it follows Ray's rules exactly
(an integer range ``[lower, upper)`` becomes ``uniformint(lower, upper - 1)``, a log integer range a
rounded ``qloguniform``, a choice's dict categories nested spaces labelled under the choice's name): the
same seed then gives the same suggestions as ``ray.tune.search.hyperopt.HyperOptSearch``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from actors.search._domain import Categorical, Domain, Float, Function, GridSearch, Integer, Normal
from actors.search._space import Path, format_path, has_domain


def import_hyperopt() -> Any:
    """The hyperopt package, its INFO lines (one per TPE suggestion) silenced as Ray Tune silences them."""
    logging.getLogger("hyperopt").setLevel(logging.WARNING)
    try:
        import hyperopt
    except ImportError as exc:
        raise ImportError(
            "HyperOptSearch needs the hyperopt package: pip install 'audition[hyperopt]' "
            "(or pip install hyperopt)") from exc
    return hyperopt


def convert_space(hpo: Any, space: Any, prefix: str = "") -> Any:
    """A copy of a (normalized) space with every domain turned into a HyperOpt expression labelled with
    its path (``a/b/0``, under ``prefix``); constants and HyperOpt expressions are kept as they are."""

    def walk(value: Any, path: Path) -> Any:
        if isinstance(value, Domain):
            label = "/".join(str(p) for p in ((prefix, *path) if prefix else path))
            return _expression(hpo, label, value)
        if isinstance(value, dict):
            return {k: walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*path, i)) for i, v in enumerate(value)]
        return value

    return walk(space, ())


def _expression(hpo: Any, label: str, domain: Domain) -> Any:
    hp, as_int = hpo.hp, hpo.pyll.scope.int
    if isinstance(domain, GridSearch):
        raise ValueError(f"HyperOptSearch: grid_search at {label!r} cannot be converted to a HyperOpt search "
                         "space (as in Ray Tune); use choice() for the values, or run the grid without a searcher")
    if isinstance(domain, Function):
        raise ValueError(f"HyperOptSearch: sample_from at {label!r} cannot be converted to a HyperOpt search "
                         "space (Ray Tune refuses it too); use a searchable domain there, or compute the value "
                         "from the config inside the trainable")
    if isinstance(domain, Float):
        lower, upper = (math.log(domain.lower), math.log(domain.upper)) if domain.log else (domain.lower, domain.upper)
        if domain.q is not None:
            return (hp.qloguniform if domain.log else hp.quniform)(label, lower, upper, domain.q)
        return (hp.loguniform if domain.log else hp.uniform)(label, lower, upper)
    if isinstance(domain, Normal):
        if domain.q is not None:
            return hp.qnormal(label, domain.mean, domain.sd, domain.q)
        return hp.normal(label, domain.mean, domain.sd)
    if isinstance(domain, Integer):
        if domain.log:  # (Ray: the exclusive upper bound is kept when quantized, made inclusive when not)
            if domain.q is not None:
                return as_int(hp.qloguniform(label, math.log(domain.lower), math.log(domain.upper), domain.q))
            return as_int(hp.qloguniform(label, math.log(domain.lower), math.log(domain.upper - 1), 1.0))
        if domain.q is not None:
            return as_int(hp.quniform(label, domain.lower, domain.upper - 1, domain.q))
        return hp.uniformint(label, domain.lower, high=domain.upper - 1)
    if isinstance(domain, Categorical):
        options = []
        for i, category in enumerate(domain.categories):
            if isinstance(category, dict):  # a nested space (or constants, kept as they are)
                options.append(convert_space(hpo, category, label) if has_domain(category) else category)
            elif isinstance(category, list) and category and isinstance(category[0], Domain):
                options.append(convert_space(hpo, dict(enumerate(category)), f"{label}/{i}"))  # (Ray: a dict)
            elif isinstance(category, Domain):
                options.append(_expression(hpo, f"{label}/{i}", category))
            else:
                options.append(category)
        return hp.choice(label, options)
    raise ValueError(f"HyperOptSearch: cannot convert {domain.describe()} at {label!r} to a HyperOpt search space")


def point_labels(hpo: Any, point: dict[str, Any], space: dict[str, Any]) -> dict[str, Any]:
    """A ``points_to_evaluate`` entry as HyperOpt stores a trial's values: by label (nested dicts may be
    given nested or as ``a/b`` keys), a choice's value as its index."""
    out: dict[str, Any] = {}

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*path, *str(k).split("/")))
            return
        out[format_path(path)] = _as_index(hpo, _node(space, path), value, format_path(path))

    walk(point, ())
    return out


def _node(space: Any, path: Path) -> Any:
    for key in path:
        if isinstance(space, dict) and key in space:
            space = space[key]
        elif isinstance(space, list) and str(key).isdigit() and int(key) < len(space):
            space = space[int(key)]
        else:
            return None
    return space


def _as_index(hpo: Any, node: Any, value: Any, label: str) -> Any:
    """A choice's value as the index HyperOpt draws (Ray's points name the category itself)."""
    if not (isinstance(node, hpo.pyll.Apply) and node.name == "switch"):
        return value
    categories = [a.obj for a in node.pos_args[1:] if a.name == "literal"]
    if value in categories:  # (== as Ray's list.index: 1 matches 1.0 and True)
        return categories.index(value)
    raise ValueError(f"HyperOptSearch: points_to_evaluate gives {value!r} for {label!r}, which is not one of its "
                     f"choices {categories!r}; name the category itself (not its index)")


__all__ = ["convert_space", "import_hyperopt", "point_labels"]
