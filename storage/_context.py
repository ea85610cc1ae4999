"""Where results live: a URL plus fsspec options, turned into a filesystem lazily per process."""

from __future__ import annotations

import importlib.util
import os
import posixpath
import secrets
from typing import Any

import fsspec
from fsspec.registry import known_implementations

from storage._errors import StorageError
from storage._retry import retrying
from storage._s3_stack import s3_stack_problem

DEFAULT_URL = "~/audition_results"
_LOCAL_PROTOCOLS = frozenset({"file", "local"})
_PROCESS_LOCAL_PROTOCOLS = frozenset({"memory"})
# Package extras to suggest when an fsspec backend is not installed.
_EXTRAS = {"s3": "audition[s3]", "s3a": "audition[s3]"}


def _split_url(url: str) -> tuple[str, str]:
    """Return (protocol, rest); a plain path is protocol "file"."""
    if "://" in url:
        protocol, rest = url.split("://", 1)
        return protocol.lower(), rest
    return "file", url


class StorageContext:
    """Root location of all experiments, safe to pickle into other processes.

    Only ``url`` and ``options`` travel; each process builds its own filesystem object on first use,
    because fsspec filesystems hold sockets, event loops and caches that must not cross a fork.
    """

    def __init__(self, url: str | None = None, options: dict[str, Any] | None = None) -> None:
        if url is None:
            url = DEFAULT_URL
        if not isinstance(url, str) or not url.strip():
            raise StorageError(
                f"storage URL must be a non-empty string, got {url!r}: pass a local path or a URL "
                "such as 's3://bucket/prefix'",
                url=str(url),
            )
        if options is not None and not isinstance(options, dict):
            raise StorageError(
                f"storage options for {url} must be a dict of fsspec arguments, got {type(options).__name__}",
                url=url,
            )
        protocol, rest = _split_url(url.strip())
        self.options: dict[str, Any] = dict(options or {})
        self.protocol = protocol
        if protocol in _LOCAL_PROTOCOLS:
            path = os.path.abspath(os.path.expanduser(rest))
            self.url = path
            self.root = path
        else:
            cls = _filesystem_class(protocol, url)
            self.url = url.strip().rstrip("/") if rest.strip("/") else url.strip()
            self.root = cls._strip_protocol(self.url).rstrip("/") or "/"
            if protocol in {"s3", "s3a"} and not self.root.strip("/"):
                raise StorageError(
                    f"storage URL {url} names no bucket: use 's3://BUCKET' or 's3://BUCKET/prefix'", url=url
                )
        self._fs: fsspec.AbstractFileSystem | None = None
        self._fs_pid: int | None = None

    # -- pickling: only the description travels ---------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["options"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"StorageContext({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorageContext) and (self.url, self.options) == (other.url, other.options)

    def __hash__(self) -> int:
        return hash(self.url)

    # -- properties ----------------------------------------------------------------------------
    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The filesystem for this process, created on first use (and again after a fork)."""
        pid = os.getpid()
        if self._fs is None or self._fs_pid != pid:
            try:
                self._fs = fsspec.filesystem(self.protocol, **self.options)
            except ImportError as exc:
                raise _missing_backend(self.protocol, self.url) from exc
            except TypeError as exc:
                raise StorageError(
                    f"storage options for {self.url} were rejected by the {self.protocol!r} backend: {exc}. "
                    "Pass only arguments that backend accepts",
                    url=self.url,
                ) from exc
            self._fs_pid = pid
        return self._fs

    def use_filesystem(self, fs: fsspec.AbstractFileSystem) -> None:
        """Use ``fs`` in this process instead of the one ``fs`` would build (the simulator's faster
        ``memory://`` store, ``actors.testing.sim_store``: same files, cheaper writes)."""
        self._fs, self._fs_pid = fs, os.getpid()

    @property
    def is_local(self) -> bool:
        """True for the local disk, where appends and atomic renames exist."""
        return self.protocol in _LOCAL_PROTOCOLS

    @property
    def is_process_local(self) -> bool:
        """True when other processes cannot see what this one writes (``memory://``)."""
        return self.protocol in _PROCESS_LOCAL_PROTOCOLS

    @property
    def has_directories(self) -> bool:
        """True where empty directories exist and must be removed explicitly."""
        return self.is_local or self.is_process_local

    def join(self, *parts: str) -> str:
        """A path inside the filesystem below the root (no protocol)."""
        return posixpath.join(self.root, *parts) if parts else self.root

    def uri(self, path: str) -> str:
        """The full location of ``path`` in the form the user wrote, for messages and results."""
        if path == self.root:
            return self.url
        prefix = self.root.rstrip("/") + "/"
        if path.startswith(prefix):
            return self.url.rstrip("/") + "/" + path[len(prefix):]
        if self.is_local:
            return path
        return str(self.fs.unstrip_protocol(path))

    def check_usable(self) -> None:
        """Fail early, with a clear message, if results could not be written here.

        Creates the root where directories exist (never a bucket) and writes then deletes a probe.
        """
        fs = self.fs
        root = self.root
        if self.is_local:
            if os.path.isfile(root):
                raise StorageError(
                    f"storage path {root} is a file, not a directory: choose another path or remove the file",
                    url=self.url,
                )
            _check_local_parents(root, self.url)
            try:
                os.makedirs(root, exist_ok=True)
            except PermissionError as exc:
                raise StorageError(
                    f"cannot create storage directory {root}: permission denied ({exc.strerror}). "
                    "Choose a writable directory or fix its permissions",
                    url=self.url,
                ) from exc
            except OSError as exc:
                raise StorageError(
                    f"cannot create storage directory {root}: {exc.strerror or exc}. Choose another path",
                    url=self.url,
                ) from exc
        elif self.is_process_local:
            fs.makedirs(root, exist_ok=True)
        probe = self.join(f".audition_probe-{secrets.token_hex(4)}")
        try:
            retrying(lambda: fs.pipe_file(probe, b"probe"), what="writing a probe object", url=self.url)
            retrying(lambda: fs.rm_file(probe), what="deleting a probe object", url=self.url)
        except FileNotFoundError as exc:
            raise StorageError(
                f"cannot write to {self.url}: {exc}. Check that the location exists", url=self.url
            ) from exc


def _check_local_parents(root: str, url: str) -> None:
    """Name the exact component that is a file, which os.makedirs only reports vaguely."""
    parent = os.path.dirname(root)
    while parent and parent != os.path.dirname(parent):
        if os.path.exists(parent):
            if not os.path.isdir(parent):
                raise StorageError(
                    f"storage path {root} cannot be created because {parent} is a file: "
                    "choose another path or remove the file",
                    url=url,
                )
            return
        parent = os.path.dirname(parent)


def _filesystem_class(protocol: str, url: str) -> type[fsspec.AbstractFileSystem]:
    """Resolve the backend now so a typo or a missing package fails at configuration time."""
    if protocol not in known_implementations and protocol not in fsspec.registry:
        installed, other = _known_protocols()
        raise StorageError(
            f"unknown storage protocol {protocol!r} in {url}: use a local path or one of the installed "
            f"protocols: {', '.join(installed)} (fsspec also knows, with extra packages: {', '.join(other)})",
            url=url,
        )
    try:
        cls: type[fsspec.AbstractFileSystem] = fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        raise _missing_backend(protocol, url) from exc
    if protocol in _EXTRAS:
        problem = s3_stack_problem()
        if problem is not None:
            raise StorageError(f"storage URL {url} cannot be used: {problem}", url=url)
    return cls


def _known_protocols() -> tuple[list[str], list[str]]:
    """fsspec protocols split into importable now and needing another package (no imports done)."""
    installed: list[str] = []
    other: list[str] = []
    for protocol in sorted(set(fsspec.available_protocols())):
        target = known_implementations.get(protocol, {}).get("class", "")
        module = target.rsplit(".", 1)[0] if target else ""
        try:
            found = protocol in fsspec.registry or bool(module and importlib.util.find_spec(module))
        except (ImportError, ValueError):
            found = False
        (installed if found else other).append(protocol)
    return installed, other


def _missing_backend(protocol: str, url: str) -> StorageError:
    extra = _EXTRAS.get(protocol)
    if extra is not None:
        how = f"pip install '{extra}'"
    else:
        hint = known_implementations.get(protocol, {}).get("err", "")
        how = hint or f"install the fsspec backend for {protocol!r}"
    return StorageError(
        f"storage URL {url} needs the {protocol!r} backend, which is not installed: {how}", url=url
    )
