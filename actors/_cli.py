"""The ``audition`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from actors import __version__

    parser = argparse.ArgumentParser(prog="audition", description="Hyperparameter tuning on Thespian actors.")
    parser.add_argument("--version", action="version", version=f"audition {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
