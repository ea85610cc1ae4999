"""``Tuner.restore(path, trainable)`` refuses another trainable, as Ray 2.60 does, whatever started it.

Recorded from Ray 2.60 (``/work/rayvenv``: five experiments, started with a function ``train_a``, a
``Trainable`` class ``MyT``, a lambda, ``with_parameters(train_a, x=1)`` and
``with_resources(train_a, {"cpu": 1})``; then ``Tuner.restore(path, trainable=...)`` with each of
the trainables below). Ray compares ``Experiment.get_trainable_name``: a function's or class's
``__name__``, ``"lambda"`` for every lambda, a wrapper's function's name, a string as it is. A
mismatch raises ``ValueError("Invalid `trainable` input to `Tuner.restore()`. To fix this error,
pass in the same trainable that was used to initialize the Tuner. Got a trainable with identifier
'train_b' but expected 'train_a'.")``; a match restores.
"""

from __future__ import annotations

from typing import Any

import pytest

import actors as tune
from actors import RunConfig, Trainable, Tuner


def train_a(config: dict[str, Any], x: int = 0) -> None:
    tune.report({"score": 1})


def train_b(config: dict[str, Any]) -> None:
    tune.report({"score": 1})


class MyT(Trainable):
    def step(self) -> dict[str, Any]:
        return {"score": 1, "done": True}


class OtherT(Trainable):
    def step(self) -> dict[str, Any]:
        return {"score": 1, "done": True}


def _lam() -> Any:
    return lambda config: tune.report({"score": 2})


STARTS: dict[str, Any] = {
    "func": train_a, "class": MyT, "lambda": lambda config: tune.report({"score": 1}),
    "with_parameters": tune.with_parameters(train_a, x=1), "with_resources": tune.with_resources(train_a, {"cpu": 1}),
}
TRIES: dict[str, Any] = {
    "other_func": train_b, "same_func": train_a, "lambda": _lam(), "class": MyT, "other_class": OtherT,
    "with_parameters(same)": tune.with_parameters(train_a, x=1),
    "with_resources(same)": tune.with_resources(train_a, {"cpu": 1}),
}
# Ray 2.60's identifier of each (Experiment.get_trainable_name), and which restores it accepted
RAY_NAME = {"func": "train_a", "class": "MyT", "lambda": "lambda", "with_parameters": "train_a",
            "with_resources": "train_a", "other_func": "train_b", "same_func": "train_a", "other_class": "OtherT",
            "with_parameters(same)": "train_a", "with_resources(same)": "train_a"}
RAY_ACCEPTS = {
    "func": {"same_func", "with_parameters(same)", "with_resources(same)"},
    "class": {"class"},
    "lambda": {"lambda"},
    "with_parameters": {"same_func", "with_parameters(same)", "with_resources(same)"},
    "with_resources": {"same_func", "with_parameters(same)", "with_resources(same)"},
}


@pytest.mark.parametrize("start", list(STARTS))
def test_restore_checks_the_trainable_as_ray(start: str, storage_dir: str) -> None:
    Tuner(STARTS[start], run_config=RunConfig(storage=storage_dir, name=start, verbose=0, system="simple")).fit()
    path = f"{storage_dir}/{start}"
    for name, trainable in TRIES.items():
        if name in RAY_ACCEPTS[start]:
            Tuner.restore(path, trainable)
            continue
        saved, got = RAY_NAME[start], RAY_NAME[name]
        want = (rf"Invalid `trainable` input to `Tuner.restore\(\)`: the experiment was started with '{saved}', "
                rf"got '{got}'; pass the trainable it was started with")
        with pytest.raises(ValueError, match=want):
            Tuner.restore(path, trainable)
