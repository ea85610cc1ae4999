"""The S3 stack resolves to something storage/ can use, and an unusable one is named, not mysterious."""

from __future__ import annotations

import ast
import os

import pytest

from storage import StorageContext, StorageError
from storage._s3_stack import S3FS_FLOOR, installed_stack, s3_stack_problem

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _setup_list(name: str) -> list[str]:
    tree = ast.parse(open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"setup.py has no {name} list")


def test_the_installed_s3_stack_is_usable() -> None:
    """Fails loudly, with every version named, when pip resolved an s3fs storage/ cannot use."""
    if os.environ.get("AUDITION_REQUIRE_S3") != "1":
        pytest.importorskip("s3fs")
    problem = s3_stack_problem()
    assert problem is None, f"the installed S3 stack is unusable: {problem}"


def test_setup_floor_is_the_floor_storage_checks() -> None:
    s3 = _setup_list("S3")
    s3fs_req = next(r for r in s3 if r.startswith("s3fs"))
    assert f">={S3FS_FLOOR}" in s3fs_req and "<" in s3fs_req, s3fs_req
    # never an unbounded boto3 beside s3fs: storage/ does not use it, and s3fs pins botocore through aiobotocore
    assert not any(r.startswith("boto3") for r in s3), s3


def test_every_dependency_is_bounded_both_ways() -> None:
    for name in ("CORE", "TEST", "S3", "S3_TEST", "PLOT", "OPTUNA", "HYPEROPT", "BAYESOPT", "PB2", "PANDAS",
                 "TENSORBOARD", "DOCS", "DASHBOARD", "TEST_CLIENT", "BROWSER_TEST", "XGBOOST", "LIGHTGBM", "GBDT_TEST",
                 "ZOOPT", "NEVERGRAD", "NEVERGRAD_TEST", "MLFLOW", "MLFLOW_TEST", "WANDB", "WANDB_TEST", "COMET",
                 "COMET_TEST"):
        for req in _setup_list(name):
            assert "==" in req or (">=" in req and "<" in req), f"{name}: {req} needs a floor and a ceiling"


def test_the_floors_stage_pins_lie_inside_setups_bounds() -> None:
    """.ci/floors.txt pins the S3 stack the floors stage installs; a pin outside setup.py's bounds would make
    pip fail there, or (a bound it cannot meet) search every older release first."""
    from packaging.requirements import Requirement

    pins = {}
    for line in open(os.path.join(ROOT, ".ci", "floors.txt"), encoding="utf-8"):
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    bounds = {Requirement(r).name.lower(): Requirement(r).specifier
              for r in (*_setup_list("CORE"), *_setup_list("S3"), *_setup_list("S3_TEST"))}
    for name in ("s3fs", "fsspec", "thespian", "cloudpickle", "aiobotocore", "boto3"):
        assert name in pins, f".ci/floors.txt pins no {name}"
        assert pins[name] in bounds[name], f".ci/floors.txt: {name}=={pins[name]} is outside setup.py's {bounds[name]}"
    # boto3 X pins botocore >= X: the floors' botocore is their boto3's, or pip searches boto3 releases again
    assert pins["botocore"] == pins["boto3"], pins


def _versions(**over: str | None):
    base: dict[str, str | None] = {"s3fs": "2026.9.0", "aiobotocore": "3.10.0", "botocore": "1.43.117",
                                   "boto3": "1.43.117", "fsspec": "2026.9.0"}
    base.update(over)
    return base.get


@pytest.mark.parametrize("over, needle", [
    ({"s3fs": "0.4.2", "aiobotocore": None}, "s3fs 0.4.2 is older than"),
    ({"s3fs": None}, "s3fs is not installed"),
    ({"aiobotocore": None}, "without aiobotocore"),
])
def test_an_unusable_stack_is_named_with_versions_and_the_fix(over: dict[str, str | None], needle: str) -> None:
    problem = s3_stack_problem(_versions(**over), is_async=lambda: True)
    assert problem is not None and needle in problem
    assert "botocore 1.43.117" in problem and "pip install 'audition[s3]'" in problem


def test_an_s3fs_without_async_api_is_refused() -> None:
    problem = s3_stack_problem(_versions(), is_async=lambda: False)
    assert problem is not None and "no async API" in problem


def test_a_good_stack_passes_and_versions_parse() -> None:
    assert s3_stack_problem(_versions(s3fs=S3FS_FLOOR), is_async=lambda: True) is None
    assert s3_stack_problem(_versions(s3fs="2025.2.0"), is_async=lambda: True) is not None
    assert s3_stack_problem(_versions(s3fs="2025.10.0"), is_async=lambda: True) is None
    assert set(installed_stack()) == {"s3fs", "aiobotocore", "botocore", "boto3", "fsspec"}


def test_storage_refuses_s3_urls_on_an_unusable_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("s3fs")
    import storage._context as ctx

    monkeypatch.setattr(ctx, "s3_stack_problem", lambda: "s3fs 0.4.2 is older than 2025.3.0 (installed: ...)")
    with pytest.raises(StorageError, match=r"s3://bucket/x cannot be used: s3fs 0\.4\.2 is older"):
        StorageContext("s3://bucket/x")
