"""Ray Tune's ``ray.tune.schedulers.pb2`` module path: ``from actors.schedulers.pb2 import PB2``."""

from __future__ import annotations

from actors.schedulers._pb2 import PB2

__all__ = ["PB2"]
