"""One trial's W&B run, in a process of its own (Ray's ``_WandbLoggingActor``): ``python -m`` this module.

W&B keeps one run per process, so ``WandbLoggerCallback`` starts one of these per trial and writes it
length-prefixed pickles on its standard input: first ``(logdir, exclude, to_config, init_kwargs)``, then
``(kind, content)`` items until ``END`` (or the end of input). A fresh interpreter, never a fork of the driver
(its threads) nor multiprocessing's spawn (which imports the user's script again).
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import sys
from typing import IO, Any

log = logging.getLogger("audition")

END, RESULT, CHECKPOINT = "end", "result", "checkpoint"


def write_frame(stream: IO[bytes], item: Any) -> None:
    data = pickle.dumps(item)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        return (END, None)  # the driver went away: end the run as if told
    (size,) = struct.unpack("<I", head)
    return pickle.loads(stream.read(size))


def run(stream: IO[bytes]) -> None:
    import urllib.error

    import wandb

    from actors.integration.wandb import WANDB_PROCESS_RUN_INFO_HOOK, _handle_result, _load_hook

    logdir, exclude, to_config, init_kwargs = read_frame(stream)
    os.makedirs(logdir, exist_ok=True)  # (the trial's directory; made here should its first event come first)
    os.chdir(logdir)
    os.environ["WANDB_START_METHOD"] = "thread"
    excluded, configured = set(exclude), set(to_config)
    trial_name = init_kwargs.get("name", "unknown")
    wb_run = wandb.init(**init_kwargs)
    # (Ray's: W&B's Config takes attributes)
    wb_run.config.trial_log_path = logdir  # type: ignore[attr-defined]
    if WANDB_PROCESS_RUN_INFO_HOOK in os.environ:
        try:
            _load_hook(os.environ[WANDB_PROCESS_RUN_INFO_HOOK])(wb_run)
        except Exception as exc:
            log.exception("Error calling %s: %s", WANDB_PROCESS_RUN_INFO_HOOK, exc)
    while True:
        kind, content = read_frame(stream)
        if kind == END:
            break
        if kind == CHECKPOINT:
            artifact = wandb.Artifact(name=f"checkpoint_{trial_name}", type="model")
            artifact.add_dir(content)
            wandb.log_artifact(artifact)
            continue
        logged, config_update = _handle_result(content, excluded, configured)
        try:
            wandb.config.update(config_update, allow_val_change=True)
            wandb.log(logged, step=logged.get("training_iteration"))
        except urllib.error.HTTPError as exc:
            log.warning("Failed to log result to w&b: %s", exc)
        except FileNotFoundError as exc:
            log.error("FileNotFoundError: Did not log result to Weights & Biases. Possible cause: relative file path "
                      "used instead of absolute path. Error: %s", exc)
    wandb.finish()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    run(sys.stdin.buffer)
