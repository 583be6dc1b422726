"""Pod (anti-)affinity terms compiled once per pod: namespaces, selector, topology key.

Called by the plugin (``plugin.py``) for the incoming pod and, through the
``CarriedCounts`` extractor ``carried_terms``, for every placed pod with affinity,
always on the pod's ``PodRecord`` (what the NodeTable's change log keeps of a pod).
The compiled form is cached on the record's ``AffinityTerms`` (the terms never
change), so each pod's terms are parsed once, and a pod without terms costs nothing.

Namespaces follow upstream ``AffinityTerm`` (``pkg/scheduler/framework/types.go``):
a term looks in the union of ``namespaces`` and the namespaces whose labels its
``namespaceSelector`` matches; an empty selector ``{}`` matches every namespace; a
null selector with no ``namespaces`` means the owning pod's own namespace. A term
compiled here keeps a non-empty selector as a selector (``Term.namespace_selector``),
so what it matches depends on namespace labels:

- a placed pod's term is matched against an incoming pod together with the labels
  of the incoming pod's namespace (upstream ``AffinityTerm.Matches(pod, nsLabels)``);
- the incoming pod's own terms count pods by namespace name, so ``resolve`` turns
  the selector into the names it selects now (upstream
  ``mergeAffinityTermNamespacesIfNotEmpty``); ``resolved_terms`` caches that on
  the pod's PodInfo (not on its record: only the incoming pod needs it, and the
  change log keeps records after their pods are gone) until the namespace labels
  change.

``matchLabelKeys`` / ``mismatchLabelKeys`` (KEP-3633) are ANDed into the selector as
``key In (value)`` / ``key NotIn (value)`` from the owning pod's labels. The API server
normally did this already when the pod was created; adding the same requirement again
changes nothing, so both kinds of pods are handled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from troupe.api.objects import LabelSelector, LabelSelectorRequirement, PodAffinityTerm
from troupe.api.podcounts import PodClause, PodMatcher
from troupe.api.podinfo import PodInfo, PodRecord

_COMPILED_KEY: Final = "InterPodAffinity"
_RESOLVED_KEY: Final = "InterPodAffinity.resolved"

CarriedKind = Literal["required-anti-affinity", "required-affinity", "preferred"]


NamespaceSelection = Callable[[PodClause], frozenset[str]]
"""The names of the namespaces whose labels a namespace selector matches."""


def namespace_selector_matches(selector: PodClause, namespace_labels: Mapping[str, str]) -> bool:
    """``selector`` (a ``PodClause`` over every namespace, built from a
    ``namespaceSelector``) matches a namespace with these labels."""
    return selector.matches("", namespace_labels)


@dataclass(frozen=True, slots=True)
class Term:
    """One term: pods matching ``clause`` in the domain of ``topology_key``.

    ``clause.namespaces`` are the namespaces the term names (None: every namespace).
    ``namespace_selector``, a non-empty ``namespaceSelector`` not resolved into
    names, also admits the pods of namespaces whose labels it matches."""

    clause: PodClause
    topology_key: str
    namespace_selector: PodClause | None = None
    # ``clause``'s pod selector in any namespace, for pods the selector admits.
    any_namespace_clause: PodClause | None = field(default=None, compare=False, repr=False)

    def matches(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str] | None = None,
    ) -> bool:
        """A pod in ``namespace`` with ``labels`` matches. ``namespace_labels``, the
        labels of ``namespace`` (None: unknown, matched as no labels, as upstream's
        lookup does), matter only while the term has a namespace selector."""
        if self.clause.matches(namespace, labels):
            return True
        selector, any_namespace = self.namespace_selector, self.any_namespace_clause
        if selector is None or any_namespace is None:
            return False
        return namespace_selector_matches(
            selector, namespace_labels or {}
        ) and any_namespace.matches(namespace, labels)

    def resolve(self, selected: NamespaceSelection) -> Term:
        """This term with its namespace selector replaced by the names it selects."""
        names = self.clause.namespaces
        if self.namespace_selector is None or names is None:
            return self
        clause = replace(self.clause, namespaces=names | selected(self.namespace_selector))
        return Term(clause, self.topology_key)

    def selects_namespace(self, name: str, namespace_labels: Mapping[str, str] | None) -> bool:
        """The term looks in namespace ``name`` when it has these labels (None: the
        namespace does not exist)."""
        names = self.clause.namespaces
        if names is None or name in names:
            return True
        selector = self.namespace_selector
        return (
            selector is not None
            and namespace_labels is not None
            and namespace_selector_matches(selector, namespace_labels)
        )


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
    # Some required or preferred term still matches namespaces by label (``resolve``).
    has_namespace_selector: bool = False

    @property
    def affinity_matcher(self) -> PodMatcher:
        """Pods matching *all* required affinity terms (upstream counts only those)."""
        return PodMatcher(tuple(t.clause for t in self.required_affinity))

    def matches_all_affinity(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str] | None = None,
    ) -> bool:
        """Upstream ``podMatchesAllAffinityTerms``: false when there are no terms."""
        terms = self.required_affinity
        return bool(terms) and all(t.matches(namespace, labels, namespace_labels) for t in terms)

    def matches_any_anti_affinity(
        self,
        namespace: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str] | None = None,
    ) -> bool:
        return any(
            t.matches(namespace, labels, namespace_labels) for t in self.required_anti_affinity
        )

    def resolve(self, selected: NamespaceSelection) -> PodTerms:
        """The same terms with every namespace selector replaced by the names it
        selects; ``carried`` (what placed pods are matched with) is kept as it is."""
        if not self.has_namespace_selector:
            return self
        return PodTerms(
            tuple(t.resolve(selected) for t in self.required_affinity),
            tuple(t.resolve(selected) for t in self.required_anti_affinity),
            tuple((w, t.resolve(selected)) for w, t in self.preferred_affinity),
            tuple((w, t.resolve(selected)) for w, t in self.preferred_anti_affinity),
            self.carried,
        )


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
    pods = term_selector(term, pod.labels)
    ns_selector = term.namespace_selector
    if ns_selector is None:
        # upstream getNamespacesFromPodAffinityTerm
        names = frozenset(term.namespaces) if term.namespaces else frozenset({pod.namespace})
        return Term(PodClause.of(names, pods), term.topology_key)
    if not ns_selector.match_labels and not ns_selector.match_expressions:
        # labels.Everything(): every namespace, whatever ``namespaces`` says.
        return Term(PodClause.of(None, pods), term.topology_key)
    clause = PodClause.of(frozenset(term.namespaces), pods)
    return Term(
        clause,
        term.topology_key,
        PodClause.of(None, ns_selector),
        replace(clause, namespaces=None),
    )


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
    by_label = any(c.term.namespace_selector is not None for c in carried)
    terms = PodTerms(affinity, anti, preferred, preferred_anti, carried, by_label)
    given.compiled[_COMPILED_KEY] = terms
    return terms


def resolved_terms(info: PodInfo, selected: NamespaceSelection, generation: int) -> PodTerms:
    """``info``'s terms with namespace selectors resolved by ``selected``, which
    answers from namespace labels at ``generation`` (cached on the PodInfo until the
    selection or the generation changes).

    The resolved terms are the incoming pod's alone (what its own terms count), so
    they are kept on the PodInfo, which is freed with the pod, not on its
    ``PodRecord``, which the NodeTable's change log keeps after the pod is gone."""
    terms = pod_terms(info.record)
    if not terms.has_namespace_selector:
        return terms
    cached = info.extra.get(_RESOLVED_KEY)
    if (
        isinstance(cached, _Resolved)
        and cached.selected is selected
        and cached.generation == generation
    ):
        return cached.terms
    resolved = terms.resolve(selected)
    info.extra[_RESOLVED_KEY] = _Resolved(selected, generation, resolved)
    return resolved


@dataclass(frozen=True, slots=True)
class _Resolved:
    selected: NamespaceSelection
    generation: int
    terms: PodTerms


def carried_terms(pod: PodRecord) -> Sequence[Carried]:
    """The ``CarriedCounts`` extractor: what a placed pod carries."""
    return pod_terms(pod).carried
