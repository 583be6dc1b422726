"""The object store of the embedded API server: etcd and the watch cache in one.

- ``store.py``: ``Store``, the writes (create, update, patch, delete) and the hooks
  they go through; ``reads.py``: ``StoreReads``, its base class: gets, lists, watches;
- ``strategy.py``: ``Strategy``, the per-kind hooks around every write (the kinds'
  own are in ``registry/``);
- ``watchers.py``: watch events and watchers; ``hub.py``: per-kind history and
  fan-out; ``subscription.py``: in-process watches; ``paging.py``: continue tokens;
- ``conversion.py`` (with ``podgroup_conversion.py``): a stored object as each served
  version shows it, and back.

Objects are plain JSON dicts, never mutated once stored. Storage knows no HTTP.
"""
