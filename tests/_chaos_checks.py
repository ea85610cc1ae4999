"""The chaos harness's pieces that run in trial processes or read storage (see tests/_chaos.py):
the trainable, the storage stall, what storage holds, and the invariants checked at the end."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from typing import Any

NAME = "chaos"
STALL_LIMIT_S = 30.0  # a stall flag left behind by a crashed harness never hangs a trial for longer


# ---------------------------------------------------------------------------------- the trainable
def chaos_trainable(config: dict[str, Any]) -> None:
    """``it`` always equals ``training_iteration``. ``run`` names this run, starting with its start
    time (runs of a trial order by it); ``restored_from`` is the iteration of the checkpoint it
    resumed from (0: none). Checkpoints carry ``run`` in their manifest's metrics."""
    from actors import Checkpoint, get_checkpoint, report

    ckpt = get_checkpoint()
    start = int(ckpt.to_dict()["it"]) if ckpt else 0
    run = f"{time.time():.6f}-{uuid.uuid4().hex[:6]}"
    every = 1 + int(config["x"]) % 2  # half the trials checkpoint every iteration, half every other one
    for it in range(start + 1, config["steps"] + 1):
        time.sleep(config["step_s"])
        saved = Checkpoint.from_dict({"it": it}) if it % every == 0 else None
        report({"loss": config["x"] / it, "it": it, "restored_from": start, "run": run, "wall": time.time()},
               checkpoint=saved)  # wall: Ray's timestamp, in every result, is whole seconds


def run_start(run: str) -> float:
    return float(run.split("-", 1)[0])


# ---------------------------------------------------------------------------------- storage stall
def install_stall(flag: str) -> None:
    """Storage stalls while ``flag`` exists (at most STALL_LIMIT_S). The flag says how: ``upload``:
    a checkpoint's uploads wait (``LocalFileSystem.put_file``); ``answer``: the commit lands but its
    answer is late (as when an object store's response is held), so a death in it leaves a
    committed checkpoint the controller never heard of. Installed before an actor system starts,
    so every process it forks inherits it."""
    from fsspec.implementations.local import LocalFileSystem

    import storage

    real_put = getattr(LocalFileSystem.put_file, "_chaos_real", LocalFileSystem.put_file)
    real_commit = getattr(storage.commit_checkpoint, "_chaos_real", storage.commit_checkpoint)

    def held(how: str) -> None:
        deadline = time.monotonic() + STALL_LIMIT_S
        while time.monotonic() < deadline:
            try:
                with open(flag, encoding="ascii") as f:
                    if f.read() != how:
                        return
            except OSError:
                return
            time.sleep(0.01)

    def put_file(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> Any:
        held("upload")
        return real_put(self, lpath, rpath, *args, **kwargs)

    def commit_checkpoint(*args: Any, **kwargs: Any) -> Any:
        out = real_commit(*args, **kwargs)
        held("answer")
        return out

    put_file._chaos_real = real_put  # type: ignore[attr-defined]
    commit_checkpoint._chaos_real = real_commit  # type: ignore[attr-defined]
    LocalFileSystem.put_file = put_file  # type: ignore[method-assign]
    storage.commit_checkpoint = commit_checkpoint  # the trial runner looks it up at each commit


def remove_stall() -> None:
    from fsspec.implementations.local import LocalFileSystem

    import storage

    real_put = getattr(LocalFileSystem.put_file, "_chaos_real", None)
    if real_put is not None:
        LocalFileSystem.put_file = real_put  # type: ignore[method-assign]
    real_commit = getattr(storage.commit_checkpoint, "_chaos_real", None)
    if real_commit is not None:
        storage.commit_checkpoint = real_commit


# ---------------------------------------------------------------------------------- storage views
def _rows(path: str) -> list[dict[str, Any]]:
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                with contextlib.suppress(ValueError):
                    rows.append(json.loads(line))
    except OSError:
        pass
    return rows


class Storage:
    def __init__(self, root: str) -> None:
        from storage import StorageContext

        self.root, self.exp = root, os.path.join(root, NAME)
        self.ctx = StorageContext(root)
        # trial -> (run, iteration) of every committed checkpoint ever seen: a later run may
        # commit to the same path (a retry that did not know of it) or delete it
        self.seen: dict[str, set[tuple[str, int]]] = {}

    def trials(self) -> list[str]:
        try:
            return sorted(d for d in os.listdir(self.exp) if os.path.isfile(os.path.join(self.exp, d, "params.json")))
        except OSError:
            return []

    def last_rows(self) -> list[dict[str, Any]]:
        out = []
        for tid in self.trials():
            rows = _rows(os.path.join(self.exp, tid, "result.json"))
            if rows:
                out.append(rows[-1])
        return out

    def snapshot(self) -> None:
        """Remember every committed checkpoint now in storage (a later deletion cannot hide it)."""
        from storage import list_checkpoints

        for tid in self.trials():
            for info in list_checkpoints(self.ctx, os.path.join(self.exp, tid)):
                metrics = (info.metadata or {}).get("metrics") or {}
                if info.committed and "run" in metrics:
                    self.seen.setdefault(tid, set()).add((str(metrics["run"]), int(info.metadata["iteration"])))


def check(grid: Any, storage: Storage, steps: int, trials: int, worker: str, report: Any) -> None:
    """Every invariant of a finished run; each break is a line appended to ``report.violations``."""
    from actors._engine.trial import TrialStatus

    bad = report.violations
    storage.snapshot()
    want = list(range(1, steps + 1))
    if len(grid) != trials:
        bad.append(f"{len(grid)} trials, expected {trials}")
    for r in grid:
        tid = os.path.basename(r.path.rstrip("/"))  # the trial's directory
        report.failures += r.num_failures
        if r.status is not TrialStatus.TERMINATED:
            bad.append(f"{tid}: ended {r.status.name}: {r.error}")
        history = list(r.metrics_history)
        report.members.update("worker" if h.get("member") == worker else "leader" for h in history)
        its = [h["training_iteration"] for h in history]
        if its != want:
            bad.append(f"{tid}: history iterations {its}, expected 1..{steps} once each")
        on_disk = [h["training_iteration"] for h in _rows(os.path.join(storage.exp, tid, "result.json"))]
        if on_disk != want:
            bad.append(f"{tid}: result.json iterations {on_disk}, expected 1..{steps} once each")
        if any(h.get("it") != h["training_iteration"] for h in history):
            bad.append(f"{tid}: the trainable's counter disagrees with training_iteration (wrong checkpoint)")
        bad.extend(_resumes(tid, history, storage, report))


def _resumes(tid: str, history: list[dict[str, Any]], storage: Storage, report: Any) -> list[str]:
    """Every run resumed from the newest checkpoint committed by the runs before it."""
    committed = storage.seen.get(tid, set())
    out, previous = [], None
    for h in history:
        run = h.get("run")
        if run is None or run == previous:
            continue
        previous = run
        newest = max((it for r, it in committed if run_start(r) < run_start(run)), default=0)
        report.resumes += newest > 0
        if h.get("restored_from") != newest:
            out.append(f"{tid}: the run starting at iteration {h['training_iteration']} resumed from "
                       f"{h.get('restored_from')}, but iteration {newest} was the newest committed checkpoint")
    return out
