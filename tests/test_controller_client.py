"""``ControllerClient``'s listening loop, on a scripted actor system and a fake clock (no actors run).

It returns the end only after every event batch the end counts reached the callbacks, saves the
callbacks' states after each batch, and presumes a controller silent for longer than
``controller_timeout_s`` dead.
"""

from __future__ import annotations

import datetime
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
