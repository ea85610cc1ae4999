"""The driver's side of one experiment's run: start the controller, then only listen to it.

The driver creates the controller in the actor system, sends it the cloudpickled spec and from then
on hears progress, callback events, printed lines and the end; it never talks to a trial actor
(asking a killed actor stalls Thespian's external API for half a minute). A silent controller is
presumed dead after ``RunConfig.controller_timeout_s``; Ctrl-C asks it to abort, waits briefly, and
returns the aborted run as Ray's ``fit()`` does (``actors._driver.interrupt``).
"""

from __future__ import annotations

import datetime
import os
import time
from typing import TYPE_CHECKING, Any

import cloudpickle

from actors._driver.errors import TuneError
from actors._driver.interrupt import by_ctrl_c, ended_by_ctrl_c
from actors.messages import (
    AbortExperiment,
    ExperimentFinished,
    ExperimentProgress,
    StartExperiment,
    TrialEvents,
    TrialOutputBatch,
)

if TYPE_CHECKING:
    from actors._driver.callback_state import CallbackStates
    from actors._driver.callbacks import CallbackDispatcher
    from actors._driver.progress import ProgressDisplay
    from actors._engine.spec import ExperimentSpec

CONTROLLER_NAME = "audition-controller"


class ControllerClient:
    """Runs one experiment's controller and hands what it sends to the callbacks and the display."""

    def __init__(self, dispatcher: CallbackDispatcher, reporter: ProgressDisplay, states: CallbackStates,
                 timeout_s: float) -> None:
        self.dispatcher = dispatcher
        self.reporter = reporter
        self.states = states
        self.timeout_s = timeout_s  # RunConfig.controller_timeout_s: silence for longer means it died
        self.interrupted = False  # the run ended by Ctrl-C, returned as Ray's fit() returns it

    def run(self, asys: Any, spec: ExperimentSpec, system: Any, where: str) -> ExperimentFinished | None:
        """Start the controller on ``spec`` and listen until it reports the end (None: it never did).
        ``where``: the experiment's URI, named by the warning after Ctrl-C."""
        from actors._shell.controller import ControllerActor

        port = getattr(asys, "audition_admin_port", 0)
        spec.driver_pid, spec.admin_port = (os.getpid(), port) if port else (0, 0)
        spec.actor_processes = system != "simple"
        blob = cloudpickle.dumps(spec)
        interrupts = getattr(asys, "audition_interrupts", None)
        if interrupts is not None:  # (delivered between Thespian calls only: see _wait)
            interrupts.hold()
        # a global name lets `audition cluster status` find the controller from outside
        controller = asys.createActor(ControllerActor, globalName=CONTROLLER_NAME if port else None)
        self.dispatcher.answer = lambda msg: asys.tell(controller, msg)
        asys.tell(controller, StartExperiment(blob))
        try:
            return self._wait(asys, controller)
        except KeyboardInterrupt as exc:
            if interrupts is not None:
                interrupts.hold()
            asys.tell(controller, AbortExperiment("interrupted (Ctrl-C or SIGTERM)"))
            finished = self._wait(asys, controller, limit_s=10.0, quiet=True)
            if finished is None or not by_ctrl_c(exc):  # Ray's fit() returns after Ctrl-C (_driver/interrupt)
                raise
            self.interrupted = True
            return ended_by_ctrl_c(finished, where)

    def _wait(self, asys: Any, controller: Any, limit_s: float | None = None,
              quiet: bool = False) -> ExperimentFinished | None:
        timeout = self.timeout_s
        last = time.monotonic()
        deadline = None if limit_s is None else last + limit_s
        finished: ExperimentFinished | None = None
        # Ctrl-C and SIGTERM are held while a message is listened for and handled (a callback's answer is a
        # Thespian send too) and delivered at the end of each turn: raised inside Thespian's transport they
        # could leave a send half done (seen: the abort then never reached the controller)
        interrupts = getattr(asys, "audition_interrupts", None)
        while True:
            if interrupts is not None:
                interrupts.deliver()
                interrupts.hold()
            msg = asys.listen(datetime.timedelta(seconds=0.2 if finished else 0.5))
            now = time.monotonic()
            if isinstance(msg, ExperimentFinished):
                finished = msg
                deadline = min(deadline or now + 10.0, now + 10.0)  # collect the last event batches
            elif isinstance(msg, TrialEvents):
                self.dispatcher.push(msg)
                self.states.maybe_save()
            elif isinstance(msg, TrialOutputBatch):
                self.reporter.output(msg)
            elif isinstance(msg, ExperimentProgress) and not quiet:
                self.reporter.update(msg)
            if msg is not None:
                last = now
            if (finished is not None and self.dispatcher.received >= finished.event_batches
                    and self.reporter.printer.batches >= finished.output_batches):
                return finished
            if deadline is not None and now > deadline:
                return finished
            if now - last > timeout:
                raise TuneError(f"the controller sent nothing for {timeout:.0f}s; it is presumed dead. "
                                "Partial results are in storage; try Tuner.restore()")


__all__ = ["CONTROLLER_NAME", "ControllerClient"]
