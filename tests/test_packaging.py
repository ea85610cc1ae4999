"""What ``pip install .`` (not only ``-e``) ships: every package of the source tree, its data files."""

from __future__ import annotations

import os
import runpy
from typing import Any

import pytest
import setuptools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_kwargs(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    got: dict[str, Any] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: got.update(kw))
    monkeypatch.chdir(ROOT)  # (setup.py reads README.md and finds packages from its own directory)
    runpy.run_path(os.path.join(ROOT, "setup.py"), run_name="__main__")
    return got


def test_every_package_of_the_tree_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    # a hand-kept list once left actors.testing (a public import path) out of non-editable installs
    packages = set(_setup_kwargs(monkeypatch)["packages"])
    tree = {os.path.relpath(d, ROOT).replace(os.sep, ".")
            for top in ("actors", "storage") for d, _, files in os.walk(os.path.join(ROOT, top))
            if "__init__.py" in files}
    assert {"actors", "actors.testing", "actors.schedulers", "actors.search", "storage"} <= tree
    assert packages == tree


def test_the_dashboards_static_files_are_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _setup_kwargs(monkeypatch)["package_data"]
    static = os.path.join(ROOT, "actors", "_dashboard", "static")
    assert data == {"actors._dashboard": ["static/*"]} and os.listdir(static)
