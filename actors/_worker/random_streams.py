"""A trial process's global random streams start afresh, as a Ray Tune worker's do.

Ray 2.60 runs each trial in a worker process of its own, a new interpreter: numpy's global
``RandomState`` and torch's default generator are seeded there from the OS, whatever the driver's
script seeded (recorded: ``benchmarks/ray_oracle/record_random_streams.py``). An audition trial process
is forked, a copy of its parent's memory: without this, every trial drew the numbers the driver would
have drawn next, the same ones as every other trial (``num_samples`` repeats of one config gave one
result, not a spread). Python's ``random`` needs nothing: CPython reseeds it in a forked child. A
library imported only in the trial process seeds itself there. A process that runs several trials
(``reuse_actors``) keeps its streams between them, as a reused Ray worker does.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


def _numpy(np: Any) -> None:
    # the legacy global RandomState as a new interpreter's: a new one's state, from the OS's entropy
    # (``np.random.seed()`` draws a new key too, but leaves the position in it where the parent's was)
    np.random.set_state(np.random.RandomState().get_state())


def _torch(torch: Any) -> None:
    torch.seed()  # the default generator (and, once initialised, the accelerators'), from the OS's entropy


# the module whose presence means its global stream was inherited, and how to seed that stream afresh
RESEEDERS = {"numpy": _numpy, "torch": _torch}


def reseed_inherited_streams(modules: Mapping[str, Any] | None = None) -> list[str]:
    """Seed afresh the global streams of the libraries already loaded in this (forked) process; return
    their names. A library whose reseeding fails is logged and left as it is: the trial still runs."""
    loaded = sys.modules if modules is None else modules
    done = []
    for name, reseed in RESEEDERS.items():
        module = loaded.get(name)
        if module is None:
            continue
        try:
            reseed(module)
        except Exception as exc:  # a broken or partial install: its stream stays the parent's
            log.warning("could not seed %s's global random stream afresh in this trial process: %s", name, exc)
            continue
        done.append(name)
    return done


__all__ = ["RESEEDERS", "reseed_inherited_streams"]
