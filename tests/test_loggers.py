"""Logger callbacks: where they run, what they see (also across a retry), what their failures do."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

import pytest

from actors import (
    Checkpoint,
    CSVLoggerCallback,
    FailureConfig,
    JsonLoggerCallback,
    LoggerCallback,
    RunConfig,
    TBXLoggerCallback,
    TuneConfig,
    TuneError,
    Tuner,
    get_checkpoint,
    report,
)
from actors._driver.errors import ConfigError
from actors._driver.loggers import controller_loggers, driver_callbacks
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors._shell.logger_host import ControllerLoggers, LoggerFailed
from storage import ExperimentLayout, StorageContext, StorageError, read_results


def fails_once(config: dict[str, Any]) -> None:
    """Iterations 1-3, checkpoint at 1, fails after 3 on the first run; the retry redoes 2-4."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, 4):
        report({"loss": 1.0 / (step + 1)},
               checkpoint=Checkpoint.from_dict({"step": step}) if step == 0 else None)
        if step == 2 and ckpt is None:
            raise ValueError("fail once")


class FileRecorder(LoggerCallback):
    """Runs in the controller; writes what it sees to a local file the test reads."""

    in_controller = True

    def __init__(self, path: str) -> None:
        self.path = path

    def _rec(self, *event: Any) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(event) + "\n")

    def setup(self, ctx: StorageContext, layout: ExperimentLayout) -> None:
        self._rec("setup", os.getpid())

    def log_trial_start(self, trial: TrialSnapshot) -> None:
        self._rec("start", trial.trial_id)

    def log_trial_rewind(self, trial: TrialSnapshot, iteration: int) -> None:
        self._rec("rewind", trial.trial_id, iteration)

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        for r in results:
            self._rec("result", trial.trial_id, r["training_iteration"])

    def log_trial_end(self, trial: TrialSnapshot, failed: bool = False) -> None:
        self._rec("end", trial.trial_id, failed)

    def close(self) -> None:
        self._rec("close")


