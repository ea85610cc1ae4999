"""Testing tools for audition users and for the engine itself.

* ``SchedulerTestKit`` / ``ActorTestKit`` (``actors/testing/_kit.py``): drive one real actor with
  scripted messages on the in-process actor system.
* ``simulate`` (``actors/testing/simulate.py``): a whole experiment in one process, deterministic,
  in simulated time: the real engine core, scheduler host, searcher and stopper; only the
  transport, the trials' execution and the clock are simulated. ``Faults`` injects failures.
"""

from __future__ import annotations

from actors.testing._kit import ActorTestKit, ProbeActor, SchedulerTestKit
from actors.testing.faults import Faults
from actors.testing.sim_trial import SimTrial
from actors.testing.simulate import CurveTrainable, Simulation, curve_function, simulate
from actors.testing.world import SimWorld

__all__ = ["ActorTestKit", "CurveTrainable", "Faults", "ProbeActor", "SchedulerTestKit", "SimTrial", "SimWorld",
           "Simulation", "curve_function", "simulate"]
