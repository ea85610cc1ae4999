"""Framework and tracking callbacks that work with audition as Ray Tune's work with Ray.

``actors.integration.xgboost``, ``.lightgbm``, ``.pytorch_lightning`` and ``.keras`` (Ray's ``ray.tune.integration``;
each needs its library: ``pip install 'audition[xgboost]'``, ``'audition[lightgbm]'``, ``'audition[lightning]'`` or
``'audition[keras]'``), ``actors.integration.mlflow``,
``actors.integration.wandb`` and ``actors.integration.comet`` (Ray's ``ray.air.integrations``; ``'audition[mlflow]'``,
``'audition[wandb]'``, ``'audition[comet]'``).
Import the module you need; this package imports none.
"""
