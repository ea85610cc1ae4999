"""Callbacks see every event once, in order per trial; progress shows in a terminal and in plain logs."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from actors import Callback, RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError
from actors._engine.feed import choose_rows
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from tests import _trainables as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Recorder(Callback):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self.ended = 0

    def on_trial_start(self, iteration, trials, trial):
        self.events.append(("start", trial.trial_id, 0))

    def on_trial_result(self, iteration, trials, trial, result):
        self.events.append(("result", trial.trial_id, result["training_iteration"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint):
        assert "checkpoint_" in checkpoint.path  # an actors.Checkpoint, as Ray's
        self.events.append(("checkpoint", trial.trial_id, 0))

    def on_trial_complete(self, iteration, trials, trial):
        self.events.append(("complete", trial.trial_id, 0))

    def on_trial_error(self, iteration, trials, trial):
        self.events.append(("error", trial.trial_id, 0))

    def on_experiment_end(self, trials):
        self.ended += 1


class CtrlC(Recorder):
    """Ctrl-C lands while the driver runs a callback (a KeyboardInterrupt can hit any line)."""

    def on_trial_result(self, iteration, trials, trial, result):
        super().on_trial_result(iteration, trials, trial, result)
        if result["training_iteration"] == 2:
            raise KeyboardInterrupt


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_interrupted_run_still_ends_the_experiment_for_callbacks(system, storage_dir, no_leaks):
    rec = CtrlC()
    tuner = Tuner(T.fn_trainable, param_space={"steps": 50, "slow_save": 0.02},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(storage=storage_dir, system=system, verbose=0, callbacks=[rec]))
    with pytest.raises(KeyboardInterrupt):
        tuner.fit()
    assert rec.ended == 1, "on_experiment_end is called once, also when the run is interrupted"
    assert ("result", rec.events[0][1], 2) in rec.events


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_callbacks_see_every_event_once_in_order(system, storage_dir, no_leaks):
    rec = Recorder()
    grid = Tuner(T.raiser, param_space={"fail": grid_search([False, True, False])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage=storage_dir, system=system, verbose=0, callbacks=[rec])).fit()
    assert rec.ended == 1
    for r in grid:
        mine = [(k, it) for k, t, it in rec.events if t == r.trial_id]
        results = [it for k, it in mine if k == "result"]
        assert results == [h["training_iteration"] for h in r.metrics_history]  # every result once, in order
        assert mine[0] == ("start", 0)
        assert mine[-1] == ("error", 0) if r.config["fail"] else ("complete", 0)
        assert sum(1 for k, _ in mine if k in ("complete", "error")) == 1


def test_checkpoint_events(storage_dir, no_leaks):
    rec = Recorder()
    Tuner(T.fn_trainable, param_space={"x": 1.0, "steps": 3}, tune_config=TuneConfig(metric="loss", mode="min"),
          run_config=RunConfig(storage=storage_dir, verbose=0, callbacks=[rec])).fit()
    assert sum(1 for k, _, _ in rec.events if k == "checkpoint") == 3


def test_non_callback_is_refused(storage_dir):
    with pytest.raises(ConfigError, match=r"actors\.Callback instances"):
        Tuner(T.fn_trainable, run_config=RunConfig(storage=storage_dir, callbacks=[object()]))


SCRIPT = """
import sys
from actors import RunConfig, TuneConfig, Tuner
from tests import _trainables as T
from actors.search import grid_search
Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": int(sys.argv[4]) if len(sys.argv) > 4 else 30,
                                   "slow_save": 0.06},
      tune_config=TuneConfig(metric="loss", mode="min"),
      run_config=RunConfig(name="prog", storage=sys.argv[1], verbose=int(sys.argv[2]),
                           max_progress_rows=int(sys.argv[3]) if len(sys.argv) > 3 else 20)).fit()
