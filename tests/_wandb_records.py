"""Read a W&B offline run file (``run-<id>.wandb``) back: what the run logged, for comparing runs.

The file is W&B's record log (wandb 0.31): a 7-byte header (``:W&B``, a magic number, a version), then 32 KiB
blocks of chunks (a CRC, a 2-byte length, a type: whole, first, middle, last, LevelDB's log format), each record
a ``wandb_internal_pb2.Record``. Only what the integration's tests compare is kept.
"""

from __future__ import annotations

import json
import struct
from typing import Any

BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    pos, out, pending = 7, [], b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # (a block's tail too short for a chunk header is padding)
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == _FULL:
            out.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            out.append(pending + chunk)
            pending = b""
    return out


def read_run(path: str) -> dict[str, Any]:
    """The run's identity, config updates, history rows, summary, artifacts and exit code."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, Any] = {"run": None, "config": {}, "history": [], "summary": {}, "artifacts": [], "exit": None}

    def items(update: Any) -> dict[str, Any]:
        return {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in update}

    for data in _records(path):
        rec = pb.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            out["run"] = {"id": r.run_id, "name": r.display_name, "group": r.run_group, "project": r.project,
                          "tags": list(r.tags), "notes": r.notes, "config": items(r.config.update)}
        elif kind == "config":
            out["config"].update(items(rec.config.update))
        elif kind == "history":
            out["history"].append(items(rec.history.item))
        elif kind == "summary":
            out["summary"].update(items(rec.summary.update))
        elif kind == "artifact":
            a = rec.artifact
            out["artifacts"].append({"name": a.name, "type": a.type,
                                     "files": sorted(e.path for e in a.manifest.contents)})
        elif kind == "exit":
            out["exit"] = rec.exit.exit_code
    return out
