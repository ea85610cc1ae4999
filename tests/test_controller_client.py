"""``ControllerClient``'s listening loop, on a scripted actor system and a fake clock (no actors run).

It returns the end only after every event batch the end counts reached the callbacks, saves the
callbacks' states after each batch, and presumes a controller silent for longer than
``controller_timeout_s`` dead.
"""

from __future__ import annotations

import datetime
import signal
import types
from typing import Any

import pytest

from actors._driver import controller_client
from actors._driver.controller_client import ControllerClient
from actors._driver.errors import TuneError
from actors.messages import ExperimentFinished, ExperimentProgress, TrialEvents


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _System:
    """Hands out the scripted messages, one per ``listen``; each listen takes its whole timeout."""

    def __init__(self, clock: _Clock, script: list[Any]) -> None:
        self.clock, self.script, self.told = clock, list(script), []

    def listen(self, timeout: datetime.timedelta) -> Any:
        self.clock.now += timeout.total_seconds()
        return self.script.pop(0) if self.script else None

    def tell(self, to: Any, msg: Any) -> None:
        self.told.append(msg)


class _Dispatcher:
    def __init__(self) -> None:
        self.received = 0
        self.pushed: list[TrialEvents] = []

    def push(self, msg: TrialEvents) -> None:
        self.pushed.append(msg)
        self.received += 1


class _Reporter:
    def __init__(self) -> None:
        self.printer = types.SimpleNamespace(batches=0)
        self.updates: list[ExperimentProgress] = []

    def update(self, msg: ExperimentProgress) -> None:
        self.updates.append(msg)


class _States:
    def __init__(self) -> None:
        self.saves = 0

    def maybe_save(self) -> None:
        self.saves += 1


def _client(monkeypatch: Any, script: list[Any], timeout_s: float = 30.0) -> tuple[ControllerClient, _System]:
    clock = _Clock()
    monkeypatch.setattr(controller_client, "time", clock)
    client = ControllerClient(_Dispatcher(), _Reporter(), _States(), timeout_s)  # type: ignore[arg-type]
    return client, _System(clock, script)


def test_the_end_waits_for_the_event_batches_it_counts(monkeypatch: Any) -> None:
    end = ExperimentFinished((), None, 1.0, event_batches=2)
    batches = [TrialEvents(1, ()), TrialEvents(2, ())]
    progress = ExperimentProgress({}, (), 0.5)
    client, asys = _client(monkeypatch, [progress, batches[0], end, None, batches[1], None])
    assert client._wait(asys, "controller") is end
    assert client.dispatcher.pushed == batches  # type: ignore[attr-defined]
    assert client.states.saves == 2  # type: ignore[attr-defined]
    assert client.reporter.updates == [progress]  # type: ignore[attr-defined]
    assert asys.script == [None]  # returned as soon as the last batch was in


def test_a_silent_controller_is_presumed_dead(monkeypatch: Any) -> None:
    client, asys = _client(monkeypatch, [ExperimentProgress({}, (), 0.5)], timeout_s=3.0)
    with pytest.raises(TuneError, match="sent nothing for 3s; it is presumed dead"):
        client._wait(asys, "controller")
    assert asys.clock.now == pytest.approx(4.0)  # heard at 0.5 s, then silent for more than 3 s


