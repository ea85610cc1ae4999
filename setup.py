"""audition: hyperparameter tuning on Thespian actors with Ray Tune's API."""

from setuptools import find_packages, setup

# Every dependency has a floor (the oldest version tested) and a ceiling (the next major, or the next
# release line for packages whose internals audition touches), so that pip resolves the same way on any
# day instead of backtracking to an ancient release (s3fs 0.4.2 on 2026-12-03, issue 12).
CORE = [
    "thespian>=4.0.1,<4.1",  # actors/_cluster/auth.py patches its TCP transport: a new release line needs a look
    "cloudpickle>=2.2,<4",
    "fsspec>=2025.3.2,<2027",
    "rich>=13,<16",
    # a trial's already-loaded OpenBLAS/OpenMP sized as Ray sizes them (actors/_worker/threads.py); 3.5 is the
    # oldest that finds numpy 2's scipy-openblas
    "threadpoolctl>=3.5,<4",
]
TEST = [
    "pytest>=8,<10",
    "pytest-timeout>=2.3,<3",
    "pytest-xdist>=3.5,<4",  # the README's -n 4: the suite mostly waits on actor systems and subprocesses
    "execnet>=2.1,<3",
    "hypothesis>=6.100,<7",
    "ruff==0.17.6",  # linters are pinned: a new release adds rules, and test_lint runs them
    "mypy==2.4.1",
    "psutil>=5.9,<8",
]
# No boto3 here: storage/ does not use it, s3fs pins aiobotocore, which pins botocore. An unbounded boto3
# beside an unbounded s3fs made pip give up on s3fs (that day's boto3 was newer than any aiobotocore
# supported) and fall back to s3fs 0.4.2, from before aiobotocore. The tests' boto3 comes through moto.
S3 = ["s3fs>=2025.3.2,<2027"]
# The tests' boto3 (moto's) is bounded by the botocore that s3fs's aiobotocore pins: each boto3 release pins a
# botocore at least as new as itself, so an unbounded boto3 made pip download and refuse every boto3 newer than
# aiobotocore allows (20 wheels on 2026-12-04, one more each day) before settling. aiobotocore is bounded too, so
# that the newest s3fs it admits is taken without a search. Raise all three together (`.ci/floors.txt` pins the
# floors stage's, whose s3fs 2025.3.2 takes aiobotocore 2.x).
S3_TEST = ["aiobotocore>=2.19,<3.11", "boto3>=1.41.5,<1.43.118"]
PLOT = ["matplotlib>=3.5,<4"]
OPTUNA = ["optuna>=3.0,<6"]
# HyperOpt leaves its own dependencies unbounded; scipy and networkx are bounded here (0.3.0 is the oldest tested).
HYPEROPT = ["hyperopt>=0.3,<0.4", "numpy>=1.24,<3", "scipy>=1.10,<2", "networkx>=3,<4"]
# Ray 2.60's BayesOptSearch needs bayesian-optimization 1.x (2.0 removed its UtilityFunction); 1.5.1 is tested.
BAYESOPT = ["bayesian-optimization>=1.4,<2", "scikit-learn>=1.3,<2", "numpy>=1.24,<3", "scipy>=1.10,<2"]
# Ray 2.60's PB2 fits scikit-learn's Gaussian process (audition's port takes no pandas).
PB2 = ["scikit-learn>=1.3,<2", "numpy>=1.24,<3", "scipy>=1.10,<2"]
# ZOOpt leaves numpy and matplotlib unbounded; bounded here (0.4.2, the one release of the 0.4 line Ray 2.60 needs)
ZOOPT = ["zoopt>=0.4.2,<0.5", "numpy>=1.24,<3", "matplotlib>=3.5,<4"]
# Ray 2.60's NevergradSearch is written for nevergrad 1.x; 1.0.12 (recorded) pins bayesian-optimization==1.4.0, so
# the test extra, which has both, tests BayesOptSearch against Ray's recordings with 1.4.0 (and 1.5.1 without it)
NEVERGRAD = ["nevergrad>=1.0.12,<2", "numpy>=1.24,<3"]
# the tests compare suggestions with Ray's, recorded with 1.0.12: a later release may move them (and Ray's with them)
NEVERGRAD_TEST = ["nevergrad==1.0.12"]
# Ray 2.60's TuneBOHB: hpbandster's BOHB generator (0.7.4, its last release) over a ConfigSpace (1.x: Ray's calls);
# hpbandster leaves its own dependencies unbounded, bounded here (netifaces builds from source: gcc and headers)
BOHB = ["hpbandster>=0.7.4,<0.8", "ConfigSpace>=1.2,<2", "statsmodels>=0.14,<1", "Pyro4>=4.80,<5", "serpent>=1.41,<2",
        "netifaces>=0.11,<0.12", "numpy>=1.24,<3", "scipy>=1.10,<2"]
