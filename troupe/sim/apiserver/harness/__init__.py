"""What tests and benchmarks use to disturb the embedded API server and to watch it.

- ``faults.py``: injected failures and delays, cut watches, compaction
  (``ApiServer.faults``);
- ``ledger.py``: every accepted write with its sender and the Lease holder
  (``ApiServer.record_writes``), which ``bench chaos`` judges replicas by.
"""
