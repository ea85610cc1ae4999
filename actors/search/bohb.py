"""Ray Tune's module path for the BOHB searcher (``ray.tune.search.bohb``).

``BOHB`` is hpbandster's config generator, as Ray's module exports it (loaded when first named).
"""

from __future__ import annotations

from typing import Any

from actors.search._bohb import TuneBOHB


def __getattr__(name: str) -> Any:
    if name == "BOHB":
        from actors.search._bohb import import_bohb

        return import_bohb()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BOHB", "TuneBOHB"]  # noqa: F822  (BOHB: the module __getattr__ above)
