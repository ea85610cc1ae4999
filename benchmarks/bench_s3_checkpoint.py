"""Checkpoint upload throughput to S3: commit_checkpoint vs plain s3fs uploads of the same bytes.

4 trials x 10 checkpoints x 10 MB, one thread per trial, against a moto S3 server started here.
Three variants run ``--rounds`` times in the same process, in a rotating order; the median round of
each counts (a shared 2-CPU machine makes single rounds noisy):

- ``put_file``: one PUT per file, the least any upload can do; ``ratio`` is measured against it;
- ``put``: ``fs.put(local, remote)``, which also lists the destination first (an ``isdir`` check);
- ``commit``: ``commit_checkpoint`` (files, then the manifest).

Prints one JSON line; the target is ratio >= 0.8.

    python benchmarks/bench_s3_checkpoint.py [--trials 4] [--checkpoints 10] [--mb 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from storage import ExperimentLayout, StorageContext, commit_checkpoint
from tests._s3 import start_moto_server


def _in_threads(n: int, work: Callable[[int], None]) -> float:
    """Run ``work(i)`` for i in range(n) in n threads; return the wall time."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    server = start_moto_server()
    try:
        bucket = server.create_bucket("bench-checkpoints")
        ctx = StorageContext(f"s3://{bucket}/results", server.storage_options())
        fs = ctx.fs
        with tempfile.TemporaryDirectory() as tmp:
            local_dirs = []
            for trial in range(args.trials):
                local = os.path.join(tmp, f"trial{trial}")
                os.makedirs(local)
                with open(os.path.join(local, "model.bin"), "wb") as handle:
                    handle.write(os.urandom(args.mb * 2**20))
                local_dirs.append(local)
            total_mb = args.trials * args.checkpoints * args.mb

            def plain(method: str, round_no: int) -> float:
                upload = getattr(fs, method)

                def work(trial: int) -> None:
                    for index in range(args.checkpoints):
                        remote = ctx.join(method, f"r{round_no}", f"t{trial}", f"checkpoint_{index:06d}")
                        upload(os.path.join(local_dirs[trial], "model.bin"), f"{remote}/model.bin")

                return _in_threads(args.trials, work)

            def ours(round_no: int) -> float:
                layout = ExperimentLayout(ctx, f"ours-r{round_no}")

                def work(trial: int) -> None:
                    for index in range(args.checkpoints):
                        dest = layout.checkpoint_dir(f"t{trial}", index)
                        commit_checkpoint(ctx, dest, local_dirs[trial], {"iteration": index})

                return _in_threads(args.trials, work)

            # Warm up connections and the server before measuring.
            fs.pipe_file(ctx.join("warmup"), b"x")
            variants: dict[str, Callable[[int], float]] = {
                "put_file": lambda r: plain("put_file", r),
                "put": lambda r: plain("put", r),
                "commit": ours,
            }
            times: dict[str, list[float]] = {name: [] for name in variants}
            names = list(variants)
            for round_no in range(args.rounds):
                for name in names[round_no % 3:] + names[:round_no % 3]:
                    times[name].append(variants[name](round_no))
                fs.rm(ctx.root, recursive=True)  # free the server's memory between rounds
                fs.invalidate_cache()
    finally:
        server.stop()

    mbps = {name: total_mb / statistics.median(values) for name, values in times.items()}
    result = {
        "bench": "s3_checkpoint",
        "trials": args.trials,
        "checkpoints_per_trial": args.checkpoints,
        "mb_per_checkpoint": args.mb,
        "rounds": args.rounds,
        "plain_put_file_mb_s": round(mbps["put_file"], 1),
        "plain_put_mb_s": round(mbps["put"], 1),
        "commit_checkpoint_mb_s": round(mbps["commit"], 1),
        "ratio": round(mbps["commit"] / mbps["put_file"], 3),
        "ratio_vs_put": round(mbps["commit"] / mbps["put"], 3),
        "target_ratio": 0.8,
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
