"""Shared by the dashboard's tests: a small real experiment written by ``fit()``, a headless Chromium
(the OS's, driven by Playwright), and a dashboard served from a thread that is always stopped.

Chromium comes from the OS package manager (``apt-get install chromium`` on Debian; ``.ci/run`` does
it): Playwright's own browser downloads are not used. Without it the browser tests skip locally and
fail in CI (``CI`` set), so they never go missing silently there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from tests._trainables import PauseOnce

STEPS = 6
PAUSE_AT = 3
FAIL_AT = 4
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def train(config: dict[str, Any]) -> None:
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, STEPS):
        print(f"step {step} lr={config['lr']}")
        if config.get("fail") and step + 1 == FAIL_AT:
            raise ValueError(f"diverged at step {step}")
        report({"loss": (config["lr"] - 0.1) ** 2 + 1 / (step + 1), "acc": step * config["lr"]},
               checkpoint=Checkpoint.from_dict({"step": step}))


def fit_experiment(storage: str, name: str = "demo") -> str:
    """Four trials on ``system="simple"``, each paused once at iteration ``PAUSE_AT`` and resumed."""
    from actors.search import grid_search

    grid = Tuner(train, param_space={"lr": grid_search([0.01, 0.05, 0.1, 0.3]), "opt": "sgd"},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=PauseOnce(at=PAUSE_AT),
                                        max_concurrent_trials=2),
                 run_config=RunConfig(name=name, storage=storage, system="simple", verbose=0)).fit()
    return str(grid.experiment_path)


def fit_with_error(storage: str, name: str = "witherror") -> str:
    """Two trials, one ending in ERROR at iteration ``FAIL_AT`` (error.txt and a traceback in storage)."""
    from actors import FailureConfig
    from actors.search import grid_search

    grid = Tuner(train, param_space={"lr": 0.1, "fail": grid_search([False, True])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name=name, storage=storage, system="simple", verbose=0,
                                      failure_config=FailureConfig(max_failures=0))).fit()
    return str(grid.experiment_path)


# ---------------------------------------------------------------------------------- the browser
def chromium_or_skip() -> str:
    path = os.environ.get("AUDITION_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    problem = None
    if path is None:
        problem = "Chromium is not installed (Debian: apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "playwright is not installed (pip install -e '.[test]')"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"the dashboard's browser tests need a browser in CI: {problem}")
        pytest.skip(problem)
    return str(path)


@contextmanager
def chromium_page(width: int = 1280, height: int = 820) -> Iterator[Any]:
    """A page in a fresh headless Chromium profile; the browser is closed however the test ends."""
    from playwright.sync_api import sync_playwright

    executable = chromium_or_skip()
    profile = tempfile.mkdtemp(prefix="audition-chromium-")
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(profile, executable_path=executable, headless=True,
                                                       args=CHROMIUM_FLAGS,
                                                       viewport={"width": width, "height": height})
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                page.set_default_timeout(15_000)
                yield page
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(page: Any, name: str, fallback_dir: str) -> str:
    """Save a PNG of the page: under ``$AUDITION_SCREENSHOTS`` (docs/images when the docs are refreshed),
    else in the test's own directory."""
    where = os.environ.get("AUDITION_SCREENSHOTS") or fallback_dir
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, f"{name}.png")
    page.screenshot(path=path)
    return path


def gated(config: dict[str, Any]) -> None:
    """Reports ``before`` results, waits until the file ``config["gate"]`` exists, then reports the rest:
    a test sees the run mid-way for as long as it needs, without timing guesses."""
    import time

    for step in range(config["steps"]):
        if step == config["before"]:
            deadline = time.monotonic() + 150  # (the test opens the gate, also when it fails: a guard only)
            while not os.path.exists(config["gate"]) and time.monotonic() < deadline:
                time.sleep(0.05)
        report({"loss": 1.0 / (step + 1) + config["lr"]})
