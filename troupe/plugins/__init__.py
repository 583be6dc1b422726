"""The scheduling plugins: one package per plugin, and the registry.

Each plugin class spells its own ``name`` (upstream's per-plugin ``Name`` constant);
everything else refers to a plugin through its class or the registry.

``troupe.plugins.registry.default_registry`` lists every built-in plugin;
``troupe.scheduler`` instantiates the ones a profile enables. Plugins never import
each other nor ``troupe.scheduler`` (import-linter enforces the layers).
"""
