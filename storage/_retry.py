"""Retry transient storage failures; turn permanent ones into a StorageError that says what to do.

Classification looks at exception class names along the MRO and the ``__cause__`` chain instead of
importing botocore/aiohttp, so it works with or without those packages and sees through s3fs's
translation of S3 error codes into ``OSError`` subclasses.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable, Iterator
from typing import Literal, TypeVar

from storage._errors import StorageError

T = TypeVar("T")
Kind = Literal["transient", "permanent", "missing", "bug"]

_log = logging.getLogger("storage")

# Network-level failures: the request may not have reached the service, or its answer got lost.
_TRANSIENT_NAMES = frozenset(
    {
        # botocore
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "HTTPClientError",
        "ProxyConnectionError",
        "ResponseStreamingError",
        "IncompleteReadError",
        "ResponseParserError",
        # aiohttp
        "ClientConnectionError",
        "ClientOSError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        # fsspec / stdlib
        "FSTimeoutError",
        "IncompleteRead",
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "OperationAborted",
    }
)
_CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken",
     "AllAccessDisabled", "AccountProblem", "InvalidSecurity", "RequestTimeTooSkewed"}
)
_CREDENTIAL_NAMES = frozenset({"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"})
_TRANSIENT_ERRNOS = frozenset(
    {errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EPIPE,
     errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN}
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception followed by its causes (s3fs hides the botocore error there)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def error_code(exc: BaseException) -> str | None:
    """The S3-style error code (``NoSuchBucket``...) or HTTP status found anywhere in the chain."""
    for item in _chain(exc):
        response = getattr(item, "response", None)
        if isinstance(response, dict):
            err = response.get("Error") or {}
            code = err.get("Code")
            if code:
                return str(code)
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if status:
                return str(status)
    return None


def classify(exc: BaseException) -> Kind:
    """transient: try again; permanent: the user must act; missing: a normal 'no such key'; bug: ours."""
    code = error_code(exc)
    if code is not None:
        if code in _TRANSIENT_CODES or (code.isdigit() and int(code) >= 500):
            return "transient"
        if code in ("NoSuchKey", "404") and isinstance(exc, FileNotFoundError):
            return "missing"
        return "permanent"
    for item in _chain(exc):
        names = _names(item)
        if names & _TRANSIENT_NAMES:
            return "transient"
        if names & _CREDENTIAL_NAMES:
            return "permanent"
        if isinstance(item, (ConnectionError, TimeoutError)):
            return "transient"
    if isinstance(exc, FileNotFoundError):
        return "missing"
    if isinstance(exc, OSError):
        return "transient" if exc.errno in _TRANSIENT_ERRNOS else "permanent"
    return "bug"


def _hint(exc: BaseException, exhausted: bool, attempts: int) -> str:
    code = error_code(exc)
    names = set().union(*(_names(item) for item in _chain(exc)))
    if code == "NoSuchBucket":
        return "the bucket does not exist: create it first or fix the bucket name in the URL"
    if code in _CREDENTIAL_CODES or code == "403" or names & _CREDENTIAL_NAMES:
        return ("the credentials were rejected or lack permission: check 'key'/'secret' in the storage "
                "options (or the AWS_* environment variables) and the bucket's access policy")
    if exhausted:
        return (f"gave up after {attempts} attempts: check that the endpoint in the URL/options is "
                "right and reachable, then try again")
    if isinstance(exc, PermissionError):
        return "permission denied: choose a writable location or fix its permissions"
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        return "a file is in the way of a directory: choose another location or remove that file"
    if isinstance(exc, IsADirectoryError):
        return "a directory is in the way of a file: choose another location or remove that directory"
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return "the disk is full: free space or choose another location"
    return "check the storage location and its options"


def _describe(exc: BaseException) -> str:
    code = error_code(exc)
    text = (str(exc) or type(exc).__name__).strip().rstrip(".")
    return f"{type(exc).__name__} {code}: {text}" if code else f"{type(exc).__name__}: {text}"


def as_storage_error(exc: BaseException, *, what: str, url: str, exhausted: bool = False,
                     attempts: int = 1) -> StorageError:
    """Build the user-facing error for a failed storage operation."""
    if isinstance(exc, StorageError):
        return exc
    hint = _hint(exc, exhausted, attempts)
    return StorageError(f"{what} failed at {url} ({_describe(exc)}). {hint[0].upper()}{hint[1:]}", url=url)


def retrying(
    fn: Callable[[], T],
    *,
    what: str,
    url: str,
    attempts: int = 5,
    base_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    logger: logging.Logger | None = None,
) -> T:
    """Call ``fn`` until it succeeds, retrying only failures that may go away by themselves.

    A missing key (``FileNotFoundError`` that is not a missing bucket) is re-raised unchanged because
    callers treat it as an answer; programming errors are re-raised unchanged so they are not hidden.
    Everything else ends as a StorageError naming ``url``, the cause and what to do.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    log = logger or _log
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except StorageError:
            raise
        except Exception as exc:
            kind = classify(exc)
            if kind in ("missing", "bug"):
                raise
            if kind == "permanent":
                raise as_storage_error(exc, what=what, url=url) from exc
            if attempt == attempts:
                raise as_storage_error(exc, what=what, url=url, exhausted=True, attempts=attempts) from exc
            delay = min(max_delay, base_delay * 2 ** (attempt - 1))
            log.info("%s at %s: transient %s, retry %d/%d in %.2fs", what, url, _describe(exc),
                     attempt, attempts - 1, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
