"""Read a Comet offline experiment (its ``.zip``) back: what the experiment logged, for comparing experiments.

comet_ml 3.58 writes ``experiment.json`` (the project, tags) and ``messages.json`` (one JSON message a line);
only the messages the integration's tests compare are kept, in order, without their ids and timestamps.
"""

from __future__ import annotations

import json
import zipfile
from typing import Any


def read_experiment(path: str) -> dict[str, Any]:
    with zipfile.ZipFile(path) as f:
        experiment = json.loads(f.read("experiment.json"))
        lines = f.read("messages.json").decode("utf-8").splitlines()
    out: dict[str, Any] = {"project": experiment.get("project_name"), "tags": experiment.get("tags"), "other": [],
                           "parameters": [], "metrics": [], "system": [], "artifacts": []}
    for line in lines:
        if not line.strip():
            continue
        message = json.loads(line)
        kind, payload = message["type"], message["payload"]
        if kind == "log_other":
            out["other"].append([payload["key"], payload["value"]])
        elif kind == "parameter_msg":
            p = payload["param"]
            out["parameters"].append([p["paramName"], p["paramValue"], p["source"], p["step"]])
        elif kind == "metric_msg":
            m = payload["metric"]
            out["metrics"].append([m["metricName"], m["metricValue"], m["step"]])
        elif kind == "system_info":
            out["system"].append([payload["system_info"]["key"], payload["system_info"]["value"]])
        elif "artifact" in kind:
            out["artifacts"].append(kind)
    return out
