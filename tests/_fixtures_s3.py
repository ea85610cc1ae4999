"""pytest plugin: S3 fixtures on a real moto server (listed in conftest.py's ``pytest_plugins``).

Tests that use them are skipped only when s3fs itself is not installed, and never when
``AUDITION_REQUIRE_S3=1`` (set by ``.ci/run``). An installed but unusable S3 stack (an s3fs too old, or
one without its async API) fails them at once with the installed versions named.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from storage._s3_stack import s3_stack_problem
from tests._s3 import MotoServer, start_moto_server
from tests._tcp_proxy import TcpProxy


def _require_s3() -> None:
    if os.environ.get("AUDITION_REQUIRE_S3") != "1":
        pytest.importorskip("s3fs", reason="s3fs is not installed (pip install 'audition[s3]')")
        pytest.importorskip("moto.server", reason="moto[server] is not installed")
    problem = s3_stack_problem()
    if problem is not None:
        pytest.fail(f"the S3 test stack is unusable: {problem}", pytrace=False)


def _clear_s3fs_cache() -> None:
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto S3 server for the whole session (no auth: any key/secret is accepted)."""
    _require_s3()
    server = start_moto_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_auth_server() -> Iterator[MotoServer]:
    """A second server that checks credentials; only single-object calls work there (moto quirk)."""
    _require_s3()
    server = start_moto_server(auth=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_location(moto_server: MotoServer) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``s3://fresh-bucket/results``, storage options) for one test."""
    _clear_s3fs_cache()
    yield moto_server.new_location()
    _clear_s3fs_cache()


@pytest.fixture
def s3_proxy(moto_server: MotoServer) -> Iterator[TcpProxy]:
    """A fault-injecting TCP proxy in front of the session's moto server."""
    host, port = moto_server.endpoint.rsplit("//", 1)[1].split(":")
    proxy = TcpProxy(host, int(port)).start()
    try:
        yield proxy
    finally:
        proxy.stop()
        _clear_s3fs_cache()


_S3_FIXTURES = frozenset({"moto_server", "moto_auth_server", "s3_location", "s3_proxy"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the S3 server is marked ``s3``, so ``-m s3`` (CI's floors run) selects them all."""
    for item in items:
        if _S3_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.s3)
