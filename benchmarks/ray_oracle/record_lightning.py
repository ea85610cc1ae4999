"""Record Ray Tune 2.60's PyTorch Lightning callbacks (the oracle for ``tests/data/ray_lightning.json``):
``ray.tune.integration.pytorch_lightning.TuneReportCheckpointCallback`` inside a trainable reports the
trainer's ``callback_metrics`` (all, or those ``metrics`` names, renamed by a dict) at the hooks ``on`` names
(``validation_end`` by default; never during the sanity check), each with a checkpoint holding
``trainer.save_checkpoint(filename)`` unless ``save_checkpoints=False``; a name missing from the metrics is
left out with a warning (nothing is reported when none is left); an unknown hook raises ``ValueError``;
``TuneReportCallback`` is the same without checkpoints.

Run with a Python that has Ray, torch and lightning installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_lightning.py tests/data/ray_lightning.json

``tests/test_integration_lightning.py`` runs the same trainables under audition and compares.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import lightning.pytorch as pl
import torch
from _reported import reported_values  # (this directory's)
from torch.utils.data import DataLoader, TensorDataset

# each case: the callback's arguments, and the class ("report" for TuneReportCallback)
CASES: dict[str, dict[str, Any]] = {
    "renamed": {"metrics": {"loss": "val_loss"}, "filename": "model.ckpt"},
    "all_metrics": {},
    "listed": {"metrics": ["val_loss", "train_loss"], "save_checkpoints": False},
    "two_hooks": {"metrics": "val_loss", "on": ["train_epoch_end", "validation_end"]},
    "missing": {"metrics": ["nope"]},
    "report_only": {"cls": "report", "metrics": {"loss": "val_loss"}},
}


class Regressor(pl.LightningModule):
    """A linear model on fixed data: deterministic on the CPU."""

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.layer = torch.nn.Linear(3, 1)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def loaders() -> tuple[DataLoader, DataLoader]:
    """Training and validation data (seeded)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=gen)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1 * torch.randn(64, 1, generator=gen)
    return (DataLoader(TensorDataset(x[:48], y[:48]), batch_size=16),
            DataLoader(TensorDataset(x[48:], y[48:]), batch_size=16))


def fit_with(callback: Any, lr: float) -> None:
    """Three epochs with ``callback`` (inside a trial)."""
    pl.seed_everything(0, verbose=False)
    torch.set_num_threads(1)
    train, val = loaders()
    trainer = pl.Trainer(max_epochs=3, callbacks=[callback], enable_progress_bar=False, logger=False,
                         enable_checkpointing=False, enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(Regressor(lr), train, val)


def rows(grid: Any) -> list[Any]:
    """Each trial's reported keys and values (rounded), its checkpoint's files and what they hold."""
    out = []
    for r in sorted(grid, key=lambda r: r.config["lr"]):
        history = r.metrics_dataframe
        reported, values = reported_values(history)
        files, state = None, None
        if r.checkpoint is not None:
            with r.checkpoint.as_directory() as d:
                files = sorted(os.listdir(d))
                saved = torch.load(os.path.join(d, files[0]), map_location="cpu", weights_only=False)
                state = [saved["epoch"], sorted(saved["state_dict"])]
        out.append({"lr": r.config["lr"], "results": len(history), "reported": reported, "values": values,
                    "files": files, "state": state, "kept": len(r.best_checkpoints), "error": r.error is not None})
    return out


def main() -> None:
    import ray
    from ray import tune
    from ray.tune.integration.pytorch_lightning import TuneReportCallback, TuneReportCheckpointCallback

    def make(case: str) -> Any:
        args = dict(CASES[case])
        cls = TuneReportCallback if args.pop("cls", None) == "report" else TuneReportCheckpointCallback
        return cls(**args)

    out: dict[str, Any] = {"ray": ray.__version__, "lightning": pl.__version__, "torch": torch.__version__}
    for case in CASES:
        def train(config: dict[str, Any], case: str = case) -> None:
            fit_with(make(case), config["lr"])

        grid = tune.Tuner(train, param_space={"lr": tune.grid_search([0.05, 0.1])},
                          run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), verbose=0)).fit()
        out[case] = rows(grid)
    try:
        TuneReportCheckpointCallback(on="nope")
        out["bad_hook"] = "accepted"
    except ValueError as exc:
        out["bad_hook"] = str(exc).split(".")[0]
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
