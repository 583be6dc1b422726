"""The scheduling plugins: one package per plugin, their names and the registry.

``troupe.plugins.registry.default_registry`` lists every built-in plugin;
``troupe.scheduler`` instantiates the ones a profile enables. Plugins never import
each other nor ``troupe.scheduler`` (import-linter enforces the layers).
"""
