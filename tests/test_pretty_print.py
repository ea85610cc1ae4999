"""``actors.pretty_print``: Ray Tune 2.60's ``ray.tune.logger.pretty_print`` (recorded below from Ray)."""

from __future__ import annotations

import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("yaml")

from actors import pretty_print  # noqa: E402

RAY = [  # Ray 2.60: pretty_print(RESULT), pretty_print(RESULT, exclude={"skipme", "loss"}), pretty_print({})
    "".join([
        "acc: 0.25\n",
        "arr:\n",
        "- 0\n",
        "- 1\n",
        "- 2\n",
        "date: '2026-12-05'\n",
        "f32: 1.5\n",
        "flag: true\n",
        "long: [1, 2, 3, 4]\n",
        "loss: 0.5\n",
        "n: 3\n",
        "nan: .nan\n",
        "nested:\n",
        "  a:\n",
        "    b: [5, 6, 7, 8]\n",
        "    c: x\n",
        "obj: Thing()\n",
        "short:\n",
        "- 1\n",
        "- 2\n",
        "skipme: 1\n",
        "t:\n",
        "- 1\n",
        "- 2\n",
        "- 3\n",
    ]),
    "".join([
        "acc: 0.25\n",
        "arr:\n",
        "- 0\n",
        "- 1\n",
        "- 2\n",
        "date: '2026-12-05'\n",
        "f32: 1.5\n",
        "flag: true\n",
        "long: [1, 2, 3, 4]\n",
        "n: 3\n",
        "nan: .nan\n",
        "nested:\n",
        "  a:\n",
        "    b: [5, 6, 7, 8]\n",
        "    c: x\n",
        "obj: Thing()\n",
        "short:\n",
        "- 1\n",
        "- 2\n",
        "t:\n",
        "- 1\n",
        "- 2\n",
        "- 3\n",
    ]),
    "".join([
        "{}\n",
    ]),
]


class Thing:
    def __repr__(self) -> str:
        return "Thing()"


def _result() -> dict[str, object]:
    return {"loss": 0.5, "acc": np.float64(0.25), "n": np.int64(3), "f32": np.float32(1.5), "nan": float("nan"),
            "arr": np.arange(3), "short": [1, 2], "long": [1, 2, 3, 4], "nested": {"a": {"b": [5, 6, 7, 8], "c": "x"}},
            "config": {"lr": 1}, "hist_stats": {"h": 1}, "none": None, "flag": np.bool_(True), "t": (1, 2, 3),
            "obj": Thing(), "skipme": 1, "date": "2026-12-05"}


def test_pretty_print_writes_what_ray_writes() -> None:
    r = _result()
    assert [pretty_print(r), pretty_print(r, exclude={"skipme", "loss"}), pretty_print({})] == RAY
    assert "config" in r and "hist_stats" in r  # the caller's dict is left alone


def test_pretty_print_without_pyyaml_names_the_fix() -> None:
    code = ("import sys; sys.modules['yaml'] = None\n"
            "from actors import pretty_print\n"
            "pretty_print({'a': 1})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "ImportError: pretty_print needs PyYAML: pip install pyyaml" in out.stderr
