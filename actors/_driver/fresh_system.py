"""An actor system started by a fresh interpreter, for a driver whose memory a forked process cannot use.

Thespian forks the admin from the process that starts the system, and every actor descends from it.
A driver in which TensorFlow has run (any op: its eager context and thread pools exist) gives forked
children whose first ``tf.function`` waits forever on threads that were not copied (measured with
TensorFlow 2.21: a ``tf.constant`` in the parent, then ``model.fit`` in the child, hangs; importing
TensorFlow alone does not). Ray starts its workers afresh, so such a script runs there. Here, when
:func:`fork_unsafe_reason` names a cause, a new interpreter runs the same ``_start`` the driver would
(``serve``), the driver attaches to that admin as a client, and the trials get the driver's
``sys.path``, environment and working directory but none of its memory, as Ray's workers do.

JAX is the same (measured with jax 0.10.2 on CPU: a product in the driver, then a jitted product in a
forked trial, hangs, after JAX's own warning that ``os.fork()`` is incompatible with its threads; importing
JAX alone does not): its backends, once initialized, hold thread pools no fork copies. So is polars
(measured with polars 2.1.0: a ``group_by`` in the driver, then one in a forked trial, hangs, without a
warning; importing polars alone does not): it starts its pool, threads named ``polars-<n>``, on first use.
And so is joblib's process pool, loky (scikit-learn's ``n_jobs``; measured with joblib 1.6.0: a
``Parallel(n_jobs=2)`` in the driver, then one in a forked trial, waits forever): the pool object is copied
into the child without the threads that serve it, and joblib reuses it there.

PyTorch needs none of this: its CPU pool (GNU OpenMP) is lost in a fork too, but it belongs to the
thread that ran the parallel op, and a trainable runs on a thread of its own in the trial process, which
builds a new pool (measured with torch 2.13: a 500x500 product in the driver, then training in a trial;
the same product on a forked child's main thread never ends), as do search algorithms and schedulers
(``actors/_shell/plugin_thread.py``). ``tests/test_fresh_start.py`` keeps both.

The helper lives as long as the driver: it waits for the end of its stdin (the driver's end of the
pipe), so a driver killed with SIGKILL leaves an orphaned admin that shuts itself down as any other
(``actors._process.owner.watch_owner`` watches the helper). The driver's command line follows ``--`` in
the helper's, so ``ps`` shows which script the actor system belongs to.
"""

from __future__ import annotations

import glob
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from typing import Any

from actors._driver.errors import ConfigError

ENV = "AUDITION_START_METHOD"  # auto (the default), fork, fresh
START_S = 60.0  # how long the helper may take to start the system (an interpreter, imports, the admin)


def fork_unsafe_reason() -> str | None:
    """Why this process's actor system must come from a fresh interpreter, or None (fork it, as always)."""
    setting = os.environ.get(ENV, "auto").strip().lower()
    if setting == "fresh":
        return f"${ENV}=fresh"
    if setting == "fork":
        return None
    if setting != "auto":
        raise ConfigError(f"${ENV}={os.environ[ENV]!r} is not one of auto, fork, fresh: unset it for the default "
                          "(a fresh interpreter only when this process has run TensorFlow, JAX, polars or "
                          "joblib's process pool)")
    return _tensorflow_ran() or _jax_ran() or _polars_ran() or _loky_ran()


def _tensorflow_ran() -> str | None:
    if "tensorflow" not in sys.modules:  # (never imported here: nothing to ask)
        return None
    try:
        from tensorflow.python.eager import context

        ctx = context.context_safe()
        if ctx is not None and getattr(ctx, "_context_handle", None) is not None:
            return "TensorFlow has run in this process"
    except Exception:  # another TensorFlow layout: ask nothing, fork as before
        return None
    return None


def _jax_ran() -> str | None:
    if "jax" not in sys.modules:  # (never imported here: nothing to ask)
        return None
    try:
        from jax._src import xla_bridge

        initialized = getattr(xla_bridge, "backends_are_initialized", None)
        if initialized is not None:
            ran = bool(initialized())
        else:  # (older releases: the dict of initialized backends)
            ran = bool(xla_bridge._backends)
    except Exception:  # another JAX layout: a fresh interpreter, as Ray's workers (a fork may hang)
        return "JAX is loaded in this process (whether it ran could not be told)"
    return "JAX has run in this process" if ran else None


def _polars_ran() -> str | None:
    if "polars" not in sys.modules:
        return None
    # polars tells nothing of its pool; the pool's threads have names of their own (Linux shows them)
    if any(re.fullmatch(r"polars-\d+", name) for name in native_thread_names()):
        return "polars has run in this process (its thread pool exists)"
    return None


def _loky_ran() -> str | None:
    for name in ("joblib.externals.loky.reusable_executor", "loky.reusable_executor"):  # (joblib's, or loky's own)
        executor = getattr(sys.modules.get(name), "_executor", None)
        if executor is not None and not getattr(getattr(executor, "_flags", None), "shutdown", False):
            return "joblib's process pool (loky) has run in this process"
    return None


