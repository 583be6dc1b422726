"""troupe benchmarks: ``python -m bench <name> [options]``; each prints its figures
and, as its last line, one JSON object."""
