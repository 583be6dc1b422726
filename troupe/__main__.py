"""``python -m troupe``: the same as the ``troupe`` command."""

from troupe.cli import entry

entry()
