"""A permanent storage error inside a trial (after the storage package's retries) stops the
experiment with a message naming the location, instead of failing trial after trial."""

from __future__ import annotations

import os
from typing import Any

import pytest

from actors import Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner, get_context, report
from actors._driver.errors import TuneError
from actors.search import grid_search


def blocked(config: dict[str, Any]) -> None:
    # put a plain file where this trial's first checkpoint directory must go
    trial_dir = get_context().get_trial_dir()  # its directory in the experiment (local storage)
    os.makedirs(trial_dir, exist_ok=True)
    with open(os.path.join(trial_dir, "checkpoint_000000"), "w") as f:
        f.write("in the way")
    for step in range(3):
        try:
            report({"loss": 1.0 / (step + 1)}, checkpoint=Checkpoint.from_dict({"step": step}))
        except Exception:
            pass  # user code that swallows errors must not hide a storage failure


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_permanent_storage_error_in_a_trial_stops_the_experiment(system, storage_dir, no_leaks) -> None:
    tuner = Tuner(blocked, param_space={"root": storage_dir, "i": grid_search([0, 1, 2])},
                  tune_config=TuneConfig(metric="loss", mode="min", max_concurrent_trials=1),
                  run_config=RunConfig(name="fatal", storage=storage_dir, verbose=0, system=system,
                                       failure_config=FailureConfig(max_failures=5)))
    with pytest.raises(TuneError, match="could not write its checkpoint to storage") as info:
        tuner.fit()
    assert "checkpoint_000000" in str(info.value)  # names the location
    assert Tuner.can_restore(os.path.join(storage_dir, "fatal"))  # what was written is kept


def test_a_state_write_that_fails_ends_the_run_with_a_storage_message(storage_dir, monkeypatch) -> None:
    """Writing the experiment state is the controller's own storage call: when it fails for good
    the user reads what failed and where, not an 'internal error' with a traceback."""
    import actors._shell.experiment_io as cio
    from storage import StorageError

    calls = []

    def failing(self: Any, state: Any) -> str:
        calls.append(1)
        raise StorageError("writing experiment state failed at memory://x/state (disk full)", url="memory://x")

    monkeypatch.setattr(cio.StateWriter, "write", failing)
    tuner = Tuner(lambda config: report({"loss": 1.0}), run_config=RunConfig(
        name="statefail", storage=storage_dir, verbose=0, system="simple"))
    with pytest.raises(TuneError) as info:
        tuner.fit()
    text = str(info.value)
    assert calls and "could not write to storage: writing experiment state failed" in text, text
    assert "internal error" not in text and "Traceback" not in text, text
