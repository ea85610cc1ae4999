"""Ray Tune's module path for the BayesOpt searcher (``ray.tune.search.bayesopt``)."""

from __future__ import annotations

from actors.search._bayesopt import BayesOptSearch

__all__ = ["BayesOptSearch"]
