"""The errors pure code raises for users: a bad value a plugin or a resource request was given.

They live here, not with the driver's other errors (``actors._driver.errors``, which re-exports them), because
code that runs in the scheduler actor and the core (a ``PlacementGroupFactory`` a resources allocation function
builds there) raises them too, and that code imports nothing from the driver.
"""

from __future__ import annotations


class TuneError(Exception):
    """The experiment could not run or finish as asked (bad input, a crashed plugin, a stall)."""


class ConfigError(TuneError, ValueError):
    """A configuration value is invalid; raised before any actor starts."""


__all__ = ["ConfigError", "TuneError"]
