"""The ``audition`` command line: status, plot, resume, migrate, worker.
"""

from actors._cli.main import main

__all__ = ["main"]
