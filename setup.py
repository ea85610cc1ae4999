"""audition: hyperparameter tuning on Thespian actors with Ray Tune's API."""

from setuptools import setup

TEST = [
    "pytest>=8",
    "pytest-timeout>=2.3",
    "hypothesis>=6.100",
    "ruff>=0.6",
    "mypy>=1.10",
    "psutil>=5.9",
]
S3 = ["s3fs", "boto3"]
PLOT = ["matplotlib>=3.5"]
DOCS = ["mkdocs>=1.6", "mkdocstrings[python]>=0.25", "mkdocs-material>=9.5"]

setup(
    name="audition",
    version="0.1.0",
    description="Hyperparameter tuning on Thespian actors, with Ray Tune's API",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=["actors", "actors.schedulers", "actors.search", "actors.stoppers", "storage"],
    install_requires=["thespian>=4.0", "cloudpickle>=2.0", "fsspec>=2023.1", "rich>=13"],
    extras_require={
        "s3": S3,
        "optuna": ["optuna>=3.0"],
        "pandas": ["pandas"],
        "plot": PLOT,
        "tensorboard": ["tensorboardX>=2.6"],
        "docs": DOCS,
        "test": TEST + S3 + PLOT + DOCS + ["moto[server]>=5.0", "optuna>=3.0", "pandas", "pillow", "tensorboardX>=2.6"],
    },
    entry_points={"console_scripts": ["audition=actors._cli:main"]},
)
