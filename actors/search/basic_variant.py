"""Ray Tune's module path for the default searcher (``ray.tune.search.basic_variant``)."""

from __future__ import annotations

from actors.search._variant import BasicVariantGenerator

__all__ = ["BasicVariantGenerator"]
