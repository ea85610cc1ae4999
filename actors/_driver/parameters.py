"""``with_parameters``: large objects reach each machine once, not once per trial.

Ray Tune puts them in its object store. Here the trainable pickles to a few keys only, so neither
the controller nor any message ever holds the data, and the objects reach the trial processes
by the cheapest route there is:

* On the driver's machine, by inheritance: the driver keeps every object in this module, and
  the actor system is started by ``fork`` (the only start method audition allows) after that,
  so every trial process on the machine sees the driver's objects, copy-on-write: no pickling,
  no copy, no file. When the system starts from a fresh interpreter instead (TensorFlow ran in the
  driver: ``actors/_driver/fresh_system.py``), each object is written to this machine's object area
  as for other machines below, and mapped from there.
* Other machines (multi-host): ``fit()`` writes each object once to a file (pickle protocol 5:
  numpy arrays and other buffers out of band, 64-byte aligned) in this machine's object area
  and to ``<experiment>/.objects/<key>`` in storage. A trial process elsewhere downloads it once
  per machine into that machine's object area (a file lock makes the machine's other trial
  processes wait for that download), then maps it: arrays are unpickled straight from the
  mapping, shared by every process on the machine and read-only, as Ray's object store gives
  them. Values are cached per process, so a reused actor does not load them again.

The driver holds its objects until it exits (Ray's object store too holds them until shutdown).
"""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import logging
import mmap
import os
import pickle
import posixpath
import secrets
import struct
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from actors._driver.errors import ConfigError, TuneError

log = logging.getLogger("audition")

OBJECTS_DIR_ENV = "AUDITION_OBJECTS_DIR"  # this machine's object area (default: under the temp dir)
STORAGE_DIR = ".objects"  # below the experiment directory, for other machines
_MAGIC = b"AUDOBJ1\n"
_ALIGN = 64

_owned: dict[str, Any] = {}  # key -> the object given to with_parameters (driver; inherited by fork)
_cache: dict[str, Any] = {}  # key -> the object loaded from a file, in this process
_cache_lock = threading.Lock()
fetches = 0  # downloads made by this process (for tests)


def objects_dir() -> str:
    """This machine's object area (private to the user: it may hold their data)."""
    root = os.environ.get(OBJECTS_DIR_ENV) or os.path.join(tempfile.gettempdir(), f"audition-objects-{os.getuid()}")
    os.makedirs(root, mode=0o700, exist_ok=True)
    return root


class Parameters:
    """The keys of one ``with_parameters`` call's objects; the objects stay in ``_owned`` (the
    driver, and by fork every process it starts), so pickling this never pickles them."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.keys = {name: secrets.token_hex(16) for name in values}
        for name, key in self.keys.items():
            _owned[key] = values[name]

    def __repr__(self) -> str:
        return f"Parameters({sorted(self.keys)})"

    def resolve(self) -> dict[str, Any]:
        """Every object by name: inherited from the driver, or loaded once per process."""
        return {name: load(key, name) for name, key in self.keys.items()}


def with_parameters(trainable: Any, **kwargs: Any) -> Any:
    """Ray Tune's ``tune.with_parameters``: a trainable that gets ``kwargs`` without pickling them
    into every trial. A function is called as ``trainable(config, **kwargs)``; a ``Trainable``
    class gets them in ``setup(config, **kwargs)``. The name of the trainable is kept."""
    from actors._driver.trainable import Trainable

    if not callable(trainable) or (inspect.isclass(trainable) and not issubclass(trainable, Trainable)):
        raise ConfigError(f"with_parameters() takes a function trainable or a subclass of actors.Trainable, "
                          f"got {type(trainable).__name__}")
    params = Parameters(kwargs)
    name = str(getattr(trainable, "__name__", "tune_with_parameters"))
    chain = [*getattr(trainable, "_audition_parameters", ()), params]
    if inspect.isclass(trainable):
        wrapped_cls: type[Trainable]

        def setup(self: Any, config: dict[str, Any]) -> None:
            super(wrapped_cls, self).setup(config, **params.resolve())

        wrapped_cls = type(name, (trainable,), {"setup": setup, "__module__": trainable.__module__,
                                                "__qualname__": name, "_audition_parameters": chain})
        return wrapped_cls

    def inner(config: dict[str, Any]) -> Any:
        return trainable(config, **params.resolve())

    inner.__name__ = inner.__qualname__ = name
    inner.__doc__ = getattr(trainable, "__doc__", None)
    inner._audition_parameters = chain  # type: ignore[attr-defined]
    resources = getattr(trainable, "_audition_resources", None)
    if resources is not None:  # with_resources(...) inside: keep it (Ray keeps _resources)
        inner._audition_resources = resources  # type: ignore[attr-defined]
    return inner


def parameters_of(trainable: Any) -> list[Parameters]:
    return list(getattr(trainable, "_audition_parameters", ()) or ())


# ----------------------------------------------------------------------------------- the files
def write_object(path: str, value: Any, what: str) -> int:
    """Write ``value`` to ``path`` atomically; returns the file's size."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        stream = cloudpickle.dumps(value, protocol=5, buffer_callback=buffers.append)
        raws = [b.raw() for b in buffers]
    except Exception as exc:
        raise ConfigError(f"{what} cannot be pickled ({type(exc).__name__}: {exc}); pass data "
                          "(arrays, frames, lists), not open files, locks or clients") from exc
    header = _MAGIC + struct.pack("<QQ", len(stream), len(raws)) + b"".join(
        struct.pack("<Q", r.nbytes) for r in raws)
    tmp = f"{path}.tmp-{secrets.token_hex(4)}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(header)
            handle.write(stream)
            for raw in raws:
                handle.write(b"\0" * (-handle.tell() % _ALIGN))
                handle.write(raw)
            size = handle.tell()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return size


