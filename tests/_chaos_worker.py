"""``audition worker`` with the chaos harness's storage stall installed (see tests/_chaos.py).

Usage: ``python tests/_chaos_worker.py STALL_FLAG worker --leader HOST:PORT ...``: the stall is
installed before the worker's actor system forks, so its trial processes inherit it.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from actors._cli.main import main
    from tests._chaos_checks import install_stall

    install_stall(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
