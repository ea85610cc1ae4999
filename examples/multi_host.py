"""Multi-host on one machine: this script leads; two local `audition worker` processes run the trials.

On real machines, run the driver with RunConfig(system="tcp://<this host's address>:<port>") and on
every other machine:  audition worker --leader <driver address>:<port> --cpus N
(use shared storage such as s3:// so every host can write checkpoints; see docs/multi-host.md).

Run: python examples/multi_host.py [storage_dir]
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

from actors import RunConfig, TuneConfig, Tuner, report
from actors._driver.system import free_port
from actors.search import grid_search


def train(config: dict) -> None:
    for step in range(5):
        time.sleep(0.05)
        report({"loss": (config["lr"] - 0.1) ** 2 + 1 / (step + 1)})


def start_workers_when_listening(port: int, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    for i in range(2):
        procs.append(subprocess.Popen([sys.executable, "-m", "actors._cli", "worker", "--leader",
                                       f"127.0.0.1:{port}", "--cpus", "1", "--id", f"worker{i}"],
                                      stdout=subprocess.DEVNULL, env=dict(os.environ)))


def main(storage: str = "/tmp/audition_results") -> None:
    port = free_port()
    procs: list[subprocess.Popen] = []
    starter = threading.Thread(target=start_workers_when_listening, args=(port, procs), daemon=True)
    starter.start()
    try:
        grid = Tuner(train, param_space={"lr": grid_search([0.01, 0.05, 0.1, 0.2])},
                     tune_config=TuneConfig(metric="loss", mode="min"),
                     run_config=RunConfig(name="multi_host", storage=storage, system=f"tcp://127.0.0.1:{port}",
                                          leader_runs_trials=False, verbose=0)).fit()
        for r in grid:
            print(r.config, "ran on", r.metrics["member"], "loss", round(r.metrics["loss"], 4))
        print("best config:", grid.get_best_result().config)
    finally:
        starter.join(timeout=30)
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


if __name__ == "__main__":
    main(*sys.argv[1:2])
