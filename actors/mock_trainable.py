"""A toy class trainable for examples and smoke tests, at Ray Tune's ``ray.tune.utils.mock_trainable`` path role.

Ray's own example scripts (``hyperband_example.py`` and others) train
``MyTrainableClass``; ``audition migrate`` maps that import here so they run
unchanged.  Its curve is deterministic: ``episode_reward_mean`` rises as
``height * tanh(timestep / width)``, so ``width`` sets how fast a trial learns
and ``height`` where it levels off; a scheduler that keeps the fast, high
trials is visibly doing its job.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from actors._driver.trainable import Trainable

MOCK_ERROR_KEY = "mock_error"


class MyTrainableClass(Trainable):
    """Reports ``episode_reward_mean = height * tanh(timestep / width)`` each step (defaults 1 and 1).

    Config keys: ``width``, ``height``; ``sleep`` seconds of simulated work per step;
    ``mock_error`` makes steps after the first fail (until restored from a checkpoint,
    or always with ``persistent_error``), for exercising retries.
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.timestep = 0
        self.restored = False

    def step(self) -> dict[str, Any]:
        failing = self.config.get(MOCK_ERROR_KEY, False) and self.timestep > 0
        if failing and (self.config.get("persistent_error", False) or not self.restored):
            raise RuntimeError(f"MyTrainableClass fails on purpose (mock_error) at timestep {self.timestep}")
        if self.config.get("sleep", 0) > 0:
            time.sleep(self.config["sleep"])  # simulated work
        self.timestep += 1
        reward = math.tanh(self.timestep / self.config.get("width", 1)) * self.config.get("height", 1)
        return {"episode_reward_mean": reward}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "checkpoint"), "w") as f:
            json.dump({"timestep": self.timestep}, f)

    def load_checkpoint(self, checkpoint: str | dict[str, Any]) -> None:
        assert isinstance(checkpoint, str)
        with open(os.path.join(checkpoint, "checkpoint")) as f:
            self.timestep = json.load(f)["timestep"]
        self.restored = True


__all__ = ["MOCK_ERROR_KEY", "MyTrainableClass"]