def native_thread_names() -> set[str]:
    """The names the kernel knows this process's threads by (empty where there is no /proc)."""
    names = set()
    for path in glob.glob("/proc/self/task/*/comm"):
        try:
            with open(path) as f:
                names.add(f.read().strip())
        except OSError:  # a thread that ended meanwhile
            continue
    return names


def start_fresh(kind: str, leader_resources: dict[str, float] | None) -> Any:
    """Start ``kind``'s system in a new interpreter and attach to it; the helper is ``asys.audition_helper``."""
    from actors._cluster.auth import authentication_settings
    from actors._driver import admin_start, system

    code = "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); " \
           "from actors._driver.fresh_system import serve; serve()"
    request = json.dumps({"kind": kind, "leader_resources": leader_resources})
    paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    # the answer comes by a pipe of its own: the helper's stdout and stderr stay this process's, as a forked
    # admin's and actors' would (a pipe nobody read would block a chatty C library after 64 KiB)
    answer_r, answer_w = os.pipe()
    try:
        helper = subprocess.Popen([sys.executable, "-c", code, json.dumps(paths), request, str(answer_w), "--",
                                   *sys.argv], stdin=subprocess.PIPE, pass_fds=(answer_w,))
    except OSError as exc:
        os.close(answer_r)
        raise ConfigError(f"could not start a fresh interpreter ({sys.executable!r}) for the actor system: {exc}; "
                          f"set {ENV}=fork to fork it from this process instead") from exc
    finally:
        os.close(answer_w)
    try:
        assert helper.stdin is not None
        # a cluster key enabled in this process (not only from the environment, which the helper inherits)
        # goes by the pipe: a command line is readable by every user of the machine
        helper.stdin.write(json.dumps({"auth": authentication_settings()}).encode() + b"\n")
        helper.stdin.flush()
        answer = _read_answer(helper, answer_r)
        if "error" in answer:
            raise ConfigError(answer["error"])
        host, port = answer["host"], int(answer["port"])
        system.prepare_client(host)
        from thespian.actors import ActorSystem

        asys = ActorSystem("multiprocTCPBase", {"Admin Port": port}, logDefs=admin_start._log_defs(),
                           transientUnique=True)
    except BaseException:
        end_helper(helper)
        raise
    finally:
        os.close(answer_r)
    asys.audition_admin_port = port
    asys.audition_helper = helper
    return asys


def _read_answer(helper: subprocess.Popen[bytes], answer: int) -> dict[str, Any]:
    """The helper's one JSON line; an error naming what happened if it exits first or takes too long."""
    exited = os.pidfd_open(helper.pid)
    try:
        deadline = time.monotonic() + START_S
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([answer, exited], [], [], max(left, 0.0))
            if answer in ready:
                chunk = os.read(answer, 65536)
                data += chunk
                if chunk:
                    continue
            if ready:  # it exited (or closed the pipe) without a whole answer
                raise ConfigError(f"the actor system's fresh interpreter exited ({helper.wait()}) before "
                                  "starting it; its error is above")
            raise ConfigError(f"the actor system's fresh interpreter did not start it within {START_S:.0f} s; "
                              "is the machine overloaded? Try again, or set AUDITION_START_METHOD=fork")
        return dict(json.loads(data))
    finally:
        os.close(exited)


def end_helper(helper: subprocess.Popen[bytes]) -> None:
    """Close the helper's stdin (it exits) and reap it; kill it if it does not go within 5 s."""
    if helper.stdin is not None:
        try:
            helper.stdin.close()
        except OSError:
            pass
    try:
        helper.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


def serve() -> None:
    """The helper's program: start the system as the driver would have, say where, wait for the driver's end."""
    from actors._cluster.auth import enable_with_settings
    from actors._driver import system

    request = json.loads(sys.argv[2])
    with open(int(sys.argv[3]), "w") as answer:  # (the forked admin keeps a copy of it: nothing writes there)
        try:
            settings = json.loads(sys.stdin.buffer.readline() or b"{}").get("auth")
            if settings is not None:  # before the system starts: the admin and every actor fork with it
                enable_with_settings(settings)
            with system.held_interrupts():  # the admin forks with the driver's handlers, as it would from there
                asys = system.start_here(request["kind"], request["leader_resources"])
        except Exception as exc:
            answer.write(json.dumps({"error": f"the actor system did not start: {exc}"}) + "\n")
            answer.flush()
            os._exit(1)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle (it reaches both)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        answer.write(json.dumps({"host": os.environ["THESPIAN_BASE_IPADDR"], "port": asys.audition_admin_port})
                     + "\n")
    try:
        while sys.stdin.buffer.read(65536):  # until the driver closes its end or dies
            pass
    except OSError:
        pass
    os._exit(0)  # the driver shut the system down; or it died, and the admin sees this process go


__all__ = ["ENV", "end_helper", "fork_unsafe_reason", "serve", "start_fresh"]
