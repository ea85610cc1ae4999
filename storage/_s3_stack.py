"""Which S3 stack storage/ can use, checked before the first S3 call instead of failing inside it.

pip can resolve ``s3fs`` to a release from before its aiobotocore rewrite (0.4.2 on 2026-12-03, when an
unbounded boto3 beside it was newer than any aiobotocore supported). Such an s3fs imports fine and then
raises ``NotImplementedError`` deep in fsspec on the first listing. This module names the installed
versions and the fix instead.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable

# The oldest s3fs the test suite runs against (setup.py's floor; tests/test_s3_stack.py keeps them equal).
S3FS_FLOOR = "2025.3.2"
_STACK = ("s3fs", "aiobotocore", "botocore", "boto3", "fsspec")


def _installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string ("2025.3.0.post1" -> (2025, 3, 0))."""
    nums: list[int] = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        nums.append(int(m.group()))
        if m.end() != len(part):
            break
    return tuple(nums)


def installed_stack(version_of: Callable[[str], str | None] = _installed_version) -> dict[str, str | None]:
    """The installed version of every package in the S3 stack (None where it is missing)."""
    return {dist: version_of(dist) for dist in _STACK}


def s3_stack_problem(version_of: Callable[[str], str | None] = _installed_version,
                     is_async: Callable[[], bool] | None = None) -> str | None:
    """None if the installed s3fs can serve storage/; otherwise what is wrong, the versions and the fix."""
    versions = installed_stack(version_of)
    s3fs_version = versions["s3fs"]
    named = ", ".join(f"{dist} {versions[dist] or 'not installed'}" for dist in _STACK)
    fix = (f"reinstall with: pip install 'audition[s3]' (s3fs >= {S3FS_FLOOR}; do not pin boto3 or botocore "
           "beside it: s3fs pins aiobotocore, which pins botocore)")
    if s3fs_version is None:
        return f"s3fs is not installed (installed: {named}); {fix}"
    if _release(s3fs_version) < _release(S3FS_FLOOR):
        return (f"s3fs {s3fs_version} is older than {S3FS_FLOOR}, the oldest audition supports "
                f"(installed: {named}); {fix}")
    if versions["aiobotocore"] is None:
        return f"s3fs {s3fs_version} is installed without aiobotocore (installed: {named}); {fix}"
    if not (is_async or _s3fs_is_async)():
        return f"s3fs {s3fs_version} has no async API (installed: {named}); {fix}"
    return None


def _s3fs_is_async() -> bool:
    try:
        import s3fs
        from fsspec.asyn import AsyncFileSystem
    except ImportError:
        return False
    return issubclass(s3fs.S3FileSystem, AsyncFileSystem)


__all__ = ["S3FS_FLOOR", "installed_stack", "s3_stack_problem"]
