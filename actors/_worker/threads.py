"""A trial's native thread pools, sized as Ray Tune sizes them.

Ray 2.60 starts each trial in a fresh worker process and, unless ``OMP_NUM_THREADS`` is already set,
sets it to the trial's CPUs rounded down (at least 1: ``ray._private.utils.set_omp_num_threads_if_unset``);
OpenMP, OpenBLAS, MKL and PyTorch read it when they load, so a default trial trains on one thread
(recorded: ``benchmarks/ray_oracle/record_trial_threads.py``). An audition trial process is a copy of
its parent, in which numpy or torch may already be loaded with a pool as large as the machine: the
environment variable alone would come too late, and every trial of a full machine would run as many
threads as it has cores. So the trial's process gets the variable and the libraries already loaded get
the limit a fresh process would have read from it (threadpoolctl). OpenMP's limit is per thread: it is
set on the thread that runs the trainable, and a thread the trainable starts itself keeps OpenMP's
process-wide default (where Ray's would read the variable). Trials that share the driver's process
(the in-process system) are left alone: the driver's settings are the user's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# What each kind of library reads before OMP_NUM_THREADS (threadpoolctl's internal_api names)
OWN_VARIABLES: dict[str, tuple[str, ...]] = {
    "openblas": ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS"),
    "mkl": ("MKL_NUM_THREADS",),
    "blis": ("BLIS_NUM_THREADS",),
    "flexiblas": ("FLEXIBLAS_NUM_THREADS",),
    "openmp": (),
}
# the files of those libraries, as /proc/self/maps names them: threadpoolctl is loaded only if one is mapped
_LIBRARY_FILES = ("openblas", "libgomp", "libiomp", "libomp", "mkl_rt", "libmkl", "libblis", "flexiblas")


def _count(value: str | None) -> int | None:
    """A thread count as OpenMP reads one (``"4"``; ``"4,2"`` is 4 at the outer level); None if unusable."""
    if value is None:
        return None
    head = value.split(",")[0].strip()
    return int(head) if head.isdigit() and int(head) > 0 else None


@dataclass(frozen=True)
class ThreadPlan:
    """What one run of a trial does to its process: the variable to set (None: the user's stays) and
    the thread count for each kind of loaded library (absent: left as it is)."""

    set_omp: str | None
    limits: dict[str, int] = field(default_factory=dict)


def plan(resources: Mapping[str, float], environ: Mapping[str, str]) -> ThreadPlan:
    """Ray's rule for this trial's resources and the process's environment."""
    user = environ.get("OMP_NUM_THREADS")
    if user is None:
        omp: int | None = max(math.floor(resources.get("cpu", 1.0)), 1)
        set_omp: str | None = str(omp)
    else:
        omp, set_omp = _count(user), None
    limits: dict[str, int] = {}
    for api, names in OWN_VARIABLES.items():
        own = next((_count(environ[n]) for n in names if n in environ), None)
        n = own if own is not None else omp
        if n is not None:
            limits[api] = n
    return ThreadPlan(set_omp, limits)


def mapped(needles: tuple[str, ...]) -> bool:
    """Whether a file whose path contains one of ``needles`` is mapped into this process (Linux;
    False where /proc cannot tell)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any(n in line for line in maps for n in needles)
    except OSError:
        return False


class RunPools:
    """One run's sizing, in two steps. ``prepare`` (on the actor's thread, before the trainable's thread
    exists) sets the variable and finds the loaded libraries: finding them opens each with dlopen, which
    can deadlock against another thread loading a library (threadpoolctl's own warning), so it runs
    while the process has no other busy thread. ``apply`` (on the trainable's thread: OpenMP's limit is
    per thread) only calls the libraries' setters."""

    def __init__(self, resources: Mapping[str, float]) -> None:
        self.plan = plan(resources, os.environ)
        self.libraries: list[Any] = []

    def prepare(self) -> RunPools:
        """A later run in the same process (a reused actor) finds the variable an earlier run set: the same
        value, since an experiment's trials share one resources dict."""
        p = self.plan
        if p.set_omp is not None:
            os.environ["OMP_NUM_THREADS"] = p.set_omp
        if p.limits and mapped(_LIBRARY_FILES):
            try:
                import threadpoolctl
            except ImportError:  # a dependency; absent only from a broken install, where the variable still helps
                return self
            self.libraries = [lib for lib in threadpoolctl.ThreadpoolController().lib_controllers
                              if lib.internal_api in p.limits]
        return self

    def apply(self) -> None:
        for lib in self.libraries:  # (PyTorch's CPU pool is OpenMP's: its get_num_threads() follows)
            lib.set_num_threads(self.plan.limits[lib.internal_api])
        if self.libraries:
            # threadpoolctl >= 3.8 lets only the first thread that sets OpenBLAS's shared pool set it again:
            # let go at once, so that the trainable's own calls (from any thread) still work
            import threadpoolctl

            clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
            if clear is not None:
                clear()
