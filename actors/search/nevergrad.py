"""Ray Tune's module path for the Nevergrad searcher (``ray.tune.search.nevergrad``)."""

from __future__ import annotations

from actors.search._nevergrad import NevergradSearch

__all__ = ["NevergradSearch"]
