"""A function trainable that reports a torch tensor fails that trial with Ray 2.60's ``ValueError``
(recorded: Ray's session refuses it in ``report``), instead of the tensor reaching the loggers, where
``result.json``'s encoder raised and stopped the whole experiment. And the encoder never raises for a
value whose ``item()``/``tolist()`` fails: it writes the value's ``str``."""

from __future__ import annotations

from actors import RunConfig, TuneConfig, Tuner, report
from actors._worker.session import _holds_torch_object, _torch_kinds
from storage._io import dumps_result, json_default
from tests._lean import IN_PROCESS, lazy, needs

torch = lazy("torch")  # (imported by the tests, never at collection: tests/_lean.py)
pytestmark = [needs("torch"), IN_PROCESS]


def test_tensors_and_modules_are_found_where_ray_looks():
    kinds = _torch_kinds(torch)
    assert _holds_torch_object(torch.tensor(0.5), kinds)
    assert _holds_torch_object({"a": [1, (2, torch.ones(2))]}, kinds)
    assert _holds_torch_object({"m": torch.nn.Linear(1, 1)}, kinds)
    assert _holds_torch_object({torch.tensor(1): 1}, kinds)  # (keys too, as Ray's contains_tensor)
    assert not _holds_torch_object({"a": [1.0, {"b": "tensor"}], "n": None}, kinds)
    assert _torch_kinds(object()) == ()  # (torch half imported: nothing to refuse yet)


def test_a_reported_tensor_fails_its_trial_with_rays_error_and_the_run_goes_on(tmp_path):
    def train(config):
        if config["tensor"]:
            report({"loss": torch.tensor(0.5)})
        report({"loss": 1.0})

    grid = Tuner(train, param_space={"tensor": __import__("actors").grid_search([True, False])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage_path=str(tmp_path), system="simple", verbose=0)).fit()
    by_flag = {r.config["tensor"]: r for r in grid}
    assert "Passing objects containg Torch tensors as metrics is not supported" in str(by_flag[True].error)
    assert by_flag[False].error is None and by_flag[False].metrics["loss"] == 1.0


def test_a_value_whose_item_or_tolist_raises_is_written_as_its_str():
    class Odd:
        def item(self):
            raise RuntimeError("not one element")

        def tolist(self):
            raise RuntimeError("no list either")

        def __str__(self):
            return "odd"

    assert json_default(torch.ones(2)) == [1.0, 1.0]
    assert json_default(Odd()) == "odd"
    assert dumps_result({"x": Odd()}) == '{"x": "odd"}'
