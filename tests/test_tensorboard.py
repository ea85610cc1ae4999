"""TBXLoggerCallback: real TensorBoard event files, read back record by record."""

from __future__ import annotations

import glob
import os
import struct
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError
from actors.search import grid_search
from tests import _trainables as T
from tests._lean import IN_PROCESS, needs

pytestmark = [needs("tensorboardX"), IN_PROCESS]  # (which imports torch and comet_ml when installed: tests/_lean.py)


def _scalars(path: str) -> dict[str, list[tuple[int, float]]]:
    """Parse a tfevents file (length, crc, payload, crc records) into {tag: [(step, value)]}."""
    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        payload = data[pos + 12:pos + 12 + length]
        pos += 12 + length + 4
        ev = event_pb2.Event.FromString(payload)
        for v in ev.summary.value:
            out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_event_files_hold_every_result(storage_dir: str, no_leaks: Any) -> None:
    from actors import TBXLoggerCallback

    grid = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 4},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="tb", storage=storage_dir, verbose=0,
                                      callbacks=[TBXLoggerCallback()])).fit()
    for r in grid:
        files = glob.glob(os.path.join(r.path, "events.out.tfevents.*"))
        assert len(files) == 1, files
        scalars = _scalars(files[0])
        assert [s for s, _ in scalars["loss"]] == [1, 2, 3, 4]
        assert [v for _, v in scalars["loss"]] == pytest.approx([h["loss"] for h in r.metrics_history])
        assert "training_iteration" not in scalars and "timestamp" not in scalars


def test_remote_storage_needs_a_local_logdir(storage_dir: str) -> None:
    from actors import TBXLoggerCallback

    tuner = Tuner(T.fn_trainable, run_config=RunConfig(name="tb", storage="memory://tb", system="simple",
                                                       verbose=0, callbacks=[TBXLoggerCallback()]))
    with pytest.raises(ConfigError, match="logdir="):
        tuner.fit()


def test_event_files_go_into_a_named_trial_directory(storage_dir: str) -> None:
    """With trial_dirname_creator, the events are in the trial's directory, next to its results."""
    from actors import TBXLoggerCallback

    grid = Tuner(T.fn_trainable, param_space={"x": 1.0, "steps": 2},
                 tune_config=TuneConfig(metric="loss", mode="min", trial_dirname_creator=lambda t: "named"),
                 run_config=RunConfig(name="tbn", storage=storage_dir, verbose=0, system="simple",
                                      callbacks=[TBXLoggerCallback()])).fit()
    files = glob.glob(os.path.join(storage_dir, "tbn", "named", "events.out.tfevents.*"))
    assert len(files) == 1 and [s for s, _ in _scalars(files[0])["loss"]] == [1, 2]
    assert grid[0].path == os.path.join(storage_dir, "tbn", "named")
    exp = os.path.join(storage_dir, "tbn")  # nothing written anywhere else
    assert [d for d in os.listdir(exp) if os.path.isdir(os.path.join(exp, d)) and not d.startswith(".")] == ["named"]
