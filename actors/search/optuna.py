"""Ray Tune's module path for the Optuna searcher (``ray.tune.search.optuna``)."""

from __future__ import annotations

from actors.search._optuna import OptunaSearch

__all__ = ["OptunaSearch"]
