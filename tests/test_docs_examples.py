"""Every ```python block of the user guide and of "Coming from Ray Tune" runs as a script.

Each block is written to a file and run in a fresh interpreter, with its ``/tmp/...`` storage paths moved
under ``tmp_path``.  A block preceded by ``<!-- no-run -->`` is a fragment and is skipped.  Every process the
script starts (actor systems included) carries a marker in its environment, so a leak is found even though
Thespian's admin daemonizes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests._marked import left_behind, marked_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("user-guide.md", "coming-from-ray.md", "testing.md")
NO_RUN = "<!-- no-run -->"
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def _blocks(name: str) -> list[tuple[int, str, bool]]:
    """``(index, code, runnable)`` for every python block of ``docs/<name>``."""
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as f:
        text = f.read()
    out = []
    for i, m in enumerate(_FENCE.finditer(text)):
        before = text[: m.start()].rstrip().splitlines()
        out.append((i, m.group(1), not before or before[-1].strip() != NO_RUN))
    return out


CASES = [pytest.param(name, i, code, runnable, id=f"{name.removesuffix('.md')}-{i}")
         for name in DOCS for i, code, runnable in _blocks(name)]


def test_every_doc_has_runnable_blocks():
    for name in DOCS:
        assert any(runnable for _, _, runnable in _blocks(name)), f"docs/{name} has no runnable python block"


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize(("doc", "index", "code", "runnable"), CASES)
def test_doc_example_runs(doc, index, code, runnable, tmp_path):
    if not runnable:
        pytest.skip(f"marked {NO_RUN} in docs/{doc}")
    storage = tmp_path / "storage"
    storage.mkdir()
    code = code.replace('"/tmp/', f'"{storage}/').replace("'/tmp/", f"'{storage}/")
    assert "/tmp/" not in code.replace(str(tmp_path), ""), "a /tmp path the rewrite missed"
    script = tmp_path / f"doc_example_{index}.py"
    script.write_text(code, encoding="utf-8")
    token, env = marked_env(PYTHONPATH=ROOT)
    env.pop("PYTEST_CURRENT_TEST", None)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(tmp_path),
                         env=env, timeout=120)
    assert res.returncode == 0, (f"docs/{doc} python block #{index} exited {res.returncode}\n"
                                 f"--- stdout ---\n{res.stdout[-2000:]}\n--- stderr ---\n{res.stderr[-6000:]}")
    left = left_behind(token)
    assert not left, f"docs/{doc} python block #{index} left processes running: {left}"
