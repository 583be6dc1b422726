"""Pod (anti-)affinity terms compiled once per pod: namespaces, selector, topology key.

Called by the plugin (``plugin.py``) for the incoming pod and, through the
``CarriedCounts`` extractor ``carried_terms``, for every placed pod with affinity,
always on the pod's ``PodRecord`` (what the NodeTable's change log keeps of a pod).
The compiled form is cached on the record's ``AffinityTerms`` (the terms never
change), so each pod's terms are parsed once, and a pod without terms costs nothing.

Namespaces follow upstream ``AffinityTerm``: ``namespaces`` when given, else the
owning pod's namespace; with a ``namespaceSelector`` the namespaces it selects are
added. troupe keeps no Namespace informer, so a selector cannot be evaluated against
namespace labels: an empty ``namespaceSelector: {}`` selects every namespace (as
upstream), and any other selector selects only the namespaces named in
``namespaces`` (none, if the list is empty).

``matchLabelKeys`` / ``mismatchLabelKeys`` (KEP-3633) are ANDed into the selector as
``key In (value)`` / ``key NotIn (value)`` from the owning pod's labels. The API server
normally did this already when the pod was created; adding the same requirement again
changes nothing, so both kinds of pods are handled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from troupe.api.objects import LabelSelector, LabelSelectorRequirement, PodAffinityTerm
from troupe.api.podcounts import PodClause, PodMatcher
from troupe.api.podinfo import PodRecord

_COMPILED_KEY: Final = "InterPodAffinity"

CarriedKind = Literal["required-anti-affinity", "required-affinity", "preferred"]


@dataclass(frozen=True, slots=True)
class Term:
    """One term: pods matching ``clause`` in the domain of ``topology_key``."""

    clause: PodClause
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return self.clause.matches(namespace, labels)


@dataclass(frozen=True, slots=True)
class Carried:
    """A term a placed pod carries towards incoming pods: its required anti-affinity
    (Filter), required affinity (scored with hardPodAffinityWeight) or a preferred term
    (``weight`` negative for anti-affinity)."""

    kind: CarriedKind
    weight: int
    term: Term


@dataclass(frozen=True, slots=True)
class PodTerms:
    required_affinity: tuple[Term, ...]
    required_anti_affinity: tuple[Term, ...]
    preferred_affinity: tuple[tuple[int, Term], ...]
    preferred_anti_affinity: tuple[tuple[int, Term], ...]
    carried: tuple[Carried, ...]

    @property
    def affinity_matcher(self) -> PodMatcher:
        """Pods matching *all* required affinity terms (upstream counts only those)."""
        return PodMatcher(tuple(t.clause for t in self.required_affinity))

    def matches_all_affinity(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Upstream ``podMatchesAllAffinityTerms``: false when there are no terms."""
        terms = self.required_affinity
        return bool(terms) and all(t.matches(namespace, labels) for t in terms)

    def matches_any_anti_affinity(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return any(t.matches(namespace, labels) for t in self.required_anti_affinity)


def term_namespaces(term: PodAffinityTerm, owner_namespace: str) -> frozenset[str] | None:
    """The namespaces ``term`` looks in; None: every namespace."""
    ns_selector = term.namespace_selector
    if (
        ns_selector is not None
        and not ns_selector.match_labels
        and not ns_selector.match_expressions
    ):
        return None
    if term.namespaces or ns_selector is not None:
        return frozenset(term.namespaces)
    return frozenset({owner_namespace})


def term_selector(term: PodAffinityTerm, owner_labels: Mapping[str, str]) -> LabelSelector | None:
    selector = term.label_selector
    if selector is None:
        return None
    extra = [
        LabelSelectorRequirement(key=k, operator="In", values=[owner_labels[k]])
        for k in term.match_label_keys
        if k in owner_labels
    ] + [
        LabelSelectorRequirement(key=k, operator="NotIn", values=[owner_labels[k]])
        for k in term.mismatch_label_keys
        if k in owner_labels
    ]
    if not extra:
        return selector
    return LabelSelector(
        match_labels=dict(selector.match_labels),
        match_expressions=[*selector.match_expressions, *extra],
    )


def _compile(term: PodAffinityTerm, pod: PodRecord) -> Term:
    namespaces = term_namespaces(term, pod.namespace)
    return Term(PodClause.of(namespaces, term_selector(term, pod.labels)), term.topology_key)


def _compile_all(terms: Sequence[PodAffinityTerm], pod: PodRecord) -> tuple[Term, ...]:
    return tuple(_compile(t, pod) for t in terms)


_NO_TERMS: Final = PodTerms((), (), (), (), ())


def pod_terms(pod: PodRecord) -> PodTerms:
    """``pod``'s compiled terms (cached on its ``AffinityTerms``)."""
    given = pod.affinity
    if given is None:
        return _NO_TERMS
    cached = given.compiled.get(_COMPILED_KEY)
    if isinstance(cached, PodTerms):
        return cached
    affinity = _compile_all(given.required_affinity, pod)
    anti = _compile_all(given.required_anti_affinity, pod)
    preferred = tuple(
        (w.weight, _compile(w.pod_affinity_term, pod)) for w in given.preferred_affinity
    )
    preferred_anti = tuple(
        (w.weight, _compile(w.pod_affinity_term, pod)) for w in given.preferred_anti_affinity
    )
    carried = (
        *(Carried("required-anti-affinity", 0, t) for t in anti),
        *(Carried("required-affinity", 0, t) for t in affinity),
        *(Carried("preferred", w, t) for w, t in preferred),
        *(Carried("preferred", -w, t) for w, t in preferred_anti),
    )
    terms = PodTerms(affinity, anti, preferred, preferred_anti, carried)
    given.compiled[_COMPILED_KEY] = terms
    return terms


def carried_terms(pod: PodRecord) -> Sequence[Carried]:
    """The ``CarriedCounts`` extractor: what a placed pod carries."""
    return pod_terms(pod).carried
