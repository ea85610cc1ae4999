"""One list of the keys the engine puts in results (``actors.result.ENGINE_RESULT_KEYS``), used by the
controller's missing-metric message and by ``audition inspect``: a key the engine adds is never shown
to the user as one of their metrics."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Callback, Checkpoint, RunConfig, TuneConfig, Tuner, report
from actors._driver.errors import TuneError
from actors.result import ENGINE_RESULT_KEYS


def with_checkpoint(config: dict[str, Any]) -> None:
    report({"acc": 1.0}, checkpoint=Checkpoint.from_dict({"i": 0}))  # its result says should_checkpoint


class Keys(Callback):
    def __init__(self) -> None:
        self.keys: set[str] = set()

    def on_trial_result(self, result: dict[str, Any], **info: Any) -> None:
        self.keys |= set(result)


def test_the_missing_metric_message_lists_only_the_users_keys(storage_dir) -> None:
    with pytest.raises(TuneError) as err:
        Tuner(with_checkpoint, tune_config=TuneConfig(metric="loss", mode="min"),
              run_config=RunConfig(name="keys", storage=storage_dir, verbose=0, system="simple")).fit()
    assert "without the metric 'loss' (it reported ['acc'])" in str(err.value)


def test_every_key_the_engine_adds_is_in_the_shared_list(storage_dir) -> None:
    cb = Keys()
    Tuner(with_checkpoint, run_config=RunConfig(name="all", storage=storage_dir, verbose=0, system="simple",
                                                callbacks=[cb])).fit()
    assert "should_checkpoint" in cb.keys
    assert cb.keys - {"acc"} <= ENGINE_RESULT_KEYS, cb.keys - {"acc"} - ENGINE_RESULT_KEYS
