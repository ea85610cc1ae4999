"""``create_searcher(name, **kwargs)``: Ray Tune's search algorithm names, mapped to audition's classes.

The shared rule (``build_by_name``, also behind ``create_scheduler``) is Ray 2.60's: the name is
looked up lower-cased, and only the keyword arguments the class's ``__init__`` takes are passed on
(Ray drops the rest silently; audition warns). A name Ray has but audition does not offer raises
``ValueError`` saying what to use instead; an unknown name raises Ray's ``ValueError`` listing the names.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

# Ray 2.60's ``SEARCH_ALG_IMPORT`` keys, in its order (listed by its error message)
RAY_SEARCHER_NAMES = ("variant_generator", "random", "ax", "hyperopt", "bayesopt", "bohb", "nevergrad", "optuna",
                      "zoopt", "hebo")
_PORT = ("audition does not port it; use create_searcher('optuna') (OptunaSearch) or create_searcher('hyperopt') "
         "(HyperOptSearch) or create_searcher('bayesopt') (BayesOptSearch) or create_searcher('zoopt') (ZOOptSearch) "
         "or create_searcher('nevergrad') (NevergradSearch) or create_searcher('bohb') (TuneBOHB), or write a Searcher "
         "subclass")
_NOT_OFFERED = {"ax": ("AxSearch", _PORT), "hebo": ("HEBOSearch", _PORT)}


def build_by_name(function: str, kind: str, name: Any, table: Mapping[str, Callable[[], Any]],
                  ray_names: tuple[str, ...], not_offered: Mapping[str, tuple[str, str]],
                  kwargs: dict[str, Any]) -> Any:
    """What ``table[name.lower()]`` builds from the ``kwargs`` its ``__init__`` takes; ``function`` and
    ``kind`` (Ray's argument name) are for messages."""
    if not isinstance(name, str):
        raise TypeError(f"{function}: the `{kind}` argument must be a name such as {ray_names[0]!r}, "
                        f"got {type(name).__name__}")
    key = name.lower()
    if key in not_offered:
        cls_name, instead = not_offered[key]
        raise ValueError(f"{function}({name!r}): that is Ray Tune's {cls_name}, which audition does not offer; "
                         f"instead: {instead}")
    if key not in table:
        raise ValueError(f"The `{kind}` argument must be one of {list(ray_names)}. Got: {key}")
    cls = table[key]()
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return cls(**kwargs)
    dropped = sorted(k for k in kwargs if k not in params)
    if dropped:
        warnings.warn(f"{function}({name!r}): {cls.__name__} takes no {dropped}; left out, as Ray Tune does "
                      f"(it takes {sorted(params)})", stacklevel=3)
    return cls(**{k: v for k, v in kwargs.items() if k in params})


def _table() -> dict[str, Callable[[], Any]]:
    from actors.search._bayesopt import BayesOptSearch
    from actors.search._bohb import TuneBOHB
    from actors.search._hyperopt import HyperOptSearch
    from actors.search._nevergrad import NevergradSearch
    from actors.search._optuna import OptunaSearch
    from actors.search._variant import BasicVariantGenerator
    from actors.search._zoopt import ZOOptSearch

    return {"variant_generator": lambda: BasicVariantGenerator, "random": lambda: BasicVariantGenerator,
            "optuna": lambda: OptunaSearch, "hyperopt": lambda: HyperOptSearch,
            "bayesopt": lambda: BayesOptSearch, "zoopt": lambda: ZOOptSearch, "nevergrad": lambda: NevergradSearch,
            "bohb": lambda: TuneBOHB}


def create_searcher(search_alg: str, **kwargs: Any) -> Any:
    """Ray Tune's ``create_searcher``: the searcher Ray's name stands for (``"variant_generator"`` and
    ``"random"``: ``BasicVariantGenerator``; ``"optuna"``: ``OptunaSearch``; ``"hyperopt"``: ``HyperOptSearch``;
    ``"bayesopt"``: ``BayesOptSearch``; ``"zoopt"``: ``ZOOptSearch``; ``"nevergrad"``: ``NevergradSearch``; ``"bohb"``:
    ``TuneBOHB``; any
    case), built from the ``kwargs`` its
    class takes."""
    return build_by_name("create_searcher", "search_alg", search_alg, _table(), RAY_SEARCHER_NAMES, _NOT_OFFERED,
                         kwargs)


__all__ = ["RAY_SEARCHER_NAMES", "build_by_name", "create_searcher"]
