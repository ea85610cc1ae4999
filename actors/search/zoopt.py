"""Ray Tune's module path for the ZOOpt searcher (``ray.tune.search.zoopt``)."""

from __future__ import annotations

from actors.search._zoopt import ZOOptSearch

__all__ = ["ZOOptSearch"]