def read_object(path: str) -> Any:
    """Unpickle a file written by :func:`write_object`, its buffers mapped, not copied."""
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mapped)
    if bytes(view[:len(_MAGIC)]) != _MAGIC:
        raise TuneError(f"{path} is not an audition object file (written by another program?); delete it")
    pos = len(_MAGIC)
    n_stream, n_bufs = struct.unpack_from("<QQ", view, pos)
    pos += 16
    sizes = struct.unpack_from(f"<{n_bufs}Q", view, pos)
    pos += 8 * n_bufs
    stream = view[pos:pos + n_stream]
    pos += n_stream
    bufs = []
    for size in sizes:
        pos += -pos % _ALIGN
        bufs.append(view[pos:pos + size])
        pos += size
    return pickle.loads(stream, buffers=bufs)


# ----------------------------------------------------------------------------------- trial side
def load(key: str, name: str) -> Any:
    """The object ``key`` in this process: cached, else mapped from this machine's object area,
    fetched there from the experiment's storage first if this machine does not have it."""
    if key in _owned:
        return _owned[key]
    with _cache_lock:
        if key in _cache:
            return _cache[key]
        path = os.path.join(objects_dir(), key)
        if not os.path.exists(path):
            _fetch(key, name, path)
        value = read_object(path)
        _cache[key] = value
        return value


def _fetch(key: str, name: str, path: str) -> None:
    """Download ``key`` from the running experiment's storage into this machine's object area."""
    global fetches
    from actors._worker.session import _local, _process_session

    runner = getattr(_local, "runner", None) or _process_session
    if runner is None:
        raise TuneError(f"with_parameters: the object {name!r} is not on this machine and no trial is running "
                        "here to fetch it; call the trainable from Tuner.fit()")
    source = posixpath.join(runner.layout.experiment_dir, STORAGE_DIR, key)
    with _machine_lock(path):
        if os.path.exists(path):  # another trial process on this machine fetched it meanwhile
            return
        tmp = f"{path}.part-{os.getpid()}"
        try:
            from storage import download_file

            download_file(runner.ctx, source, tmp, what=f"fetching the with_parameters object {name!r}")
            os.replace(tmp, path)
            fetches += 1
        except FileNotFoundError:
            raise TuneError(f"with_parameters: the object {name!r} is neither on this machine nor at "
                            f"{runner.ctx.uri(source)}; the driver copies it there only in multi-host runs "
                            "(RunConfig(system='tcp://...')) and deletes it when fit() ends") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def _machine_lock(path: str) -> Iterator[None]:
    with open(path + ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ----------------------------------------------------------------------------------- driver side
@dataclass
class Published:
    """What ``fit()`` wrote for one run, removed again when it ends."""

    files: list[str] = field(default_factory=list)
    remote: list[str] = field(default_factory=list)
    nbytes: int = 0
    ctx: Any = None


def publish(chain: list[Parameters], ctx: Any, experiment_dir: str, multi_host: bool,
            by_file: bool = False) -> Published:
    """Multi-host: write every object once to this machine's object area (for worker processes
    here) and to storage (for other machines). A single machine needs nothing: trial processes
    inherit the objects by fork; ``by_file`` (the actor system starts from a fresh interpreter, which
    inherits nothing): this machine's object area only."""
    out = Published(ctx=ctx)
    if not (multi_host or by_file):
        return out
    try:
        for params in chain:
            for name, key in params.keys.items():
                if key not in _owned:
                    raise ConfigError(f"with_parameters({name}=...): the object is not in this process (the "
                                      "trainable was unpickled here); call with_parameters() in the driver script")
                path = os.path.join(objects_dir(), key)
                out.files.append(path)
                out.nbytes += write_object(path, _owned[key], f"with_parameters({name}=...)")
                if not multi_host:
                    continue
                from storage import upload_file

                remote = posixpath.join(experiment_dir, STORAGE_DIR, key)
                out.remote.append(remote)
                upload_file(ctx, path, remote, what=f"copying with_parameters({name}=...) to storage")
    except BaseException:
        unpublish(out)
        raise
    return out


def unpublish(published: Published | None) -> None:
    """Remove this run's objects (trial processes still mapping a file keep their pages)."""
    if published is None:
        return
    for path in published.files:
        for p in (path, path + ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(p)
    for remote in published.remote:
        try:
            from storage._io import remove_file

            remove_file(published.ctx, remote, attempts=2)
        except Exception as exc:  # cleanup must not hide how the run ended
            log.warning("could not delete %s: %s", published.ctx.uri(remote), exc)


__all__ = ["Parameters", "parameters_of", "publish", "unpublish", "with_parameters"]
