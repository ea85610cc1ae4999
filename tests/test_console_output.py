"""What a trial prints is echoed on the driver's console with its trial's prefix, live, bounded,
and still saved per trial; ``RunConfig(log_to_driver=False)`` turns the echo off."""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import time
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors._driver.console import BURST_LINES, MAX_LINE_CHARS, ConsolePrinter, ConsoleTee
from actors._driver.errors import ConfigError
from actors._driver.progress import ProgressDisplay
from actors._engine.trial import TrialStatus
from actors.messages import ExperimentProgress, ProgressRow, TrialOutput, TrialOutputBatch
from actors.search import grid_search


def printing_fn(config: dict[str, Any]) -> None:
    """Prints every way a trial can, then waits (up to 30 s) for the driver to have shown it."""
    tag = config["tag"]
    print(f"py-line {tag}")
    helper = threading.Thread(target=print, args=(f"thread-line {tag}",))
    helper.start()
    helper.join()
    os.write(1, f"fd-line {tag}\n".encode())
    print(f"err-line {tag}", file=sys.stderr)
    flag = config.get("flag")
    seen_live = False
    if flag:
        deadline = time.monotonic() + 30.0
        while not seen_live and time.monotonic() < deadline:
            seen_live = os.path.exists(f"{flag}-{tag}")
            time.sleep(0.02)
    report({"loss": 1.0, "seen_live": seen_live, "pid": os.getpid()})
    print(f"last-line {tag}", end="")  # no newline, after the last report: still echoed at the end


def _lines(text: str, trial_id: str, pid: int) -> list[str]:
    head = f"(printing_fn_{trial_id} pid={pid}) "  # Ray's str(trial)
    return [x[len(head):] for x in text.splitlines() if x.startswith(head)]


@pytest.mark.slow
def test_trial_output_reaches_the_driver_prefixed_and_live(storage_dir, no_leaks, capfd, monkeypatch,
                                                            tmp_path) -> None:
    flag = str(tmp_path / "shown")
    original = ProgressDisplay._echo

    def echo(self: ProgressDisplay, fd: int, text: str) -> None:  # the driver shows a line: tell the trial
        original(self, fd, text)
        if m := re.search(r"err-line (\w+)$", text):
            open(f"{flag}-{m.group(1)}", "w").close()

    monkeypatch.setattr(ProgressDisplay, "_echo", echo)
    grid = Tuner(printing_fn, param_space={"tag": grid_search(["a", "b"]), "flag": flag},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="echo", storage=storage_dir, system="multiproc", verbose=0)).fit()
    seen = capfd.readouterr()
    assert grid.num_errors == 0
    for r in grid:
        tag, pid = r.config["tag"], r.metrics["pid"]
        # shown while the trial was still running (it waited for the driver to show it)
        assert r.metrics["seen_live"] is True
        out = _lines(seen.out, r.trial_id, pid)
        assert out == [f"py-line {tag}", f"thread-line {tag}", f"fd-line {tag}", f"last-line {tag}"], seen.out
        assert _lines(seen.err, r.trial_id, pid) == [f"err-line {tag}"], seen.err
        trial_dir = r.path  # and saved per trial as before
        with open(os.path.join(trial_dir, "stdout.txt"), encoding="utf-8") as f:
            assert f.read() == f"py-line {tag}\nthread-line {tag}\nfd-line {tag}\nlast-line {tag}"


def test_log_to_driver_false_echoes_nothing_but_saves_everything(storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(printing_fn, param_space={"tag": "q"}, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="quiet", storage=storage_dir, system="multiproc", verbose=0,
                                      log_to_driver=False)).fit()
    seen = capfd.readouterr()
    r = grid[0]
    assert r.status is TrialStatus.TERMINATED
    assert "-line q" not in seen.out + seen.err, seen
    with open(os.path.join(r.path, "stdout.txt"), encoding="utf-8") as f:
        assert "fd-line q" in f.read()


def test_log_to_driver_must_be_a_bool() -> None:
    with pytest.raises(ConfigError, match="log_to_driver"):
        RunConfig(log_to_driver="no")  # type: ignore[arg-type]


