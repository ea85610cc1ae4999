"""The simulator's cheaper storage writes the very bytes a real run writes (actors.testing.sim_store)."""

from __future__ import annotations

import itertools

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from actors.testing.sim_store import SimStateWriter, use_sim_storage
from storage import ExperimentLayout, StateWriter, StorageContext, StorageError, read_experiment_state
from storage._io import write_bytes

_n = itertools.count()


class Score(float):
    """A float subclass (as numpy's float64 is): not a plain value, so encoded at once."""


def _ctx(sim: bool) -> tuple[StorageContext, ExperimentLayout]:
    ctx = StorageContext(f"memory://sim-store-test/{next(_n)}")
    if sim:
        use_sim_storage(ctx)
    return ctx, ExperimentLayout(ctx, "exp")


STATES = [
    {"version": 1, "trials": [{"trial_id": "t0", "config": {"lr": 0.1, "layers": (1, 2)}, "error": None,
                               "last_result": {"loss": float("nan"), "ok": True, "n": 3, "s": "é\n"}}]},
    {"version": 1, "trials": [], "tags": {"b", "a"}, "blob": b"\x00", 7: "int key"},
    {"version": 1, "score": Score(0.25), "nested": [{"x": [Score(1.5)]}]},
]


@pytest.mark.parametrize("state", STATES, ids=["plain", "set-bytes-intkey", "float-subclass"])
def test_the_state_read_back_is_byte_for_byte_a_real_writes(state: dict) -> None:
    real_ctx, real_layout = _ctx(sim=False)
    sim_ctx, sim_layout = _ctx(sim=True)
    clock = iter(range(100)).__next__
    real = StateWriter(real_ctx, real_layout, clock=lambda: 1.0)
    sim = SimStateWriter(sim_ctx, sim_layout, clock=lambda: 1.0)
    history: list[int] = []
    for _ in range(4):  # several versions: the pointer moves, old versions are pruned
        state = dict(state, step=clock(), history=history)
        real_path, sim_path = real.write(state), sim.write(state)
        history.append(len(history))  # changed after the write: not in what was written
    fs = MemoryFileSystem()  # fsspec's own class reads both, as ResultGrid and Tuner.restore do
    assert fs.cat_file(sim_path) == fs.cat_file(real_path)
    assert fs.cat_file(sim_layout.state_pointer).replace(sim_path.rsplit("/", 1)[1].encode(), b"V") == \
        fs.cat_file(real_layout.state_pointer).replace(real_path.rsplit("/", 1)[1].encode(), b"V")
    assert len(fs.ls(sim_layout.state_dir)) == len(fs.ls(real_layout.state_dir)) == 3
    with fs.open(sim_path, "rb") as f:
        assert f.read() == fs.cat_file(real_path)
    assert read_experiment_state(sim_ctx, sim_layout) == read_experiment_state(real_ctx, real_layout)


def test_a_write_below_a_file_or_onto_a_directory_fails_as_on_fsspecs_store() -> None:
    for sim in (False, True):
        ctx, layout = _ctx(sim)
        write_bytes(ctx, layout.experiment_dir + "/f", b"x")
        with pytest.raises(StorageError, match="FileExistsError|exists"):
            write_bytes(ctx, layout.experiment_dir + "/f/g", b"y")
        ctx.fs.makedirs(layout.experiment_dir + "/d", exist_ok=True)
        with pytest.raises(StorageError, match="IsADirectoryError|directory"):
            write_bytes(ctx, layout.experiment_dir + "/d", b"y")
