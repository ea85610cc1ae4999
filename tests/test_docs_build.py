"""The documentation site builds with ``mkdocs build --strict``: no broken link, nav entry or docstring reference."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml  # a dependency of mkdocs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "mkdocs.yml")

for module, package in (("mkdocs", "mkdocs"), ("mkdocstrings", "mkdocstrings[python]"),
                        ("mkdocstrings_handlers.python", "mkdocstrings[python]"), ("material", "mkdocs-material")):
    pytest.importorskip(module, reason=f"{package} is not installed (pip install 'audition[docs]')")


def _nav_files(nav: list[object]) -> list[str]:
    files: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        files += _nav_files(value) if isinstance(value, list) else [str(value)]
    return files


def test_every_nav_page_exists():
    with open(CONFIG, encoding="utf-8") as f:
        config = yaml.load(f, Loader=yaml.SafeLoader)  # no custom tags in our mkdocs.yml
    missing = [p for p in _nav_files(config["nav"]) if not os.path.isfile(os.path.join(ROOT, "docs", p))]
    assert not missing, f"mkdocs.yml's nav names pages that do not exist in docs/: {missing}"


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", CONFIG,
                          "--site-dir", str(site)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=280)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("Tuner", "TuneConfig", "ASHAScheduler", "MaximumIterationStopper", "SchedulerTestKit",
                 "StorageContext", "loguniform"):
        assert name in api, f"{name} is missing from the API reference"
    assert ":class:" not in api  # Sphinx roles are turned into code by docs/hooks/sphinx_roles.py
    assert (site / "coming-from-ray" / "index.html").is_file()
