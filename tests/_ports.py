"""Ports for the tests' leaders and named admins, from a block of this pytest worker's own.

``free_port()`` draws from the 10,000 ports below the kernel's ephemeral range, and so does every run's
own system and every worker without ``--port``. A port a test names for a leader stays unbound for a second
or more (the leader starts in ``fit()``), and in CI a test's leader found its port held by another pytest
worker's test (its leader, or one of its members: both draw from that range) and, before
``actors/_driver/admin_start.py``, attached to that system: both tests timed out. Each pytest worker takes
its ports from a block below that range which nothing else draws, and its tests run one at a time, so its
ports cannot collide.
"""

from __future__ import annotations

import os
import random

from actors._driver.admin_start import _ephemeral_low, first_bindable, free_port

BLOCK = 400


def leader_port(host: str = "127.0.0.1", avoid: tuple[int, ...] = ()) -> int:
    """A port free on ``host`` now, from this pytest worker's block (``free_port()`` where there is none),
    other than those in ``avoid`` (drawn before and not bound yet)."""
    low = _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    if low is None:
        return free_port(host)
    start = max(1024, low - 10_000) - BLOCK * (index + 1)
    if start < 1024:
        return free_port(host)
    drawn = random.SystemRandom().sample(range(start, start + BLOCK), BLOCK)
    port = first_bindable(host, (p for p in drawn if p not in avoid))
    return free_port(host) if port is None else port