class _Interrupting(_System):
    """Raises ``exc`` from the first ``listen`` (the signal arriving while the driver listens)."""

    def __init__(self, clock: _Clock, script: list[Any], exc: BaseException) -> None:
        super().__init__(clock, script)
        self.exc: BaseException | None = exc

    def createActor(self, cls: Any, globalName: str | None = None) -> str:  # (Thespian's name)
        return "controller"

    def listen(self, timeout: datetime.timedelta) -> Any:
        if self.exc is not None:
            exc, self.exc = self.exc, None
            raise exc
        return super().listen(timeout)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_asks_for_the_abort_and_returns_the_run_as_rays_fit(monkeypatch: Any, signum: int) -> None:
    """Ctrl-C: the controller is asked to abort, and its last word is returned as Ray's fit() returns it
    (no error, unfinished trials TERMINATED; tests/test_ctrl_c.py records Ray); SIGTERM re-raises."""
    from actors._driver.interrupt import Interrupted
    from actors._engine.trial import TrialStatus
    from actors.messages import AbortExperiment, TrialSummary

    summary = TrialSummary("t0", {"x": 0}, TrialStatus.RUNNING, {}, None, None, 0, "/p/t0")
    end = ExperimentFinished((summary,), "interrupted (Ctrl-C or SIGTERM)", 1.0)
    clock = _Clock()
    monkeypatch.setattr(controller_client, "time", clock)
    client = ControllerClient(_Dispatcher(), _Reporter(), _States(), 30.0)  # type: ignore[arg-type]
    asys = _Interrupting(clock, [end], Interrupted(signum))
    spec = types.SimpleNamespace(driver_pid=0, admin_port=0, actor_processes=True)
    if signum == signal.SIGTERM:
        with pytest.raises(KeyboardInterrupt):
            client.run(asys, spec, "multiproc", "/p")  # type: ignore[arg-type]
        assert not client.interrupted
    else:
        got = client.run(asys, spec, "multiproc", "/p")  # type: ignore[arg-type]
        assert got is not None and got.error is None
        assert [t.status for t in got.trials] == [TrialStatus.TERMINATED]
        assert client.interrupted
    assert any(isinstance(m, AbortExperiment) for m in asys.told)


class _SignalledInside(_Interrupting):
    """Sends this process SIGINT from inside its first ``listen`` (as if Ctrl-C landed mid-receive) and notes
    whether the handler's exception surfaced there, inside what stands for Thespian's transport."""

    def __init__(self, clock: _Clock, script: list[Any]) -> None:
        super().__init__(clock, script, KeyboardInterrupt())
        self.exc = None
        self.signalled = False
        self.raised_inside: BaseException | None = None

    def listen(self, timeout: datetime.timedelta) -> Any:
        import os
        import time

        if not self.signalled:
            self.signalled = True
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(200):  # the handler runs at the next bytecode boundary, well inside this loop
                    time.sleep(0.001)
            except BaseException as exc:
                self.raised_inside = exc
                raise
        return super().listen(timeout)


def test_a_ctrl_c_during_a_thespian_call_is_delivered_after_it(monkeypatch: Any) -> None:
    """Raised inside Thespian's transport the interrupt could leave a send half done (seen once in a full run:
    the abort never reached the controller, and the driver exited 1 with a traceback); it waits for the call."""
    import threading

    from actors._driver.system import _Interrupts
    from actors._engine.trial import TrialStatus
    from actors.messages import AbortExperiment, TrialSummary

    if threading.current_thread() is not threading.main_thread():  # (the handler needs it: never SIGINT a worker)
        pytest.skip("signal handlers are installed from the main thread only")
    summary = TrialSummary("t0", {"x": 0}, TrialStatus.RUNNING, {}, None, None, 0, "/p/t0")
    end = ExperimentFinished((summary,), "interrupted (Ctrl-C or SIGTERM)", 1.0)
    clock = _Clock()
    monkeypatch.setattr(controller_client, "time", clock)
    client = ControllerClient(_Dispatcher(), _Reporter(), _States(), 30.0)  # type: ignore[arg-type]
    asys = _SignalledInside(clock, [None, end])
    spec = types.SimpleNamespace(driver_pid=0, admin_port=0, actor_processes=True)
    with _Interrupts() as interrupts:
        interrupts.deliver()  # (as actor_system does once the system runs)
        asys.audition_interrupts = interrupts  # type: ignore[attr-defined]
        got = client.run(asys, spec, "multiproc", "/p")  # type: ignore[arg-type]
    assert asys.signalled and asys.raised_inside is None
    assert got is not None and got.error is None and client.interrupted
    assert any(isinstance(m, AbortExperiment) for m in asys.told)
