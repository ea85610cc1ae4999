"""When the controller writes the experiment state: periodically, and soon after a trial pauses,
stops or finishes (bounded by the cost of the last write), always paired with the scheduler state
asked for at the same moment."""

from __future__ import annotations

import pickle

from actors._engine.store import SearchProgress
from storage import read_experiment_state
from tests.test_restore import _io


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_finished_trial_makes_the_state_due_before_the_interval(storage_dir) -> None:
    io, table = _io(storage_dir)
    io.clock = clock = Clock()
    table.add(f"{io.trial_prefix}_00000", {})
    io.snapshot_table(table, None, SearchProgress(1), tag=7)
    io.scheduler_saved(pickle.dumps({"s": 1}), 7)
    assert not io.state_due()  # just written, nothing happened
    io.write_cost = 0.001
    clock.now += 0.01
    assert not io.state_due()  # 0.01 s < interval and nothing is dirty
    io.dirty = True
    assert not io.state_due()  # dirty, but not yet 20x the last write's cost
    clock.now += 0.02
    assert io.state_due()
    clock.now += 10  # the periodic write is due whatever happened
    io.dirty = False
    assert io.state_due()


def test_only_the_matching_scheduler_answer_completes_a_snapshot(storage_dir) -> None:
    io, table = _io(storage_dir)
    table.add(f"{io.trial_prefix}_00000", {})
    io.snapshot_table(table, None, SearchProgress(1), tag=3)
    io.freeze(table, None, SearchProgress(1), tag=5)  # an abort overtook the periodic save
    io.scheduler_saved(pickle.dumps({"at": 3}), 3)  # the older answer: kept, not written
    assert read_experiment_state(io.ctx, io.layout) is None
    io.scheduler_saved(pickle.dumps({"at": 5}), 5)
    state = read_experiment_state(io.ctx, io.layout)
    assert state is not None
    import base64
    assert pickle.loads(base64.b64decode(state["scheduler"])) == {"at": 5}


def test_a_costly_state_is_written_no_more_than_a_twentieth_of_the_time(storage_dir) -> None:
    """Periodic writes too wait 20x the last write's cost (Ray Tune's rule: at most 5% of the time): a state
    of 20,000 trials took 0.7 s to write on local disk, and written every second it took 72% of the controller."""
    io, table = _io(storage_dir)
    io.clock = clock = Clock()
    table.add(f"{io.trial_prefix}_00000", {})
    io.snapshot_table(table, None, SearchProgress(1), tag=1)
    io.scheduler_saved(pickle.dumps({"s": 1}), 1)
    io.write_cost = 0.2  # the next write no sooner than 4 s after this one
    clock.now += 1.5
    assert not io.state_due()  # the interval passed, not 20x the cost
    io.dirty = True
    assert not io.state_due()  # a trial ended: still not before 20x the cost
    clock.now += 2.5
    assert io.state_due()
    io.dirty = False
    assert io.state_due()  # the interval passed long ago
    io.write_cost = 0.01  # cheap writes: every state_interval_s, as before
    clock.now = io.last_state + 0.99
    assert not io.state_due()
    clock.now = io.last_state + 1.0
    assert io.state_due()
    io.write_cost = 30.0  # a write slowed by a storage stall: the next one within a minute all the same
    clock.now = io.last_state + 59.9
    assert not io.state_due()
    clock.now = io.last_state + 60.0
    assert io.state_due()


def test_the_histories_rewritten_with_a_state_count_in_its_cost(storage_dir) -> None:
    """Rows first: a state write flushes every trial's history (on an object store, a rewrite of each file
    whole), so that time is part of what spaces the writes: the controller's share stays bounded however
    long the histories grow."""
    io, table = _io(storage_dir)
    io.clock = clock = Clock()
    io.cost_clock = cost = Clock()
    flush = io.loggers.flush

    def slow_flush() -> None:
        cost.now += 0.5  # eight 20,000-row histories to a loopback S3 took about that
        flush()

    io.loggers.flush = slow_flush
    table.add(f"{io.trial_prefix}_00000", {})
    io.snapshot_table(table, None, SearchProgress(1), tag=1)
    io.scheduler_saved(pickle.dumps({"s": 1}), 1)
    assert io.write_cost >= 0.5
    clock.now += 9.9
    assert not io.state_due()
    clock.now += 0.1
    assert io.state_due()