BOHB_TEST = ["hpbandster==0.7.4", "ConfigSpace==1.2.2", "statsmodels>=0.14,<0.16"]  # (recorded with them)
# MLflow's client without its server (the same `mlflow` module); 2.x and 3.x have the calls Ray 2.60 makes
MLFLOW = ["mlflow-skinny>=2.10,<4"]
MLFLOW_TEST = ["mlflow-skinny==3.18.0"]  # (recorded with it: tests/data/ray_mlflow.json)
# W&B's client; the tests read its offline run files, whose format is its own (recorded with 0.31.0)
WANDB = ["wandb>=0.17,<1", "numpy>=1.24,<3"]
WANDB_TEST = ["wandb==0.31.0"]
# Comet's client; the tests read its offline experiments, whose format is its own (recorded with 3.58.8)
COMET = ["comet_ml>=3.31,<4"]
COMET_TEST = ["comet_ml==3.58.8"]
PANDAS = ["pandas>=1.5,<4"]
# actors.integration's callbacks (Ray's ray.tune.integration.xgboost / .lightgbm); the tests take xgboost-cpu, the
# same module without the CUDA libraries (install one of the two, never both: they share the xgboost package)
XGBOOST = ["xgboost>=2.1,<4"]
# lightgbm 4.6 is the oldest whose lightgbm.cv names its results as 4.7's (4.3-4.5: "cv_agg-valid binary_error-mean")
LIGHTGBM = ["lightgbm>=4.6,<5"]
GBDT_TEST = ["xgboost-cpu>=2.1.1,<4", "lightgbm>=4.6,<5", "scikit-learn>=1.3,<2"]
# actors.integration.pytorch_lightning (Ray's ray.tune.integration.pytorch_lightning); bring your own torch
LIGHTNING = ["lightning>=2.4,<3"]
# the tests compare trained values with Ray's, recorded with these; torch 2.13.0 is the CPU build this machine
# kind keeps on disk (/opt/wheels: pip takes it for ==2.13.0, where a range would download a CUDA build)
LIGHTNING_TEST = ["torch==2.13.0", "lightning==2.6.6"]
# actors.integration.keras (Ray's ray.tune.integration.keras): Keras 3, with the backend you use (TensorFlow, ...)
KERAS = ["keras>=3,<4"]
KERAS_TEST = ["tensorflow-cpu==2.21.0"]  # (recorded with it: tests/data/ray_keras.json)
# a driver that ran JAX gets a fresh actor system (a forked trial's JAX hangs): measured and tested with this one
JAX_TEST = ["jax[cpu]==0.10.2"]
# the same for polars (a forked trial's first group_by hangs once the driver's pool exists)
POLARS_TEST = ["polars==2.1.0"]
TENSORBOARD = ["tensorboardX>=2.6,<3"]
# The dashboard's web stack; plotly is used only for the plotly.min.js it ships (served, never fetched from a CDN).
DASHBOARD = ["starlette>=0.40,<2", "uvicorn>=0.30,<1", "plotly>=5.20,<8"]
# The dashboard's browser tests: Starlette's TestClient needs httpx2 (Starlette 1.10 deprecates httpx, a later
# release may drop it) or, before Starlette knew httpx2, httpx; Playwright drives the OS's Chromium
# (executable_path; its own browser downloads are not used).
TEST_CLIENT = ["httpx>=0.27,<1", "httpx2>=2.16,<3"]
BROWSER_TEST = ["playwright>=1.45,<2"]
DOCS = ["mkdocs>=1.6,<2", "mkdocstrings[python]>=0.25,<2", "mkdocs-material>=9.5,<10"]

setup(
    name="audition",
    version="0.1.0",
    description="Hyperparameter tuning on Thespian actors, with Ray Tune's API",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    # every package, found (a hand-kept list left actors.testing out of non-editable installs)
    packages=find_packages(include=["actors", "actors.*", "storage", "storage.*"]),
    package_data={"actors._dashboard": ["static/*"]},
    install_requires=CORE,
    extras_require={
        "s3": S3,
        "optuna": OPTUNA,
        "hyperopt": HYPEROPT,
        "bayesopt": BAYESOPT,
        "pb2": PB2,
        "zoopt": ZOOPT,
        "nevergrad": NEVERGRAD,
        "bohb": BOHB,
        "mlflow": MLFLOW,
        "wandb": WANDB,
        "comet": COMET,
        "xgboost": XGBOOST,
        "lightgbm": LIGHTGBM,
        "lightning": LIGHTNING,
        "keras": KERAS,
        "pandas": PANDAS,
        "plot": PLOT,
        "tensorboard": TENSORBOARD,
        "docs": DOCS,
        "dashboard": DASHBOARD,
        # the floors stage's (.ci/run): what the S3-marked tests need (plots and the dashboard read S3 too),
        # without the other optional libraries
        "test-s3": TEST + S3 + S3_TEST + PLOT + DASHBOARD + TEST_CLIENT + ["moto[server]>=5.0,<6"],
        "test": TEST + S3 + PLOT + DOCS + OPTUNA + HYPEROPT + BAYESOPT + PB2 + PANDAS + TENSORBOARD + DASHBOARD
        + TEST_CLIENT + BROWSER_TEST + S3_TEST + GBDT_TEST + ZOOPT + NEVERGRAD_TEST + MLFLOW_TEST + WANDB_TEST
        + COMET_TEST + LIGHTNING_TEST + KERAS_TEST + JAX_TEST + POLARS_TEST + BOHB + BOHB_TEST
        + ["moto[server]>=5.0,<6", "pillow>=9,<14"],
    },
    entry_points={"console_scripts": ["audition=actors._cli.main:main"]},
)