def flooding_fn(config: dict[str, Any]) -> None:
    """~6 MB of lines as fast as the process can write them."""
    block = b"".join(b"flood %06d\n" % i for i in range(10000))
    for _ in range(50):
        os.write(1, block)
    report({"loss": 0.0})


@pytest.mark.slow
def test_a_flooding_trial_is_cut_to_a_bounded_echo_with_a_dropped_marker(storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(flooding_fn, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="flood", storage=storage_dir, system="multiproc", verbose=0)).fit()
    seen = capfd.readouterr()
    assert grid.num_errors == 0
    echoed = [x for x in seen.out.splitlines() if " flood " in x]
    dropped = sum(int(m.group(1)) for m in re.finditer(r"\[(\d+) lines dropped", seen.err))
    elapsed = grid[0].metrics["time_total_s"]
    assert 0 < len(echoed) <= BURST_LINES + 100 * (elapsed + 1), len(echoed)
    assert len(echoed) + dropped == 500_000  # every line is either shown or counted
    with open(os.path.join(grid[0].path, "stdout.txt"), "rb") as f:
        assert f.read().count(b"\n") == 500_000  # the file keeps them all


def test_tee_keeps_lines_within_the_rate_and_counts_the_rest() -> None:
    now = [0.0]
    woken: list[int] = []
    tee = ConsoleTee(notify=lambda: woken.append(1), clock=lambda: now[0], rate=10.0, burst=5)
    tee.feed(1, "a\nb")  # a partial line waits for its end
    tee.feed(1, "c\n" + "x\n" * 10)
    assert len(woken) == 1  # one wake-up per take, however many lines
    out = tee.take()
    assert out[:5] == [(1, "a"), (1, "bc"), (1, "x"), (1, "x"), (1, "x")]
    assert out[5][0] == 2 and out[5][1].startswith("[7 lines dropped")
    now[0] = 0.3  # 3 lines' worth of budget came back
    tee.feed(2, "e\n" * 4)
    tee.feed(1, "y" * (MAX_LINE_CHARS + 5))  # no newline in sight: sent, cut, once that long
    out = tee.take()
    assert out[:3] == [(2, "e")] * 3 and out[3][1].startswith("[2 lines dropped")
    tee.feed(1, "tail")
    assert tee.take() == [] and tee.take(final=True) == [(1, "tail")]
    assert len(woken) == 2


def test_printer_restores_each_runs_order_and_flushes_what_waits_at_the_end() -> None:
    got: list[tuple[int, str]] = []
    printer = ConsolePrinter(lambda fd, text: got.append((fd, text)))

    def chunk(trial: str, run: int, seq: int, *lines: str) -> TrialOutput:
        return TrialOutput(trial, run, seq, 7, "", tuple((1, x) for x in lines))

    printer.push([chunk("t1", 1, 2, "second"), chunk("t2", 1, 1, "other")])
    printer.push([chunk("t1", 1, 1, "first"), chunk("t1", 2, 2, "orphan")])
    assert [t for _, t in got] == ["(t2 pid=7) other", "(t1 pid=7) first", "(t1 pid=7) second"]
    printer.close()
    assert got[-1] == (1, "(t1 pid=7) orphan") and printer.batches == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_echo_goes_above_the_live_table_which_keeps_drawing() -> None:
    pytest.importorskip("rich")
    term = _Terminal()
    reporter = ProgressDisplay("exp", 1, stream=term, metric="loss")
    assert reporter.live is not None
    row = ProgressRow("t1", TrialStatus.RUNNING, {"x": 1}, 3, 0.5, "")
    reporter.update(ExperimentProgress({"RUNNING": 1}, (row,), 1.0, "loss"))
    reporter.output(TrialOutputBatch((TrialOutput("t1", 1, 1, 42, "", ((1, "hello"), (2, "oops"))),)))
    reporter.close()
    text = term.getvalue()
    assert "(t1 pid=42) hello" in text and "(t1 pid=42) oops" in text
    # rich printed the lines through the live display: the table is drawn again after them
    assert text.rindex("[exp]") > text.index("(t1 pid=42) oops")
