"""troupe: a gang-aware secondary scheduler for Kubernetes."""

__version__ = "0.1.0"
