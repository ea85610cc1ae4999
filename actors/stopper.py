"""Ray Tune's module name for the stoppers (``ray.tune.stopper``): the same classes as ``actors.stoppers``."""

from __future__ import annotations

from actors.stoppers import *  # noqa: F403
from actors.stoppers import __all__  # noqa: F401
