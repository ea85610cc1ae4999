"""``actors._shell.plugin_thread``: plugin code on a thread of the actor process's own (see its docstring)."""

from __future__ import annotations

import threading

import pytest

from actors._shell.plugin_thread import PluginThread, openmp_loaded, plugin_caller
from tests._lean import IN_PROCESS


def test_each_call_runs_on_one_other_thread_in_order_and_returns_its_value() -> None:
    runner = PluginThread()
    seen: list[tuple[int, str]] = []

    def job(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 2

    assert [runner.call(job, i) for i in range(5)] == [0, 2, 4, 6, 8]
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert {name for _, name in seen} == {"audition-plugins"}  # one thread, not the caller's


def test_an_exception_is_raised_where_the_call_was_made() -> None:
    runner = PluginThread()

    def fails() -> None:
        raise KeyError("no such trial")

    with pytest.raises(KeyError, match="no such trial"):
        runner.call(fails)
    assert runner.call(lambda: "still serving") == "still serving"


def test_the_driver_process_calls_directly() -> None:
    # (the in-process system runs the actors in the driver, which was never forked)
    call = plugin_caller()
    assert call(lambda: threading.current_thread() is threading.main_thread())


@IN_PROCESS
def test_openmp_is_seen_once_a_library_maps_it() -> None:
    torch = pytest.importorskip("torch")
    assert torch is not None and openmp_loaded()
