"""Trials that die or will not stop: the deadlines and liveness records the core keeps for them.

A trial's process can die in ways Python never sees (a segfault in a C extension, ``os._exit``,
the OOM killer's SIGKILL): Thespian tells the controller with ``ChildActorExited`` (``ActorGone``),
and when that notice is lost the core still finds the dead process through ``CheckProcesses``.
A trainable can also block without ever reaching ``report()``: a stop (or pause) is cooperative
first, and after ``RunConfig(trial_stop_grace_s)`` its process is killed. Time limits that need no
report (``stop={"time_total_s": T}``) are measured on the core's clock. All times are the ``now``
the core was handed; nothing here reads a clock.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from actors._engine.lifecycle import Phase, TrialTable
from actors._engine.trial import TrialStatus


@dataclass(frozen=True)
class RunClock:
    run_id: int
    started: float
    time_total_s: float  # the trial's total before this run


_WHAT = {"SIGSEGV": "a segmentation fault", "SIGBUS": "a bus error", "SIGFPE": "an arithmetic fault",
         "SIGILL": "an illegal instruction", "SIGABRT": "abort()"}


def describe_exit(exitcode: int | None) -> str:
    """'killed by SIGSEGV (a segmentation fault)' / 'exited with code 3' for a process's exit code."""
    if exitcode is None:
        return "exited (how is unknown)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            return f"killed by signal {-exitcode}"
        return f"killed by {name}" + (f" ({_WHAT[name]})" if name in _WHAT else "")
    return f"exited with code {exitcode}"


def death_message(code: int | None) -> str:
    """How a trial's process ended, for its error message."""
    if code is None:
        return "the trial's actor process exited unexpectedly (killed, or crashed outside Python)"
    how = describe_exit(code)
    if code == -signal.SIGKILL:
        how += ": the kernel's out-of-memory killer does this when memory runs out"
    return f"the trial's process died ({how})"


class Watchdog:
    """Per trial: the process running it, when it must have halted, when its run started."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.procs: dict[str, tuple[int, int]] = {}  # trial -> (run_id, pid)
        self.halt_by: dict[str, tuple[int, float]] = {}  # trial -> (run_id, kill deadline)
        self.clocks: dict[str, RunClock] = {}
        # per machine (None: this one; else a member, from its probe's answers), trial -> run_id whose process
        # was seen gone at that machine's last check: each machine's checks are paired alone
        self.gone_on: dict[str | None, dict[str, int]] = {}

    def process(self, trial_id: str, run_id: int, pid: int) -> None:
        self.procs[trial_id] = (run_id, pid)

    def pid(self, trial_id: str, run_id: int) -> int | None:
        proc = self.procs.get(trial_id)
        return proc[1] if proc is not None and proc[0] == run_id else None

    def forget(self, trial_id: str) -> int | None:
        """The run is being ended by force: its pid (if known), no longer watched."""
        proc = self.procs.pop(trial_id, None)
        return proc[1] if proc is not None else None

    def started(self, trial_id: str, run_id: int, now: float, time_total_s: float) -> None:
        """A run started: its clock starts now, any old deadline is void."""
        self.clocks[trial_id] = RunClock(run_id, now, time_total_s)
        self.halt_by.pop(trial_id, None)

    def run_over(self, trial_id: str, run_id: int) -> None:
        """The run ended: forget its process, clock and deadline (kept for every trial they would grow with
        the experiment; a later run registers its own)."""
        proc, clock, halt = self.procs.get(trial_id), self.clocks.get(trial_id), self.halt_by.get(trial_id)
        if proc is not None and proc[0] <= run_id:
            del self.procs[trial_id]
        if clock is not None and clock.run_id <= run_id:
            del self.clocks[trial_id]
        if halt is not None and halt[0] <= run_id:
            del self.halt_by[trial_id]

    def arm(self, trial_id: str, run_id: int, now: float) -> None:
        """A stop or pause was sent: the trial must halt within the grace period."""
        old = self.halt_by.get(trial_id)
        if old is None or old[0] != run_id:
            self.halt_by[trial_id] = (run_id, now + self.grace_s)

    def overdue(self, table: TrialTable, now: float) -> list[tuple[str, int]]:
        """Runs past their halt deadline (each given once); SAVING/STOPPING runs get a deadline."""
        for rec in table.with_status(TrialStatus.RUNNING):
            if rec.phase in (Phase.SAVING, Phase.STOPPING):  # e.g. a pause joined a save in flight
                self.arm(rec.trial_id, rec.run_id, now)
        due = []
        for trial_id, (run_id, deadline) in list(self.halt_by.items()):
            held = table.trials.get(trial_id)
            if held is None or held.run_id != run_id or held.status is not TrialStatus.RUNNING:
                del self.halt_by[trial_id]
            elif now >= deadline:
                del self.halt_by[trial_id]
                due.append((trial_id, run_id))
        return due

    def over_time(self, table: TrialTable, now: float, limit: float) -> list[str]:
        """Stepping trials whose ``time_total_s`` on this clock reached ``limit``."""
        out = []
        for rec in table.with_status(TrialStatus.RUNNING):
            run = self.clocks.get(rec.trial_id)
            if run is None or run.run_id != rec.run_id or rec.phase is not Phase.STEPPING:
                continue
            if run.time_total_s + (now - run.started) >= limit:
                out.append(rec.trial_id)
        return out

    def seen_gone(self, gone: tuple[tuple[str, int, int | None], ...],
                  member: str | None = None) -> list[tuple[str, int, int | None]]:
        """Processes found gone at this check *and* the one before (the local check's, or ``member``'s
        probe's): their exit notice is lost."""
        before = self.gone_on.get(member, {})
        lost = [(t, r, code) for t, r, code in gone if before.get(t) == r]
        now = {t: r for t, r, _ in gone if before.get(t) != r}
        if now:
            self.gone_on[member] = now
        else:
            self.gone_on.pop(member, None)
        return lost

    @property
    def gone(self) -> dict[str, int]:
        """This machine's processes seen gone at its last check (the next check must be answered)."""
        return self.gone_on.get(None, {})


__all__ = ["RunClock", "Watchdog", "death_message", "describe_exit"]
