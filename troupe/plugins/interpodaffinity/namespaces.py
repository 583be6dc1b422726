"""Namespace selectors resolved to names, once per change of the namespace labels.

Called by the plugin (PreFilter, PreScore, the queueing hints) for the incoming
pod's terms. Upstream lists its Namespace lister with the selector of every such
term in every PreFilter and PreScore (``mergeAffinityTermNamespacesIfNotEmpty``);
here the names a selector selects are kept until the labels move
(``NamespaceLister.generation``), so the replicas of one Deployment, which share
their selectors, resolve them once, and each pod's resolved terms are kept on its
PodInfo (``terms.resolved_terms``) for its next attempt.
"""

from __future__ import annotations

from collections.abc import Mapping

from troupe.api.framework import NamespaceLister
from troupe.api.podcounts import PodClause
from troupe.api.podinfo import PodInfo
from troupe.plugins.interpodaffinity.terms import (
    PodTerms,
    namespace_selector_matches,
    resolved_terms,
)


class SelectedNamespaces:
    """``selector -> names`` over one ``NamespaceLister``, cached per generation."""

    __slots__ = ("_generation", "_lister", "_names")

    def __init__(self, lister: NamespaceLister) -> None:
        self._lister = lister
        self._generation = -1
        self._names: dict[PodClause, frozenset[str]] = {}

    def __call__(self, selector: PodClause) -> frozenset[str]:
        generation = self._lister.generation
        if generation != self._generation:
            self._names.clear()
            self._generation = generation
        names = self._names.get(selector)
        if names is None:
            names = frozenset(
                name
                for name, labels in self._lister.items()
                if namespace_selector_matches(selector, labels)
            )
            self._names[selector] = names
        return names

    def labels_of(self, namespace: str) -> Mapping[str, str] | None:
        """``namespace``'s labels, None when unknown (then matched as no labels)."""
        return self._lister.labels_of(namespace)

    def terms_of(self, info: PodInfo) -> PodTerms:
        """``info``'s terms with their namespace selectors resolved as of now."""
        return resolved_terms(info, self, self._lister.generation)
