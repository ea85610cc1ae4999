"""Framework callbacks that report to audition as Ray Tune's ``ray.tune.integration`` ones report to Ray.

``actors.integration.xgboost`` and ``actors.integration.lightgbm`` (each needs its library: ``pip install
'audition[xgboost]'`` or ``'audition[lightgbm]'``), and ``actors.integration.mlflow``, Ray's
``ray.air.integrations.mlflow`` (``'audition[mlflow]'``). Import the module you need; this package imports none.
"""
