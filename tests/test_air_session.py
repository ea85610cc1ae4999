"""``actors.session``: Ray AIR's ``ray.air.session``, which Ray 2.0-2.6 scripts report through, as Ray 2.60 serves it.

Recorded from Ray 2.60 in a Tune function trainable: ``session.report`` reports; ``get_experiment_name``,
``get_trial_name``, ``get_trial_id``, ``get_trial_dir`` and ``get_trial_resources`` describe the trial (a
``PlacementGroupFactory`` of ``[{"CPU": 1.0}]``); ``get_checkpoint`` is None on a fresh start; Ray Train's ranks and
sizes, ``get_metadata`` and ``get_run_id`` are None.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from actors import Checkpoint, FailureConfig, RunConfig, Tuner, session
from actors._cli.main import _audition_has
from actors._cli.migrate import migrate
from actors._driver.errors import TuneError

NONE_IN_TUNE = ("get_world_size", "get_world_rank", "get_local_rank", "get_local_world_size", "get_node_rank",
                "get_metadata", "get_run_id")


def _train(config: dict[str, Any]) -> None:
    seen = {n: getattr(session, n)() for n in NONE_IN_TUNE}
    start = session.get_checkpoint()
    first = 1 if start is None else start.to_dict()["i"] + 1
    for i in range(first, 3):
        if i == 2 and start is None and not os.path.exists(config["mark"]):
            open(config["mark"], "w").close()
            raise RuntimeError("once")
        session.report({"i": i, "name": session.get_trial_name(), "id": session.get_trial_id(),
                        "exp": session.get_experiment_name(), "dir": session.get_trial_dir(),
                        "cpu": session.get_trial_resources().required_resources, "seen": json.dumps(seen),
                        "resumed": start is not None}, checkpoint=Checkpoint.from_dict({"i": i}))


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_ray_2_0_script_reports_through_session(tmp_path: Any, system: str) -> None:
    grid = Tuner(_train, param_space={"mark": str(tmp_path / "mark")},
                 run_config=RunConfig(storage=str(tmp_path), name="sx", system=system, verbose=0,
                                      failure_config=FailureConfig(max_failures=1))).fit()
    [result] = grid
    rows = result.metrics_dataframe.to_dict("records")
    assert [r["i"] for r in rows] == [1, 2] and rows[-1]["resumed"]  # retried from its checkpoint, as Ray's
    last = result.metrics
    assert last["exp"] == "sx" and last["id"] == last["trial_id"] and last["name"] == f"_train_{last['id']}"
    assert last["dir"] == result.path and last["cpu"] == {"CPU": 1.0}
    assert json.loads(last["seen"]) == dict.fromkeys(NONE_IN_TUNE)


def test_outside_a_trial_it_raises_and_ray_data_is_refused() -> None:
    with pytest.raises(TuneError, match="outside a trial"):
        session.report({"a": 1})
    with pytest.raises(TuneError, match="outside a trial"):
        session.get_world_rank()
    with pytest.raises(NotImplementedError, match="with_parameters"):
        session.get_dataset_shard("train")


def test_migrate_maps_ray_air_session() -> None:
    out = migrate("from ray.air import session\nfrom ray.air.session import report\n", _audition_has)
    assert out.text == "import actors.session as session\nfrom actors.session import report\n"
    assert not out.warnings
