"""Write the Ray Tune public names ``docs/coming-from-ray.md`` must cover (one per line).

Run once with Ray's own interpreter (Ray is never a dependency of audition)::

    /path/to/rayvenv/bin/python benchmarks/ray_oracle/list_public_names.py > tests/data/ray_tune_public_names.txt

What counts as public: ``__all__`` of ``ray.tune``, ``ray.tune.schedulers``, ``ray.tune.search``
(and of each searcher integration ``ray.tune.search.<lib>``), ``ray.tune.stopper`` and
``ray.tune.logger``; the public classes of each framework integration ``ray.tune.integration.<lib>``
and the public classes and functions of the tracking integrations ``ray.air.integrations.<lib>``;
the ``ray.tune.result`` keys a trainable or callback reads or sets; and the
``ray.train`` names a Tune script uses (the rest of ``ray.train`` is Ray Train's distributed
training, not Tune). ``tests/test_coming_from_ray.py`` checks the doc's table against the file.
"""

from __future__ import annotations

import ast
import importlib
import sys

MODULES = ("ray.tune", "ray.tune.schedulers", "ray.tune.search", "ray.tune.stopper", "ray.tune.logger")
SEARCHERS = ("ax", "bayesopt", "bohb", "hebo", "hyperopt", "nevergrad", "optuna", "zoopt")
FRAMEWORKS = ("keras", "lightgbm", "pytorch_lightning", "xgboost")  # ray.tune.integration.<lib>
AIR_INTEGRATIONS = ("comet", "keras", "mlflow", "wandb")  # ray.air.integrations.<lib>: tracking callbacks and setups
RESULT_KEYS = ("DONE", "SHOULD_CHECKPOINT", "DEFAULT_METRIC", "RESULT_DUPLICATE", "TRAINING_ITERATION",
               "TIME_THIS_ITER_S", "TIME_TOTAL_S", "TIMESTAMP", "TRIAL_ID", "HOSTNAME", "PID", "NODE_IP")
TRAIN_FOR_TUNE = ("report", "get_checkpoint", "get_context", "Checkpoint", "CheckpointConfig", "FailureConfig",
                  "Result", "RunConfig", "SyncConfig")


def public_names() -> list[str]:
    names: set[str] = set()
    for module in MODULES:
        names.update(f"{module}.{n}" for n in importlib.import_module(module).__all__)
    for lib in SEARCHERS:
        module = f"ray.tune.search.{lib}"
        text = open(importlib.util.find_spec(module).origin, encoding="utf-8").read()  # no import: the
        scope: dict[str, object] = {}  # integrations need their optional libraries to import
        exec(text[text.index("__all__"):].split("\n\n")[0], scope)
        names.update(f"{module}.{n}" for n in scope["__all__"])  # type: ignore[attr-defined]
    for lib in FRAMEWORKS:  # (no __all__; their classes, read without importing the library)
        module = f"ray.tune.integration.{lib}"
        tree = ast.parse(open(importlib.util.find_spec(module).origin, encoding="utf-8").read())
        names.update(f"{module}.{node.name}" for node in tree.body
                     if isinstance(node, ast.ClassDef) and not node.name.startswith("_"))
    for lib in AIR_INTEGRATIONS:  # (their public classes and functions, read the same way)
        module = f"ray.air.integrations.{lib}"
        tree = ast.parse(open(importlib.util.find_spec(module).origin, encoding="utf-8").read())
        names.update(f"{module}.{node.name}" for node in tree.body
                     if isinstance(node, ast.ClassDef | ast.FunctionDef) and not node.name.startswith("_"))
    result = importlib.import_module("ray.tune.result")
    names.update(f"ray.tune.result.{n}" for n in RESULT_KEYS if hasattr(result, n))
    train = importlib.import_module("ray.train")
    names.update(f"ray.train.{n}" for n in TRAIN_FOR_TUNE if n in train.__all__)
    return sorted(names)


if __name__ == "__main__":
    import ray

    sys.stdout.write(f"# Ray {ray.__version__} Tune public names (benchmarks/ray_oracle/list_public_names.py)\n")
    sys.stdout.write("".join(f"{n}\n" for n in public_names()))