class ListRecorder(LoggerCallback):
    """Runs in the driver (the default), through the ordinary callback events."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def log_trial_start(self, trial: TrialSnapshot) -> None:
        self.events.append(("start", trial.trial_id))

    def log_trial_rewind(self, trial: TrialSnapshot, iteration: int) -> None:
        self.events.append(("rewind", trial.trial_id, iteration))

    def log_trial_result(self, iteration: int, trial: TrialSnapshot, result: dict[str, Any]) -> None:
        self.events.append(("result", trial.trial_id, result["training_iteration"]))

    def log_trial_end(self, trial: TrialSnapshot, failed: bool = False) -> None:
        self.events.append(("end", trial.trial_id, failed))

    def close(self) -> None:
        self.events.append(("close",))


def _expected(tid: str) -> list[tuple[Any, ...]]:
    return [("start", tid), *(("result", tid, i) for i in (1, 2, 3)), ("rewind", tid, 1), ("start", tid),
            *(("result", tid, i) for i in (2, 3, 4)), ("end", tid, False)]


def test_controller_and_driver_loggers_see_every_event_in_order_across_a_retry(
        storage_dir: str, tmp_path: Any, no_leaks: Any) -> None:
    seen = str(tmp_path / "controller-logger.jsonl")
    driver = ListRecorder()
    grid = Tuner(fails_once, tune_config=TuneConfig(metric="loss", mode="min", num_samples=2),
                 run_config=RunConfig(name="lg", storage=storage_dir, verbose=0,
                                      failure_config=FailureConfig(max_failures=1),
                                      callbacks=[FileRecorder(seen), driver])).fit()
    assert not grid.errors
    with open(seen) as f:
        events = [tuple(json.loads(line)) for line in f]
    assert events[0][0] == "setup" and events[0][1] != os.getpid()  # in the controller's process
    assert events[-1] == ("close",) and [e for e in events if e[0] == "close"] == [("close",)]
    for r in grid:
        tid = r.trial_id
        assert [e for e in events if len(e) > 1 and e[1] == tid] == _expected(tid)
        assert [e for e in driver.events if len(e) > 1 and e[1] == tid] == _expected(tid)
        # the built-in loggers are still on, next to the custom ones, and were rewound too
        ctx = StorageContext(storage_dir)
        layout = ExperimentLayout(ctx, "lg")
        layout.set_dirname(tid, os.path.basename(r.path))
        assert [x["training_iteration"] for x in read_results(ctx, layout, tid)] == [1, 2, 3, 4]
        with open(os.path.join(r.path, "progress.csv")) as f:
            assert len(f.read().splitlines()) == 1 + 4
    assert driver.events[-1] == ("close",)


def test_a_logger_that_cannot_pickle_is_refused_before_anything_runs(storage_dir: str) -> None:
    class Holding(LoggerCallback):
        in_controller = True

        def __init__(self) -> None:
            self.lock = threading.Lock()

    with pytest.raises(ConfigError, match=r"must pickle.*setup"):
        Tuner(fails_once, run_config=RunConfig(name="np", storage=storage_dir, system="simple",
                                               verbose=0, callbacks=[Holding()]))
    assert not os.path.exists(os.path.join(storage_dir, "np"))


class BrokenStorage(LoggerCallback):
    in_controller = True

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        raise StorageError("disk full", url="file:///nowhere")


def test_a_logger_storage_failure_stops_the_experiment_with_its_name(storage_dir: str) -> None:
    tuner = Tuner(fails_once, run_config=RunConfig(name="bs", storage=storage_dir, system="simple", verbose=0,
                                                   callbacks=[BrokenStorage()]))
    with pytest.raises(TuneError, match="BrokenStorage could not write to storage in log_trial_results: disk full"):
        tuner.fit()


# ---------------------------------------------------------------------------------- pure host logic
class Calls(LoggerCallback):
    in_controller = True

    def __init__(self, fail_on: str | None = None, exc: type[Exception] = ValueError) -> None:
        self.calls: list[str] = []
        self.fail_on, self.exc = fail_on, exc

    def _hit(self, hook: str) -> None:
        self.calls.append(hook)
        if hook == self.fail_on:
            raise self.exc("boom")

    def setup(self, ctx: StorageContext, layout: ExperimentLayout) -> None:
        self._hit("setup")

    def log_trial_start(self, trial: TrialSnapshot) -> None:
        self._hit("start")

    def log_trial_results(self, iteration: int, trial: TrialSnapshot, results: list[dict[str, Any]]) -> None:
        self._hit("results")

    def flush(self) -> None:
        self._hit("flush")


def _host(loggers: list[LoggerCallback], tmp_path: Any, **kw: Any) -> ControllerLoggers:
    ctx = StorageContext(str(tmp_path))
    return ControllerLoggers(loggers, ctx, ExperimentLayout(ctx, "e"), **kw)


SNAP = TrialSnapshot("t1", {}, TrialStatus.RUNNING)


def test_host_switches_off_a_broken_logger_and_keeps_the_others(tmp_path: Any, caplog: Any) -> None:
    broken, fine = Calls(fail_on="start"), Calls()
    host = _host([broken, fine], tmp_path)
    (json_logger,) = [lg for lg in host.loggers if isinstance(lg, JsonLoggerCallback)]  # always there
    with caplog.at_level(logging.ERROR, logger="audition"):
        host.start(SNAP, None)
        host.results(SNAP, [{"training_iteration": 1}])
    assert broken.calls == ["setup", "start"]
    assert fine.calls == ["setup", "start", "results"]
    assert "Calls failed in log_trial_start; it is switched off" in caplog.text
    assert read_results(json_logger._ctx, json_logger._layout, "t1") == [{"training_iteration": 1}]


def test_host_stops_on_storage_errors_and_required_loggers(tmp_path: Any) -> None:
    with pytest.raises(LoggerFailed, match="could not write to storage in flush"):
        _host([Calls(fail_on="flush", exc=StorageError)], tmp_path).flush()

    class Needed(Calls):
        required = True

    with pytest.raises(LoggerFailed, match=r"Needed failed in log_trial_results: ValueError\('boom'\)"):
        _host([Needed(fail_on="results")], tmp_path).results(SNAP, [{}])


def test_host_warns_once_about_a_slow_logger(tmp_path: Any, caplog: Any) -> None:
    now = [0.0]

    class Slow(Calls):
        def _hit(self, hook: str) -> None:
            now[0] += 2.5 if hook == "results" else 0.0

    host = _host([Slow()], tmp_path, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="audition"):
        host.results(SNAP, [{"training_iteration": 1}])
        host.results(SNAP, [{"training_iteration": 2}])
    assert caplog.text.count("logger Slow took 2.5 s in log_trial_results") == 1
    assert "in_controller = False" in caplog.text


def test_which_loggers_run_where() -> None:
    json_logger, tbx = JsonLoggerCallback(), TBXLoggerCallback(logdir="/tmp/x")
    loggers = controller_loggers([json_logger, tbx])
    assert loggers[0] is json_logger and [type(x) for x in loggers] == [JsonLoggerCallback, CSVLoggerCallback]
    assert driver_callbacks([json_logger, tbx]) == [tbx]
    assert [type(x) for x in controller_loggers(None)] == [JsonLoggerCallback, CSVLoggerCallback]


def test_on_an_object_store_the_controllers_histories_are_rewritten_only_when_asked() -> None:
    """A history on an object store is rewritten whole: on a timer of its own, each running trial's
    rewrite cost O(rows) every 2 s without bound. The controller rewrites them with each state write
    (which the rewrites' cost spaces), when rows go and when the trial ends (``loggers.CONTROLLER_FLUSH_INTERVAL``)."""
    import csv
    import io
    import time
    import uuid

    def read_progress(ctx: StorageContext, layout: ExperimentLayout, trial_id: str) -> list[dict[str, Any]]:
        text = ctx.fs.cat_file(layout.progress_file(trial_id)).decode("utf-8")
        return [{k: int(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]

    ctx = StorageContext(f"memory://audition-test-{uuid.uuid4().hex[:8]}")
    layout = ExperimentLayout(ctx, "e")
    host = ControllerLoggers(None, ctx, layout)
    now = [time.monotonic()]  # (the writers' default clock, which their first flush read)
    host.start(SNAP, None)
    host.results(SNAP, [{"training_iteration": 1}])
    for lg in host.loggers:  # (the writers' clock: minutes pass between results)
        lg._writer("t1")._clock = lambda: now[0]
    for i in (2, 3):
        now[0] += 60.0
        host.results(SNAP, [{"training_iteration": i}])
    assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1]
    assert [r["training_iteration"] for r in read_progress(ctx, layout, "t1")] == [1]
    host.flush()  # a state write
    assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2, 3]
    assert [r["training_iteration"] for r in read_progress(ctx, layout, "t1")] == [1, 2, 3]
    host.results(SNAP, [{"training_iteration": 4}])
    host.end(SNAP, failed=False)  # the trial ends: its rows are all there
    assert [r["training_iteration"] for r in read_results(ctx, layout, "t1")] == [1, 2, 3, 4]
    ctx.fs.rm(ctx.root, recursive=True)