"""


def test_plain_progress_lines_when_not_a_terminal(tmp_path, no_leaks):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), "2"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [x for x in out.stdout.splitlines() if x.startswith("[prog]")]
    assert any("RUNNING" in x and "best loss=" in x for x in lines), out.stdout
    assert lines[-1].startswith("[prog] finished in") and "2 TERMINATED" in lines[-1]
    assert "\x1b[" not in out.stdout  # no terminal control codes in logs
    done = [x for x in lines if " finished after " in x]  # verbose=2: one line per finished trial
    assert len(done) == 2 and all("after 30 iterations, loss=" in x for x in done), lines


@pytest.mark.parametrize("verbose", [0, 1])
def test_verbose_levels(verbose, tmp_path, no_leaks):
    # (5 steps: these levels show no live rows, so the trials need not run long)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(verbose), "20", "5"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [x for x in out.stdout.splitlines() if x.startswith("[prog]")]
    if verbose == 0:
        assert lines == [], out.stdout  # silent
    else:
        assert lines[-1].startswith("[prog] finished in")
        assert not any(" finished after " in x for x in lines)  # per-trial lines only at 2


def _in_a_terminal(*args: str) -> str:
    """Run SCRIPT with a pseudo-terminal as stdout (wide, so rich wraps nothing) and return what it drew."""
    pid, fd = pty.fork()
    if pid == 0:  # child: the driver, with a pseudo-terminal as stdout
        os.environ["PYTHONPATH"] = ROOT
        os.environ["COLUMNS"] = "200"
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-c", SCRIPT, *args])
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal: it exited
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text[-2000:]
    return text


def test_live_table_in_a_terminal(tmp_path, no_leaks):
    pytest.importorskip("rich")
    text = _in_a_terminal(str(tmp_path), "1")
    assert "not shown" not in text  # 2 trials, 20 rows: nothing hidden
    assert "trial" in text and "status" in text and "RUNNING" in text  # the table's header and rows
    for column in ("iter", "loss", "member", "steps"):  # iteration, metric, host, a config column
        assert column in text, column
    assert "best loss=" in text and "TERMINATED" in text  # title: best so far and status counts
    assert "\x1b[" in text  # drawn with terminal control codes
    assert "finished in" in text


def test_live_table_says_how_many_trials_it_does_not_show(tmp_path, no_leaks):
    pytest.importorskip("rich")
    text = _in_a_terminal(str(tmp_path), "1", "1")  # 2 trials, RunConfig(max_progress_rows=1)
    assert "... 1 more trial not shown (1 " in text, text[-3000:]


def _rec(status: str, loss: float | None = None) -> SimpleNamespace:
    return SimpleNamespace(status=TrialStatus(status), last_result={} if loss is None else {"loss": loss})


def test_choose_rows_order_limit_and_hidden_counts():
    trials = [_rec("PENDING"), _rec("TERMINATED", 3.0), _rec("RUNNING"), _rec("PAUSED"), _rec("ERROR"),
              _rec("RUNNING"), _rec("TERMINATED", 1.0), _rec("TERMINATED"), _rec("PENDING")]
    shown, hidden = choose_rows(trials, 100, "loss", "min")  # room for all: every trial, in priority order
    assert shown == [trials[i] for i in (2, 5, 4, 3, 0, 8, 6, 1, 7)], "best terminated first, no metric last"
    assert hidden == {}
    shown, hidden = choose_rows(trials, 4, "loss", "min")
    assert shown == [trials[2], trials[5], trials[4], trials[6]], "the best finished trial keeps the last row"
    assert hidden == {"PAUSED": 1, "PENDING": 2, "TERMINATED": 2}
    shown, _ = choose_rows(trials, 7, "loss", "max")
    assert shown[-1] is trials[1], "mode='max': the highest finished value is the best"
    shown, hidden = choose_rows(trials, 1, "loss", "min")
    assert shown == [trials[2]] and sum(hidden.values()) == len(trials) - 1
    shown, hidden = choose_rows(trials, 4, None, None)  # no metric: nothing to call best, no row reserved
    assert shown == [trials[2], trials[5], trials[4], trials[3]]
    assert hidden == {"PENDING": 2, "TERMINATED": 3}


def test_choose_rows_breaks_ties_by_table_order_and_keeps_the_best_row_from_a_limit_of_two():
    # (the rows are not orderable, as the controller's records are not: a tie is never broken by comparing them)
    done = [_rec("TERMINATED", 2.0), _rec("TERMINATED"), _rec("TERMINATED", 2.0), _rec("TERMINATED"),
            _rec("TERMINATED", 1.0)]
    for i, rec in enumerate(done):
        rec.trial_id = str(i)  # (rows with equal fields compare equal: a tie between them needs no order)
    shown, _ = choose_rows(done, 10, "loss", "min")
    assert shown == [done[i] for i in (4, 0, 2, 1, 3)], "equal values, and no value, in table order"
    trials = [_rec("RUNNING"), _rec("RUNNING"), _rec("TERMINATED", 5.0)]
    shown, hidden = choose_rows(trials, 2, "loss", "min")
    assert shown == [trials[0], trials[2]] and hidden == {"RUNNING": 1}


def test_choose_rows_on_a_large_table_shows_the_best_and_counts_the_rest():
    trials = [_rec("TERMINATED", float((i * 7919) % 10_000)) for i in range(10_000)]
    trials += [_rec("RUNNING") for _ in range(8)] + [_rec("PENDING") for _ in range(2_000)]
    shown, hidden = choose_rows(trials, 20, "loss", "min")
    assert len(shown) == 20 and shown[:8] == trials[10_000:10_008]
    assert shown[-1].last_result == {"loss": 0.0}
    assert hidden == {"PENDING": 2_000 - 11, "TERMINATED": 9_999}


def test_table_caption_counts_the_hidden_rows():
    pytest.importorskip("rich")
    from rich.console import Console

    from actors._driver.progress import ProgressDisplay
    from actors.messages import ExperimentProgress, ProgressRow

    row = ProgressRow("t1", TrialStatus.RUNNING, {"lr": 0.1}, 3, 0.5, "")
    reporter = ProgressDisplay("cap", verbose=0)
    out = io.StringIO()
    Console(file=out, width=200).print(reporter._table(ExperimentProgress(
        {"RUNNING": 1, "PENDING": 12, "TERMINATED": 25}, (row,), 1.0, "loss", hidden={"PENDING": 12,
                                                                                     "TERMINATED": 25})))
    assert "... 37 more trials not shown (12 PENDING, 25 TERMINATED)" in out.getvalue()
    out = io.StringIO()
    Console(file=out, width=200).print(reporter._table(ExperimentProgress({"RUNNING": 1}, (row,), 1.0, "loss")))
    assert "not shown" not in out.getvalue()


@pytest.mark.parametrize("rows", [0, -3, 2.5, True, "20"])
def test_max_progress_rows_is_validated(rows, storage_dir):
    with pytest.raises(ConfigError, match=r"RunConfig\(max_progress_rows=.*\): use an int >= 1"):
        RunConfig(storage=storage_dir, max_progress_rows=rows)


def test_live_table_error_cell_names_the_error_and_where_it_was_raised():
    from actors._engine.feed import error_summary

    tb = ('Traceback (most recent call last):\n  File "/x/audition/actors/_worker/runner.py", line 150, in run\n'
          '    fn(config)\n  File "/home/me/train.py", line 12, in train\n    raise ValueError("bad lr")\n'
          'ValueError: bad lr\n')
    assert error_summary("ValueError: bad lr\nmore", tb) == ('ValueError: bad lr\n'
                                                             'File "/home/me/train.py", line 12, in train')
    assert error_summary(None, tb) is None
    assert error_summary("lost contact with member 'w1'", "host lost\n") == "lost contact with member 'w1'"
    long = error_summary("E" * 200, f'  File "/{"d" * 200}/t.py", line 1, in f\n')
    assert long is not None and all(len(x) <= 80 for x in long.splitlines()) and long.endswith('in f')
    frame = 'File "/x.py", line 1, in f'
    frame = frame.replace("/x", "/" + "x" * (80 - len(frame) + 1))
    assert len(frame) == 80
    assert error_summary("E", f"  {frame}\n") == f"E\n{frame}", "a frame as wide as the cell is shown whole"
    wider = frame.replace("/x", "/xy")
    assert error_summary("E", f"  {wider}\n") == f"E\n...{wider[-77:]}", "a wider one keeps its end, cut to 80"


def test_restored_run_gets_the_callbacks_passed_to_restore(storage_dir, no_leaks):
    grid = Tuner(T.raiser, param_space={"fail": grid_search([False, True])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="cb", storage=storage_dir, system="simple", verbose=0)).fit()
    errored = [r.trial_id for r in grid if r.error]
    assert len(errored) == 1
    with pytest.raises(ConfigError, match="Callback instances"):
        Tuner.restore(grid.experiment_path, T.raiser, callbacks=[object()])
    rec = Recorder()
    Tuner.restore(grid.experiment_path, T.raiser, restart_errored=True, callbacks=[rec]).fit()
    assert rec.ended == 1
    # only the restarted trial runs, and it is heard: a new trial, as Ray 2.60's Trial.reset() (recorded)
    heard = {t for _, t, _ in rec.events}
    assert len(heard) == 1 and heard.isdisjoint(errored) and "_" not in next(iter(heard))
    assert rec.events[0][0] == "start" and rec.events[-1][0] == "error"
