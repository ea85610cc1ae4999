"""``Callback.get_state`` / ``set_state`` saved with the experiment and restored by ``Tuner.restore``.

Expected values recorded from Ray Tune 2.60 (``/work/rayvenv``; callbacks ``[A, B, C, D]`` where A
and D return ``{"n": <hooks seen>, "tag": ..., "s": {1, 2}}``, B ``None`` and C ``{}``, over a grid
of two trials, one failing; then ``tune.run(resume="AUTO+...", callbacks=[X, Y, Z, W, V])`` with X
of another class): ``get_state`` of every callback once after ``setup`` before any trial hook, and
once at the end right before ``on_experiment_end`` (Ray: at its loop's first step, then at most
every 10 s, and a forced save at the end); the saved dict is keyed by position and keeps the
``set`` (a pickle); on restore ``set_state`` goes to positions 0 and 3 only (truthy states), to X
although it is of another class, before any ``setup``; ``Tuner.restore()`` alone calls nothing.
"""

from __future__ import annotations

import os
from typing import Any

import cloudpickle
import pytest

from actors import Callback, RunConfig, Tuner, report
from actors._driver import callback_state

LOG: list[tuple[Any, ...]] = []


class Rec(Callback):
    def __init__(self, tag: str) -> None:
        self.tag, self.n = tag, 0

    def setup(self, **info: Any) -> None:
        LOG.append((self.tag, "setup"))

    def on_trial_start(self, trial: Any, **info: Any) -> None:
        self.n += 1
        LOG.append((self.tag, "start"))

    def on_trial_complete(self, trial: Any, **info: Any) -> None:
        self.n += 1

    def on_trial_error(self, trial: Any, **info: Any) -> None:
        self.n += 1

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        LOG.append((self.tag, "end"))

    def get_state(self) -> dict[str, Any] | None:
        LOG.append((self.tag, "get_state"))
        return {"n": self.n, "tag": self.tag, "s": {1, 2}}

    def set_state(self, state: dict[str, Any]) -> None:
        LOG.append((self.tag, "set_state", state))


class Stateless(Rec):
    def get_state(self) -> dict[str, Any] | None:
        LOG.append((self.tag, "get_state"))
        return None


class Empty(Rec):
    def get_state(self) -> dict[str, Any] | None:
        LOG.append((self.tag, "get_state"))
        return {}


class Other(Rec):
    pass


def fails_if_asked(config: dict[str, Any]) -> None:
    report({"m": 1})
    if config["fail"] and not os.path.exists(config["fixed"]):
        raise RuntimeError("planned failure")
    report({"m": 2})


@pytest.fixture(autouse=True)
def _fresh_log(monkeypatch) -> None:
    LOG.clear()
    # the run is short, but a slow machine must not add a periodic save between the two recorded
    monkeypatch.setattr(callback_state, "SAVE_PERIOD_S", 1e9)


def test_callback_state_is_saved_by_position_and_restored_as_ray_does(storage_dir, tmp_path) -> None:
    from actors import search

    fixed = str(tmp_path / "fixed")
    cbs = [Rec("a"), Stateless("b"), Empty("c"), Rec("d")]
    first = Tuner(fails_if_asked, param_space={"fail": search.grid_search([True, False]), "fixed": fixed},
                  run_config=RunConfig(name="cs", storage=storage_dir, verbose=0, callbacks=cbs,
                                       system="simple")).fit()
    assert first.num_errors == 1
    gets = [e for e in LOG if e[1] == "get_state"]
    assert [e[0] for e in gets] == ["a", "b", "c", "d"] * 2
    order = [e[1] for e in LOG if e[0] == "a"]  # recorded: after setup, before any trial; before the end
    assert order == ["setup", "get_state", "start", "start", "get_state", "end"]
    with open(os.path.join(first.experiment_path, callback_state.STATE_NAME), "rb") as f:
        assert cloudpickle.load(f) == {0: {"n": 4, "tag": "a", "s": {1, 2}}, 1: None, 2: {},
                                       3: {"n": 4, "tag": "d", "s": {1, 2}}}
    LOG.clear()
    open(fixed, "w").close()
    again = [Other("x"), Rec("y"), Rec("z"), Rec("w"), Rec("v")]
    tuner = Tuner.restore(first.experiment_path, fails_if_asked, resume_errored=True, callbacks=again)
    assert LOG == []  # recorded: Tuner.restore() alone calls no hook
    tuner.fit()
    assert LOG[:2] == [("x", "set_state", {"n": 4, "tag": "a", "s": {1, 2}}),
                       ("w", "set_state", {"n": 4, "tag": "d", "s": {1, 2}})]
    assert [e for e in LOG if e[1] == "set_state"] == LOG[:2]
    assert LOG[2:7] == [(t, "setup") for t in "xyzwv"]


def test_nothing_is_written_while_no_callback_has_state(storage_dir) -> None:
    """Recorded: Ray writes its callback-states file only when some state is truthy."""
    grid = Tuner(fails_if_asked, param_space={"fail": False, "fixed": ""}, run_config=RunConfig(
        name="none", storage=storage_dir, verbose=0, callbacks=[Stateless("b"), Empty("c")],
        system="simple")).fit()
    assert not os.path.exists(os.path.join(grid.experiment_path, callback_state.STATE_NAME))
    assert [e[0] for e in LOG if e[1] == "get_state"] == ["b", "c"] * 2
