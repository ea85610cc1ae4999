"""``actors.utils``: Ray Tune's ``ray.tune.utils`` helpers; ``RAY`` was recorded from Ray 2.60 running the same
calls (``tests/data/ray_tune_utils.json``; each: ``["ok", value]`` or ``[exception type, message]``)."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import pytest

from actors import Trainable
from actors.utils import (
    deep_update,
    flatten_dict,
    merge_dicts,
    unflattened_lookup,
    validate_save_restore,
    warn_if_slow,
)

RAY = json.load(open(os.path.join(os.path.dirname(__file__), "data", "ray_tune_utils.json"), encoding="utf-8"))


def attempt(fn: Any) -> list[Any]:
    try:
        return json.loads(json.dumps(["ok", fn()], default=str))
    except BaseException as e:
        return [type(e).__name__, str(e)]


def _calls() -> dict[str, list[Any]]:
    D = {"e": 3, "a": {"b": 1, "c": [1, {"d": 2}], "x": {"y": {"z": 0}}}, "f": [], "g": {}}
    out = {
        "f1": attempt(lambda: flatten_dict(D)),
        "f2": attempt(lambda: flatten_dict(D, flatten_list=True)),
        "f3": attempt(lambda: flatten_dict(D, delimiter=".")),
        "f4": attempt(lambda: flatten_dict({"a/b": 1}, prevent_delimiter=True)),
        "f5": attempt(lambda: flatten_dict({"a": {"b/c": 1}}, prevent_delimiter=True)),
        "f6": attempt(lambda: [D == {"e": 3, "a": {"b": 1, "c": [1, {"d": 2}], "x": {"y": {"z": 0}}}, "f": [],
                                     "g": {}}]),
        "u1": attempt(lambda: unflattened_lookup("a/c/1/d", D)),
        "u2": attempt(lambda: unflattened_lookup("a/q", D)),
        "u3": attempt(lambda: unflattened_lookup("a/q", D, default=7)),
        "u4": attempt(lambda: unflattened_lookup("a/b", {"a/b": 5, "a": {"b": 6}})),
        "u5": attempt(lambda: unflattened_lookup("a/b/c", {"a": {"b": 1}})),
        "m1": attempt(lambda: merge_dicts({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 5, "n": 1}, "z": 0})),
        "d1": attempt(lambda: deep_update({"a": 1}, {"b": 2})),
        "d2": attempt(lambda: deep_update({"a": {"x": 1}}, {"a": {"y": 2}})),
        "d3": attempt(lambda: deep_update({"a": {"x": 1}}, {"a": {"y": 2}}, allow_new_subkey_list=["a"])),
        "d4": attempt(lambda: deep_update({"m": {"type": "A", "p": 1}}, {"m": {"type": "B", "q": 2}},
                                          override_all_if_type_changes=["m"])),
        "d5": attempt(lambda: deep_update({"m": {"p": 1, "r": 3}}, {"m": {"p": 2}}, override_all_key_list=["m"])),
        "d6": attempt(lambda: deep_update({"m": {"p": {"k": 1}}}, {"m": {"p": {"j": 2}}}, new_keys_allowed=False,
                                          allow_new_subkey_list=["m"])),
    }
    return out


class Good(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"i": self.i}

    def save_checkpoint(self, d: str) -> None:
        with open(os.path.join(d, "i"), "w") as f:
            f.write(str(self.i))

    def load_checkpoint(self, d: str) -> None:  # type: ignore[override]
        with open(os.path.join(d, "i")) as f:
            self.i = int(f.read())


class Bad(Good):
    def load_checkpoint(self, d: str) -> None:  # type: ignore[override]
        pass


def test_the_helpers_give_what_rays_give() -> None:
    out = _calls()
    out["v1"] = attempt(lambda: validate_save_restore(Good))
    out["v2"] = attempt(lambda: validate_save_restore(Bad, config={"a": 1}))  # Ray's passes it too
    assert out == RAY


class NoIteration(Good):
    def step(self) -> dict[str, Any]:
        raise ValueError("no step")


def test_validate_save_restore_names_a_failure() -> None:
    with pytest.raises(ValueError, match="no step"):
        validate_save_restore(NoIteration)


def test_warn_if_slow_warns_after_the_first_minute(caplog: pytest.LogCaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import actors.utils as u

    with warn_if_slow("quick", threshold=10.0) as w:
        pass
    assert not w.too_slow
    monkeypatch.setattr(u, "_IMPORTED", 0.0)  # imported at 0 on the clock below: long ago
    times = iter([100.0, 101.5])
    monkeypatch.setattr(u, "_clock", lambda: next(times))
    with caplog.at_level(logging.WARNING, logger="audition"), warn_if_slow("slow op") as w:
        pass
    assert w.too_slow and "The `slow op` operation took 1.500 s, which may be a performance bottleneck." in caplog.text
