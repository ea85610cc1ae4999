"""numpy's global stream as the driver's script left it, for a searcher whose library draws from that stream.

Ray Tune runs its searchers in the driver, where ``numpy.random.seed(n)`` in the script governs the stream
that zoopt and nevergrad draw from. audition's searchers run in the controller, so such a searcher holds a
``DriverStream``: taken at ``fit()`` in the driver, made the global stream around each library call in the
controller, and handed back to the driver after the run (``actors._driver.searcher_setup``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class DriverStream:
    """The driver's numpy stream state (None: draw from this process's own, as before ``fit()``)."""

    def __init__(self) -> None:
        self.state: Any = None

    def capture(self) -> None:
        """At ``fit()``, in the driver: the stream as the script left it."""
        import numpy as np

        self.state = np.random.get_state()

    @contextmanager
    def use(self) -> Iterator[None]:
        """numpy's global draws inside come from this stream, which then goes on from where they left it."""
        import numpy as np

        if self.state is None:
            yield
            return
        outer = np.random.get_state()
        np.random.set_state(self.state)
        try:
            yield
        finally:
            self.state = np.random.get_state()
            np.random.set_state(outer)


__all__ = ["DriverStream"]
