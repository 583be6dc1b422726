"""The one error the what-if engine raises for what a user can cause: a target that
is not there or has no pending pod, a cluster that cannot be read, an object that
cannot be created in the embedded cluster. The commands print it as it is."""

from __future__ import annotations


class WhatIfError(Exception):
    """A what-if run that cannot be made; the message names the object or flag."""


class LoadError(WhatIfError):
    """An object of a snapshot (or of ``troupe replay --add``) that the embedded
    cluster cannot create."""
