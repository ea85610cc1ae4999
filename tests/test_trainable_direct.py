"""A class ``Trainable`` used by hand, outside ``fit()``, as Ray Tune 2.60 users unit-test theirs.

Every expected value was recorded from Ray 2.60 (``/work/rayvenv``, ``from ray.tune import Trainable``,
no ``ray.init``: building a Trainable needs none) with the same classes, built by hand and driven with
``train()``/``save()``/``restore()``/``reset()``/``stop()``; the ``fit()`` ones with ``ray.init(num_cpus=2)``
and ``Tuner(cls).fit()``. Deliberate differences are marked and listed in docs/coming-from-ray.md.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import tempfile
import time
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, Trainable, Tuner

# recorded from Ray 2.60: sorted(T(config={"lr": 0.1}).train()) for a step() returning {"x": ...}
RAY_TRAIN_KEYS = ["config", "date", "done", "hostname", "iterations_since_restore", "node_ip", "pid",
                  "time_since_restore", "time_this_iter_s", "time_total_s", "timestamp", "training_iteration",
                  "trial_id", "x"]
# recorded from Ray 2.60: list(get_auto_filled_metrics(...)) once timesteps_this_iter was reported
RAY_AUTO_KEYS = ["trial_id", "date", "timestamp", "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip",
                 "config", "time_since_restore", "iterations_since_restore", "timesteps_since_restore"]


@pytest.fixture(autouse=True)
def _home(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``logdir`` makes a directory under ``~``: keep it in the test's own directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


class Adder(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.x = 0.0
        self.got = config
        self.events: list[str] = ["setup"]

    def step(self) -> dict[str, Any]:
        self.x += self.config["lr"]
        return {"x": self.x}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"x": self.x}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.loaded = checkpoint
        self.x = checkpoint["x"]

    def log_result(self, result: dict[str, Any]) -> None:
        self.events.append(f"log_result {result['training_iteration']}")

    def cleanup(self) -> None:
        self.events.append("cleanup")


class Files(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.v = 5

    def step(self) -> dict[str, Any]:
        self.v += 1
        return {"v": self.v}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "v.txt"), "w") as f:
            f.write(str(self.v))

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.loaded = checkpoint
        with open(os.path.join(checkpoint, "v.txt")) as f:
            self.v = int(f.read())


class Own(Trainable):
    """Reports keys Ray fills in itself, and the increments it sums."""

    def setup(self, config: dict[str, Any]) -> None:
        self.k = 0

    def step(self) -> dict[str, Any]:
        self.k += 1
        return {"training_iteration": 42, "timestamp": 7, "time_this_iter_s": 2.5, "done": None,
                "timesteps_this_iter": 10, "episodes_this_iter": 2, "trial_id": "mine", "config": "x", "pid": -1}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"k": self.k}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.k = checkpoint["k"]


# ------------------------------------------------------------------ building and train()
def test_building_runs_setup_with_a_deep_copy_of_the_config() -> None:
    cfg = {"lr": 0.1, "nested": {"k": 1}}
    t = Adder(config=cfg)
    # recorded: setup() got an equal deep copy; self.config and get_config() are the caller's dict
    assert t.events == ["setup"] and t.got == cfg and t.got is not cfg and t.got["nested"] is not cfg["nested"]
    assert t.config is cfg and t.get_config() is cfg
    assert (t.iteration, t.training_iteration, t.trial_id, t.trial_name, t.trial_resources) == (0, 0, "default",
                                                                                                "default", None)
    assert Trainable().config == {} and Trainable(None).config == {}  # recorded: the base class builds


def test_train_returns_one_step_with_rays_auto_filled_keys() -> None:
    t = Adder(config={"lr": 0.1})
    r = t.train()
    assert sorted(r) == RAY_TRAIN_KEYS
    assert (r["x"], r["done"], r["training_iteration"], r["iterations_since_restore"], r["trial_id"]) == (
        0.1, False, 1, 1, "default")
    assert r["config"] is t.config and r["pid"] == os.getpid() and isinstance(r["timestamp"], int)
    assert r["time_this_iter_s"] == r["time_total_s"] == r["time_since_restore"] >= 0
    assert t.events == ["setup", "log_result 1"]  # recorded: log_result gets the filled result
    r2 = t.train()
    assert (r2["training_iteration"], r2["iterations_since_restore"], t.iteration, t.training_iteration) == (2, 2, 2, 2)
    assert r2["time_total_s"] == pytest.approx(r["time_total_s"] + r2["time_this_iter_s"])
    assert t.get_current_ip_pid() == (r2["node_ip"], os.getpid())


def test_a_steps_own_keys_and_running_totals() -> None:
    o = Own({"c": 1})
    r1, r2 = o.train(), o.train()
    # recorded from Ray 2.60: its own training_iteration, timestamp, time_this_iter_s and done (None) stay;
    # trial_id, config and pid are written over; the totals add up the increments
    kept = {"training_iteration": 42, "timestamp": 7, "time_this_iter_s": 2.5, "done": None, "trial_id": "default",
            "config": {"c": 1}}
    assert {k: r1[k] for k in kept} == kept and r1["pid"] == os.getpid()
    assert {k: r1[k] for k in ("timesteps_total", "episodes_total", "time_total_s", "time_since_restore",
                               "iterations_since_restore", "timesteps_since_restore")} == {
        "timesteps_total": 10, "episodes_total": 2, "time_total_s": 2.5, "time_since_restore": 2.5,
        "iterations_since_restore": 1, "timesteps_since_restore": 10}
    assert {k: r2[k] for k in ("timesteps_total", "episodes_total", "time_total_s", "timesteps_since_restore")} == {
        "timesteps_total": 20, "episodes_total": 4, "time_total_s": 5.0, "timesteps_since_restore": 20}
    state = o.get_state()
    assert state["last_result"] == r2
    # recorded: {'iteration': 2, 'timesteps_total': 20, 'time_total': 5.0, 'episodes_total': 4, ..., 'ray_version'}
    # (deliberate: audition_version for ray_version)
    assert {k: v for k, v in state.items() if k != "last_result"} == {
        "iteration": 2, "timesteps_total": 20, "time_total": 5.0, "episodes_total": 4, "audition_version": "0.1.0"}


def test_a_zero_timestamp_and_a_none_time_are_filled_in() -> None:
    class Zero(Trainable):
        def step(self) -> dict[str, Any]:
            return {"timestamp": 0, "time_this_iter_s": None}

    r = Zero().train()
    assert r["timestamp"] >= int(time.time()) - 5 and isinstance(r["time_this_iter_s"], float)  # recorded


def test_train_goes_on_after_done_and_passes_a_duplicate_marker_through() -> None:
    class Done(Trainable):
        def step(self) -> dict[str, Any]:
            return {"done": True, "v": 1}

    class Dup(Trainable):
        def step(self) -> dict[str, Any]:
            return {"__duplicate__": True, "a": 1}

    t = Done({})
    assert [(t.train()["done"], t.iteration) for _ in range(2)] == [(True, 1), (True, 2)]  # recorded
    d = Dup()
    assert (d.train(), d.iteration) == ({"__duplicate__": True, "a": 1}, 0)  # recorded: as it is, uncounted


def test_what_step_and_setup_raise_reaches_the_caller() -> None:
    class NonDict(Trainable):
        def step(self) -> Any:
            return 3.0

    class StepRaises(Trainable):
        def step(self) -> dict[str, Any]:
            raise ValueError("bad step")

    class SetupRaises(Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            raise RuntimeError("boom in setup")

        def cleanup(self) -> None:
            raise AssertionError("cleanup is not called when setup raised")

    n = NonDict()
    with pytest.raises(AssertionError, match="must return a dict"):  # recorded: AssertionError (audition's: also
        n.train()                                                       # a TypeError, as the engine raises)
    with pytest.raises(TypeError):
        n.train()
    s = StepRaises()
    with pytest.raises(ValueError, match="bad step"):
        s.train()
    assert (n.iteration, s.iteration) == (0, 0)  # recorded
    with pytest.raises(RuntimeError, match="boom in setup"):  # recorded: from the constructor, no cleanup()
        SetupRaises({"a": 1})
    with pytest.raises(NotImplementedError):  # recorded: the base step()
        Trainable().train()


def test_train_buffered_stops_at_done_a_checkpoint_or_the_buffers_end() -> None:
    class Buf(Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            self.i = 0

        def step(self) -> dict[str, Any]:
            self.i += 1
            return {"i": self.i, "done": self.i >= 5, "should_checkpoint": self.i == 2}

    b = Buf()
    got = [[x["i"] for x in b.train_buffered(10.0)], [x["i"] for x in b.train_buffered(10.0, max_buffer_length=2)],
           [x["i"] for x in b.train_buffered(0)], [x["i"] for x in b.train_buffered(10.0)]]
    assert got == [[1, 2], [3, 4], [5], [6]]  # recorded


def test_get_auto_filled_metrics() -> None:
    o = Own()
    o.train(), o.train()
    now = datetime.datetime(2026, 1, 2, 3, 4, 5)
    a = o.get_auto_filled_metrics(now=now, time_this_iter=1.5)
    assert list(a) == RAY_AUTO_KEYS
    # recorded: the date of `now`, its local-time timestamp (time.mktime), the counts so far
    assert {k: a[k] for k in ("date", "time_this_iter_s", "time_total_s", "iterations_since_restore", "trial_id")} == {
        "date": "2026-01-02_03-04-05", "time_this_iter_s": 1.5, "time_total_s": 5.0, "iterations_since_restore": 2,
        "trial_id": "default"}
    assert a["timestamp"] == int(time.mktime(now.timetuple()))
    assert o.get_auto_filled_metrics(timestamp=5)["timestamp"] == 5
    assert list(o.get_auto_filled_metrics(debug_metrics_only=True)) == [
        "trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config"]


# ------------------------------------------------------------------ save() and restore()
def test_save_returns_the_checkpoint_and_the_last_results_metrics() -> None:
    t = Adder(config={"lr": 0.1})
    assert t.save().metrics == {}  # recorded: before any train()
    t.train()
    r2 = t.train()
    s = t.save()
    # recorded: a TrainingResult with .checkpoint (a Checkpoint of a new temp directory, kept) and .metrics
    # (a copy of the last result)
    assert isinstance(s.checkpoint, Checkpoint) and s.metrics == r2 and s.metrics is not r2
    assert os.path.dirname(s.checkpoint.path) == tempfile.gettempdir() and os.path.isdir(s.checkpoint.path)
    assert os.listdir(s.checkpoint.path) == ["dict_checkpoint.pkl"]  # Ray's is named _dict_checkpoint.pkl


def test_save_into_a_directory_and_restore_from_a_result_a_checkpoint_or_a_path(tmp_path: pathlib.Path) -> None:
    f = Files()
    f.train()
    s = f.save(str(tmp_path / "mine"))
    assert s.checkpoint.path == str(tmp_path / "mine") and os.listdir(tmp_path / "mine") == ["v.txt"]  # recorded
    g = Files()
    g.restore(s)
    assert (g.v, g.iteration, g.loaded) == (6, 1, s.checkpoint.path)  # recorded: load_checkpoint gets the dir
    # recorded: from a Checkpoint or a path the counts start from 0 (no metrics to resume from)
    for what in (s.checkpoint, s.checkpoint.path, pathlib.Path(s.checkpoint.path)):  # (Path: Ray asserts)
        h = Files()
        h.train(), h.train()
        h.restore(what)
        assert (h.v, h.iteration) == (6, 0)
    a = Adder(config={"lr": 0.1})
    a.train(), a.train()
    b = Adder(config={"lr": 0.5})
    b.restore(a.save())
    assert (b.loaded, b.iteration) == ({"x": 0.2}, 2)  # recorded: load_checkpoint gets the dict
    r3 = b.train()
    assert (r3["training_iteration"], r3["iterations_since_restore"], r3["x"]) == (3, 1, 0.7)  # recorded


def test_restore_resumes_the_totals_from_the_saved_metrics() -> None:
    o = Own({"c": 1})
    o.train(), o.train()
    saved = o.save()
    p = Own({"c": 2})
    p.restore(saved)
    r = p.train()
    # recorded from Ray 2.60
    assert {k: r[k] for k in ("training_iteration", "time_total_s", "time_since_restore", "iterations_since_restore",
                              "timesteps_total", "timesteps_since_restore", "episodes_total", "config")} == {
        "training_iteration": 42, "time_total_s": 7.5, "time_since_restore": 2.5, "iterations_since_restore": 1,
        "timesteps_total": 30, "timesteps_since_restore": 10, "episodes_total": 6, "config": {"c": 2}}
    assert (p.iteration, p.k) == (43, 3)  # recorded: the count resumes from the saved result's own (42)
    q = Own({})
    q.restore(saved.checkpoint)
    r = q.train()
    assert q.iteration == 1  # recorded
    assert {k: r[k] for k in ("time_total_s", "timesteps_total", "episodes_total", "timesteps_since_restore")} == {
        "time_total_s": 2.5, "timesteps_total": 10, "episodes_total": 2, "timesteps_since_restore": 10}  # recorded


def test_save_and_restore_refuse_what_ray_refuses(tmp_path: pathlib.Path) -> None:
    class Other(Trainable):
        def step(self) -> dict[str, Any]:
            return {}

        def save_checkpoint(self, checkpoint_dir: str) -> str:
            return os.path.join(checkpoint_dir, "sub")

    class Same(Other):
        def save_checkpoint(self, checkpoint_dir: str) -> Any:
            return checkpoint_dir if self.config.get("same") else 5

    with pytest.raises(ValueError, match="returned"):  # recorded: ValueError, another path returned
        Other().save()
    assert Same({"same": True}).save().metrics == {} and Same().save().metrics == {}  # recorded: accepted
    with pytest.raises(NotImplementedError, match="save_checkpoint"):  # recorded: the base save_checkpoint
        Trainable().save()
    os.makedirs(tmp_path / "empty")
    with pytest.raises(NotImplementedError, match="load_checkpoint"):  # recorded: the base load_checkpoint
        Trainable().restore(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="does not exist"):  # recorded: ValueError
        Files().restore(str(tmp_path / "nope"))
    with pytest.raises(AssertionError):  # recorded: AssertionError (audition's: also a TypeError)
        Files().restore({"v": 1})  # type: ignore[arg-type]


# ------------------------------------------------------------------ reset(), stop() and the rest
def test_reset_takes_the_config_and_starts_afresh_only_if_reset_config_says_true() -> None:
    class R(Trainable):
        def step(self) -> dict[str, Any]:
            return {"time_this_iter_s": 1.0}

        def reset_config(self, new_config: dict[str, Any]) -> bool:
            return bool(new_config.get("ok", False))

    x = R({})
    x.train(), x.train()
    before = x.logdir
    # recorded from Ray 2.60: (False, 2, 2.0, {'ok': False}) then (True, 0, 0.0, last result kept, 1.0)
    assert (x.reset({"ok": False}), x.iteration, x.get_state()["time_total"], x.config) == (False, 2, 2.0,
                                                                                            {"ok": False})
    assert (x.reset({"ok": True}), x.iteration, x.get_state()["time_total"]) == (True, 0, 0.0)
    assert x.get_state()["last_result"] is not None and x.train()["time_total_s"] == 1.0
    assert x.logdir != before  # recorded: a new log directory
    assert Trainable({"q": 1}).reset({"a": 2}) is False  # recorded: the base reset_config


def test_stop_calls_cleanup_each_time() -> None:
    t = Adder(config={"lr": 1.0})
    t.train()
    t.stop()
    t.stop()
    assert t.events == ["setup", "log_result 1", "cleanup", "cleanup"]  # recorded
    assert t.train()["training_iteration"] == 2  # recorded: still trains

    class CleanupRaises(Trainable):
        def cleanup(self) -> None:
            raise RuntimeError("cleanup boom")

    with pytest.raises(RuntimeError, match="cleanup boom"):  # recorded
        CleanupRaises().stop()


def test_logdir_and_the_small_methods(tmp_path: pathlib.Path) -> None:
    t = Adder(config={"lr": 1.0})
    # recorded: a new directory under ~/ray_results named <%Y-%m-%d_%H-%M-%S><random> (audition's home)
    assert os.path.isdir(t.logdir) and os.path.dirname(t.logdir) == str(tmp_path / "home" / "audition_results")
    assert t.logdir == t.logdir
    # recorded: False, None, "", {} (export_model with a format name or a list)
    assert (t.is_actor(), Adder.default_resource_request({}), Adder.resource_help({})) == (False, None, "")
    assert t.export_model("foo") == {} and t.export_model(["a", "b"], str(tmp_path)) == {}

    class Exports(Adder):
        def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
            return {f: export_dir for f in export_formats}

    e = Exports(config={"lr": 1.0})
    assert e.export_model("onnx") == {"onnx": e.logdir} and e.export_model(["a"], "/x") == {"a": "/x"}


def test_what_audition_cannot_honour_is_refused() -> None:
    with pytest.raises(ValueError, match="log_sys_usage"):  # Ray adds a 'perf' key; audition does not
        Adder(config={"lr": 1.0, "log_sys_usage": True}).train()



# ------------------------------------------------------------------ the same class under fit()
class InFit(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.n_setup = getattr(self, "n_setup", 0) + 1
        self.logged: list[int] = []

    def step(self) -> dict[str, Any]:
        return {"n_setup": self.n_setup, "logged": list(self.logged), "actor": self.is_actor(),
                "done": self.iteration + 1 >= 3}

    def log_result(self, result: dict[str, Any]) -> None:
        self.logged.append(result["training_iteration"])

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {}


def test_under_fit_setup_runs_once_and_log_result_sees_every_result(tmp_path: pathlib.Path) -> None:
    (r,) = Tuner(InFit, run_config=RunConfig(storage=str(tmp_path), name="fit", verbose=0, system="simple")).fit()
    # recorded from Ray 2.60 (ray.init(num_cpus=2), Tuner(InFit).fit()): the last result's
    assert {k: r.metrics[k] for k in ("n_setup", "logged", "actor", "training_iteration")} == {
        "n_setup": 1, "logged": [1, 2], "actor": True, "training_iteration": 3}
