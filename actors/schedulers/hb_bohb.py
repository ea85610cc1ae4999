"""Ray Tune's module path for HyperBand for BOHB (``ray.tune.schedulers.hb_bohb``)."""

from __future__ import annotations

from actors.schedulers._hb_bohb import HyperBandForBOHB

__all__ = ["HyperBandForBOHB"]
