"""Trainables and the abort callback of the golden saved experiments (``tests/data/golden/``).

They live in an importable module, not in ``make_golden.py``'s ``__main__``, because the
saved ``tuner.pkl`` and searcher state name what they pickle by module path, and
``tests/test_golden_restore.py`` passes the same trainables to ``Tuner.restore``. Only the
public API is used, so this module imports under the code that made the data and today's.
"""

from __future__ import annotations

import time
from typing import Any

from actors import Callback, Checkpoint, get_checkpoint, report


def counter(config: dict[str, Any]) -> None:
    """Reports ``step == training_iteration - 1`` with a tiny checkpoint every step, so a resume
    from the wrong checkpoint (or from scratch) shows in the history; ``resumed_from`` is the
    step of the checkpoint this run started from (-1: from scratch)."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, config["steps"]):
        time.sleep(config.get("sleep", 0.02))
        loss = config["x"] * 10 / (step + 1)
        report({"loss": loss, "step": step, "resumed_from": start - 1},
               checkpoint=Checkpoint.from_dict({"step": step}))


def pbt_counter(config: dict[str, Any]) -> None:
    """``counter`` for PBT: the checkpoint carries the step, so an exploited trial continues from
    its source's step; ``lr`` (mutated by PBT) drives the loss."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, config["steps"]):
        time.sleep(config.get("sleep", 0.02))
        report({"loss": 1.0 / (config["lr"] * (step + 1)), "step": step},
               checkpoint=Checkpoint.from_dict({"step": step}))


class AbortAfter(Callback):
    """Interrupts the driver (as Ctrl-C does) at the first result after ``completed`` trials
    completed: the run aborts, and its final state keeps the unfinished trials resumable.
    Implementing ``on_trial_result`` makes the controller wait for the driver's answer to each
    result batch, so the abort lands while trials are still running."""

    def __init__(self, completed: int) -> None:
        self.completed = completed
        self.seen = 0

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.seen += 1

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        if self.seen >= self.completed:
            raise KeyboardInterrupt("golden data: abort mid-way")


__all__ = ["AbortAfter", "counter", "pbt_counter"]
