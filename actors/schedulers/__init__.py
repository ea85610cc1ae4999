"""Trial schedulers: plugin objects hosted in the scheduler actor."""

from __future__ import annotations

from actors._engine.reducer import Decision
from actors.schedulers._asha import ASHAScheduler, AsyncHyperBandScheduler
from actors.schedulers._base import FIFOScheduler, Scheduler, SchedulerController
from actors.schedulers._hb_bohb import HyperBandForBOHB
from actors.schedulers._hyperband import HyperBandScheduler
from actors.schedulers._median import MedianStoppingRule
from actors.schedulers._pb2 import PB2
from actors.schedulers._pbt import PopulationBasedTraining
from actors.schedulers._pbt_replay import PopulationBasedTrainingReplay
from actors.schedulers._registry import create_scheduler
from actors.schedulers._resource_changing import ResourceChangingScheduler

TrialScheduler = Scheduler  # Ray Tune's name for the base class: a Ray plugin's imports only need rewriting

__all__ = [
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "Decision",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PB2",
    "PopulationBasedTraining",
    "PopulationBasedTrainingReplay",
    "ResourceChangingScheduler",
    "Scheduler",
    "SchedulerController",
    "TrialScheduler",
    "create_scheduler",
]
