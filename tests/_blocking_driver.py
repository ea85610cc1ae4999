"""A driver for the process-lifetime tests: ``python tests/_blocking_driver.py STORAGE MODE``.

MODE ``block``: two trials report once, then block in a C call that holds the GIL (their actor
thread cannot run either). MODE ``signal-at-start:INT`` / ``signal-at-start:TERM``: the driver
sends itself that signal just after Thespian's admin process started, inside ``ActorSystem()``;
``signal-at-start:TERM:2`` sends it twice (a second signal must not interrupt the start either).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

if __name__ == "__main__":  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import RunConfig, TuneConfig, Tuner, report


def blocked(config: dict) -> None:
    report({"step": 0})
    time.sleep(0.5)  # the result leaves this process first
    ctypes.PyDLL(None).sleep(3600)  # PyDLL keeps the GIL: nothing else in this process runs


def _signal_once_the_admin_runs(sig: int, times: int = 1) -> None:
    from thespian.system import multiprocCommon

    original = multiprocCommon.multiprocessCommon._startAdmin

    def start_admin(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        for _ in range(times):
            os.kill(os.getpid(), sig)

    multiprocCommon.multiprocessCommon._startAdmin = start_admin


if __name__ == "__main__":
    storage, mode = sys.argv[1], sys.argv[2]
    if mode.startswith("signal-at-start:"):
        name, _, times = mode.split(":", 1)[1].partition(":")
        _signal_once_the_admin_runs(getattr(signal, "SIG" + name), int(times or 1))
    try:
        Tuner(blocked, tune_config=TuneConfig(num_samples=2),
              run_config=RunConfig(name="blocked", storage=storage, verbose=0, trial_stop_grace_s=2.0)).fit()
    except KeyboardInterrupt:  # SIGTERM (Ctrl-C ends the run and fit() returns, as Ray)
        print("interrupted", flush=True)
        sys.exit(130)
    print("fit returned", flush=True)
