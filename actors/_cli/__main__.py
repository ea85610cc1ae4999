"""``python -m actors._cli``: the ``audition`` command."""

import sys

from actors._cli.main import main

sys.exit(main())
