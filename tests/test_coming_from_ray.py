"""``docs/coming-from-ray.md`` has a row for every Ray Tune public name, and what it promises imports."""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATUSES = ("same", "renamed", "differs", "not supported")
ROW = re.compile(r"^\| `(ray\.[\w.]+)` \|\s*([a-z ]+?)\s*\|([^|]*)\|([^|]*)\|$")


def _names() -> list[str]:
    with open(os.path.join(ROOT, "tests", "data", "ray_tune_public_names.txt"), encoding="utf-8") as f:
        return [x.strip() for x in f if x.strip() and not x.startswith("#")]


def _rows() -> dict[str, tuple[str, str, str]]:
    with open(os.path.join(ROOT, "docs", "coming-from-ray.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Every Ray Tune public name"):]
    section = section[:section.index("\n## ", 1)]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"two rows for {m.group(1)}"
            rows[m.group(1)] = (m.group(2), m.group(3).strip(), m.group(4).strip())
    return rows


def test_the_table_covers_every_ray_tune_public_name_with_a_known_status() -> None:
    names, rows = _names(), _rows()
    assert len(names) > 100  # the committed list, not an empty file
    missing = [n for n in names if n not in rows]
    assert not missing, f"docs/coming-from-ray.md has no row for {missing}"
    bad = {n: r[0] for n, r in rows.items() if r[0] not in STATUSES}
    assert not bad, f"unknown status (use one of {STATUSES}): {bad}"
    unexplained = [n for n, r in rows.items() if r[0] in ("differs", "not supported") and not r[2]]
    assert not unexplained, f"say how it differs or why it is not supported: {unexplained}"


@pytest.mark.parametrize("name", [n for n, r in _rows().items() if r[0] != "not supported"])
def test_what_the_table_promises_imports_from_where_it_says(name: str) -> None:
    status, where, _ = _rows()[name]
    target = re.match(r"`(actors(?:\.\w+)*)\.(\w+)`", where)
    assert target, f"{name} is {status!r}: the audition column must name it, e.g. `actors.X`"
    module, attr = target.groups()
    assert hasattr(importlib.import_module(module), attr), f"{name}: {module}.{attr} does not exist"
    if status == "same":  # the same name, under the module `audition migrate` maps Ray's to
        assert attr == name.rpartition(".")[2], f"{name} is 'same' but the row names {attr}: use 'renamed'"


def test_import_actors_as_tune_reaches_the_submodules_as_ray_tune_does() -> None:
    """Recorded from Ray 2.60: after ``from ray import tune``, ``tune.search``, ``tune.schedulers``,
    ``tune.stopper`` and ``tune.result`` are attributes (Ray's guides write
    ``tune.search.BasicVariantGenerator()``). A fresh process, since an import elsewhere would set them."""
    import subprocess
    import sys

    code = ("import actors as tune\n"
            "print(tune.search.BasicVariantGenerator.__name__, tune.schedulers.ASHAScheduler.__name__,\n"
            "      tune.stopper.MaximumIterationStopper.__name__, tune.result.DONE)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ROOT}, check=False)
    # (Ray's ASHAScheduler is its AsyncHyperBandScheduler under another name, and prints as that)
    assert out.stdout.split() == ["BasicVariantGenerator", "AsyncHyperBandScheduler", "MaximumIterationStopper",
                                  "done"], \
        out.stderr


def test_with_resources_takes_rays_per_trial_resources_function(tmp_path: Any) -> None:
    """Ray 2.60 takes ``resources=lambda config: {"CPU": config["n"]}`` and gives each trial its own
    (recorded: ``[{'CPU': 1.0}, {'CPU': 2.0}]`` for ``n`` in ``[1, 2]``): so does audition."""
    from actors import RunConfig, Tuner, get_context, report, with_resources
    from actors.search import grid_search

    def train(config: dict[str, Any]) -> None:
        report({"bundles": get_context().get_trial_resources().bundles})

    grid = Tuner(with_resources(train, lambda config: {"CPU": config["n"]}), param_space={"n": grid_search([1, 2])},
                 run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    assert [r.metrics["bundles"] for r in grid] == [[{"CPU": 1.0}], [{"CPU": 2.0}]]
