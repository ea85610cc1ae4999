"""Checkpoints whose ``checkpoint_score_attribute`` value is not a number, as Ray Tune 2.60 keeps them.

Recorded from Ray 2.60 (``/work/rayvenv``): a function trainable reporting a checkpoint (a file
holding its index) with every result, ``score`` taking the values ``VALS`` (``None``: not reported),
``CheckpointConfig(num_to_keep=..., checkpoint_score_attribute="score", checkpoint_score_order=...)``.
Ray's bookkeeping raises on ``1.0 * "s"``, so that checkpoint is never registered: not in
``best_checkpoints``, never deleted; a bool counts as a number.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest

from actors import Checkpoint, CheckpointConfig, RunConfig, Tuner, report

VALS: list[Any] = [3, None, 1, "s", 5, None, True, 2]


def _train(config: dict[str, Any]) -> None:
    for i, v in enumerate(VALS):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "i.json"), "w") as handle:
            json.dump(i, handle)
        report({"i": i} if v is None else {"i": i, "score": v}, checkpoint=Checkpoint.from_directory(d))


def _index(ckpt: Any) -> int:
    with open(os.path.join(ckpt.path, "i.json")) as handle:
        return int(json.load(handle))


# recorded from Ray 2.60: (num_to_keep, order) -> (best_checkpoints as (index, score), directories left)
RAY = {
    (3, "max"): ([(7, 2), (4, 5), (5, None)], [3, 4, 5, 7]),
    (2, "min"): ([(1, None), (5, None)], [1, 3, 5, 7]),
    (None, "max"): ([(2, 1), (6, True), (7, 2), (0, 3), (1, None), (4, 5), (5, None)], [0, 1, 2, 3, 4, 5, 6, 7]),
}


@pytest.mark.parametrize(("keep", "order"), list(RAY))
def test_a_non_numeric_score_is_never_registered(keep: int | None, order: str, storage_dir: str) -> None:
    cc = CheckpointConfig(num_to_keep=keep, checkpoint_score_attribute="score", checkpoint_score_order=order)
    r = Tuner(_train, run_config=RunConfig(name=f"s{keep}{order}", storage=storage_dir, verbose=0,
                                           checkpoint_config=cc, system="simple")).fit()[0]
    best = [(_index(c), m.get("score")) for c, m in r.best_checkpoints]
    left = sorted(int(d.rpartition("_")[2]) for d in os.listdir(r.path) if d.startswith("checkpoint_"))
    assert (best, left) == RAY[(keep, order)]
    assert r.checkpoint is not None and _index(r.checkpoint) == 7
    if keep == 2:  # recorded: neither kept checkpoint has a score
        with pytest.raises(RuntimeError):
            r.get_best_checkpoint("score", "max")
    else:  # recorded: get_best_checkpoint("score", "max") is the checkpoint at 4
        assert _index(r.get_best_checkpoint("score", "max")) == 4


LOOKUPS: list[dict[str, Any]] = [{"s": 1.0, "l": [5, 1]}, {"s": float("nan"), "l": [2, 9]}, {"s": True, "l": [7, 3]},
                                 {"l": [1, 1]}, {"s": 0.5, "l": [0, 0], "b": False}]


def _lookups(config: dict[str, Any]) -> None:
    for i, v in enumerate(LOOKUPS):
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "i.json"), "w") as handle:
            json.dump(i, handle)
        report(dict(v, i=i), checkpoint=Checkpoint.from_directory(d))


def test_analysis_get_best_checkpoint_looks_up_as_rays(storage_dir: str) -> None:
    """Recorded from Ray 2.60: ``tune.run`` of ``_lookups`` (a checkpoint with every result), then
    ``analysis.get_best_checkpoint(trial, metric, mode)``: ``"l/0"`` indexes the list; a metric that a
    kept checkpoint's result lacks raises ``KeyError`` (``Result.get_best_checkpoint`` passes such
    checkpoints over: ``"s"`` max gives 0, min gives 4, ``"b"`` max gives 4)."""
    import actors

    analysis = actors.run(_lookups, storage_path=storage_dir, name="lookups", verbose=0, system="simple")
    trial = analysis.trials[0]
    assert [_index(analysis.get_best_checkpoint(trial, m, mode)) for m, mode in
            (("l/0", "max"), ("l/1", "min"), ("i", "max"))] == [2, 4, 4]
    for metric in ("s", "b"):
        with pytest.raises(KeyError):
            analysis.get_best_checkpoint(trial, metric, "max")
    result = analysis.result_grid[0]
    assert [_index(result.get_best_checkpoint(m, mode)) for m, mode in
            (("s", "max"), ("s", "min"), ("b", "max"), ("l/0", "max"))] == [0, 4, 4, 2]
