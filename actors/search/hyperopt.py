"""Ray Tune's module path for the HyperOpt searcher (``ray.tune.search.hyperopt``)."""

from __future__ import annotations

from actors.search._hyperopt import HyperOptSearch

__all__ = ["HyperOptSearch"]
