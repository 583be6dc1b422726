"""``python -m troupe``: the same as the ``troupe`` command."""

import sys

from troupe.cli import main

sys.exit(main())
