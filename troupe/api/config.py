"""Load a KubeSchedulerConfiguration and resolve each profile to ordered plugin lists.

``troupe.cli`` calls ``load_config_file`` at start-up; ``troupe.scheduler`` builds one
framework per ``ResolvedProfile`` from ``points`` and ``args``. Plugins live in a
higher layer, so the caller passes the catalog of what exists (``PluginDescriptor``
per plugin name) and this module never imports a plugin. The catalog also says which
plugins make up the default profile and with which score weights (upstream's
``getDefaultPlugins``), in its own order: ``troupe.plugins.registry`` fills both in.

Resolution follows upstream exactly: the custom ``multiPoint`` set is merged into
the default one (``mergePluginSet`` in ``apis/config/v1/default_plugins.go``), then
every extension point is expanded from ``multiPoint`` the way
``expandMultiPointPlugins`` in ``framework/runtime/framework.go`` does it. Every
problem found is collected into one ``ConfigError`` so a user fixes a file in one
pass; the model and its error wording live in ``troupe.api.config_model``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pydantic
import yaml
from pydantic import ValidationError

from troupe.api.config_errors import did_you_mean
from troupe.api.config_model import (
    API_VERSION,
    DEFAULT_MAX_BINDING_CONCURRENCY,
    EXTENSION_POINTS,
    KIND,
    MULTI_POINT,
    ClientConnectionConfiguration,
    ConfigError,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
    Loc,
    PartialGangPolicy,
    PluginSet,
    format_loc,
    pop_type_meta,
    profile_models,
    profile_scheduler_name,
    validate_settings,
    validation_problems,
)

__all__ = [
    "EXTENSION_POINTS",
    "ClientConnectionConfiguration",
    "ConfigError",
    "LeaderElectionConfiguration",
    "PluginDescriptor",
    "PluginRef",
    "ResolvedConfig",
    "ResolvedProfile",
    "default_plugin_set",
    "load_config",
    "load_config_file",
]


@dataclass(frozen=True)
class PluginDescriptor:
    """What the config layer needs to know about one registered plugin."""

    name: str
    args_model: type[pydantic.BaseModel] | None  # None: the plugin takes no args
    extension_points: frozenset[str]  # camelCase config names, e.g. {"filter", "score"}
    in_default_profile: bool = False  # in the default multiPoint set
    default_weight: int = 0  # its score weight there; 0: unset, which scores as 1


@dataclass(frozen=True)
class PluginRef:
    """A plugin at one extension point; ``weight`` is its score weight, 0 elsewhere."""

    name: str
    weight: int


@dataclass(frozen=True)
class ResolvedProfile:
    """One profile, ready for the framework: plugins per point and their args."""

    scheduler_name: str
    percentage_of_nodes_to_score: int  # the profile's override, else the global value
    points: Mapping[str, tuple[PluginRef, ...]]  # every extension point, in run order
    args: Mapping[str, pydantic.BaseModel]  # validated args of each enabled plugin that has any
    # A gang left partly bound past its timeout: "Evict" its bound members, or "Keep".
    partial_gang_policy: PartialGangPolicy = "Evict"
    # KEP-5732: the share of a topology gang's feasible placements scored (0: adaptive).
    percentage_of_placements_to_score: int = 0

    def names(self, point: str) -> tuple[str, ...]:
        return tuple(ref.name for ref in self.points[point])

    @property
    def enabled(self) -> tuple[str, ...]:
        """Every plugin used at some extension point, in first-use order."""
        return tuple(dict.fromkeys(ref.name for refs in self.points.values() for ref in refs))


@dataclass(frozen=True)
class ResolvedConfig:
    """The whole validated configuration; times are seconds."""

    parallelism: int
    percentage_of_nodes_to_score: int
    pod_initial_backoff_seconds: int
    pod_max_backoff_seconds: int
    pod_max_in_unschedulable_pods_duration: float  # seconds
    assumed_pod_ttl_seconds: int
    binding_concurrency: int
    # Bindings in flight may grow to this as the API server's latency asks
    # (troupe.scheduler.loop.binding_limit); at least binding_concurrency.
    max_binding_concurrency: int
    gang_schedule_timeout_seconds: int
    leader_election: LeaderElectionConfiguration  # durations in float seconds
    client_connection: ClientConnectionConfiguration
    profiles: tuple[ResolvedProfile, ...]

    def profile(self, scheduler_name: str) -> ResolvedProfile | None:
        """The profile for a pod's ``spec.schedulerName``, or None if it is not ours."""
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)


Catalog = Mapping[str, PluginDescriptor]


def default_plugin_set(catalog: Catalog) -> tuple[tuple[str, int], ...]:
    """The default multiPoint set, in catalog order: (name, score weight) of every
    plugin the catalog puts in the default profile, the weight 0 when unset."""
    return tuple(
        (name, descriptor.default_weight)
        for name, descriptor in catalog.items()
        if descriptor.in_default_profile
    )


def load_config_file(
    path: str | os.PathLike[str],
    catalog: Catalog,
    *,
    default_multipoint: Sequence[tuple[str, int]] | None = None,
) -> ResolvedConfig:
    """Read and resolve the YAML (or JSON) configuration file at ``path``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError([f"{os.fspath(path)}: cannot read: {exc.strerror}"]) from exc
    return load_config(text, catalog, default_multipoint=default_multipoint)


def load_config(
    raw: Mapping[str, Any] | str,
    catalog: Catalog,
    *,
    default_multipoint: Sequence[tuple[str, int]] | None = None,
) -> ResolvedConfig:
    """Validate ``raw`` (a mapping, or YAML text) and resolve every profile.

    Raises ``ConfigError`` listing every problem. ``default_multipoint`` replaces the
    default set the catalog gives (``default_plugin_set``).
    """
    defaults = default_plugin_set(catalog) if default_multipoint is None else default_multipoint
    _check_catalog(catalog, defaults)
    if isinstance(raw, str):
        try:
            raw = yaml.safe_load(raw) or {}
        except yaml.YAMLError as exc:
            raise ConfigError([f"invalid YAML: {exc}"]) from exc
    if not isinstance(raw, Mapping):
        raise ConfigError([f"configuration must be a mapping, got {type(raw).__name__}"])

    problems: list[str] = []
    top = validate_settings(raw, problems)

    models = profile_models(raw.get("profiles"), problems)
    resolved: list[ResolvedProfile | None] = []
    for i, (model, partial) in enumerate(models):
        if model is None:
            resolved.append(None)
            continue
        name = profile_scheduler_name(i, model, len(models), problems)
        profile = _resolve_profile(i, model, name, top, catalog, defaults, problems)
        resolved.append(None if partial else profile)
    problems += _cross_profile_problems(resolved)
    if problems:
        raise ConfigError(problems)
    return _resolved_config(top, tuple(p for p in resolved if p is not None))


# --- one profile -------------------------------------------------------------------


def _resolve_profile(
    i: int,
    model: KubeSchedulerProfile,
    scheduler_name: str,
    top: KubeSchedulerConfiguration,
    catalog: Catalog,
    defaults: Sequence[tuple[str, int]],
    problems: list[str],
) -> ResolvedProfile:
    prefix = f"profiles[{i}]"
    for point in (MULTI_POINT, *EXTENSION_POINTS):
        problems.extend(_plugin_set_problems(f"{prefix}.plugins.{point}", point, model, catalog))
    # A point whose list names an unknown plugin (there or at multiPoint) was already
    # reported; its count of queue-sort or bind plugins would only repeat that typo.
    misnamed = {
        point
        for point in (MULTI_POINT, *EXTENSION_POINTS)
        if any(p.name not in catalog for p in model.plugins.at(point).enabled)
    }
    multipoint = _merge_multipoint(defaults, model.plugins.multi_point, catalog)
    points = {
        point: _expand(point, multipoint, model.plugins.at(point), catalog)
        for point in EXTENSION_POINTS
    }
    if not {"queueSort", MULTI_POINT} & misnamed:
        problems.extend(_queue_sort_problems(prefix, [ref.name for ref in points["queueSort"]]))
    if not points["bind"] and not {"bind", MULTI_POINT} & misnamed:
        problems.append(f"{prefix}.plugins.bind: at least one bind plugin is required")

    configured = _plugin_config_args(("profiles", i), model, catalog, problems)
    enabled = dict.fromkeys(ref.name for refs in points.values() for ref in refs)
    args: dict[str, pydantic.BaseModel] = {}
    for name in enabled:
        args_model = catalog[name].args_model
        if args_model is None:
            continue
        if name in configured:
            args[name] = configured[name]
            continue
        # No pluginConfig entry: the plugin runs with its default args, as upstream.
        try:
            args[name] = args_model.model_validate({})
        except ValidationError as exc:
            needed = "; ".join(validation_problems(exc))
            problems.append(f"{prefix}.pluginConfig: plugin {name!r} needs args ({needed})")
    pct = model.percentage_of_nodes_to_score
    return ResolvedProfile(
        scheduler_name=scheduler_name,
        percentage_of_nodes_to_score=top.percentage_of_nodes_to_score if pct is None else pct,
        points=MappingProxyType(points),
        args=MappingProxyType(args),
        partial_gang_policy=model.partial_gang_policy,
        percentage_of_placements_to_score=(
            top.percentage_of_placements_to_score
            if model.percentage_of_placements_to_score is None
            else model.percentage_of_placements_to_score
        ),
    )


def _queue_sort_problems(prefix: str, queue_sort: list[str]) -> list[str]:
    if not queue_sort:
        return [f"{prefix}.plugins.queueSort: exactly one queue-sort plugin is required"]
    if len(queue_sort) > 1:
        return [
            f"{prefix}.plugins.queueSort: only one queue-sort plugin may be enabled, "
            f"found {queue_sort}"
        ]
    return []


def _plugin_set_problems(
    path: str, point: str, model: KubeSchedulerProfile, catalog: Catalog
) -> list[str]:
    out = []
    seen: set[str] = set()
    for j, plugin in enumerate(model.plugins.at(point).enabled):
        at = f"{path}.enabled[{j}]"
        descriptor = catalog.get(plugin.name)
        if descriptor is None:
            out.append(f"{at}.name: {unknown_plugin(plugin.name, catalog)}")
        elif point != MULTI_POINT and point not in descriptor.extension_points:
            out.append(f"{at}.name: plugin {plugin.name!r} does not implement {point}")
        if plugin.name in seen:
            out.append(f"{at}.name: plugin {plugin.name!r} is enabled more than once")
        seen.add(plugin.name)
        # Upstream silently turns weight 0 into 1; troupe rejects it as a likely mistake.
        if plugin.weight is not None and plugin.weight < 1:
            out.append(f"{at}.weight: must be a positive integer, got {plugin.weight}")
    # Unknown names under ``disabled`` are ignored, as upstream does (a set lookup).
    return out


def _merge_multipoint(
    defaults: Sequence[tuple[str, int]], custom: PluginSet, catalog: Catalog
) -> list[tuple[str, int | None]]:
    """Upstream ``mergePluginSet``: custom entries replace defaults in place, others follow."""
    disabled = {p.name for p in custom.disabled}
    overrides = {p.name: p.weight for p in custom.enabled if p.name in catalog}
    merged: list[tuple[str, int | None]] = []
    replaced: set[str] = set()
    if "*" not in disabled:
        for name, weight in defaults:
            if name in disabled:
                continue
            if name in overrides:
                merged.append((name, overrides[name]))
                replaced.add(name)
            else:
                merged.append((name, weight or None))
    merged += [(name, w) for name, w in overrides.items() if name not in replaced]
    return merged


def _expand(
    point: str,
    multipoint: Sequence[tuple[str, int | None]],
    specific: PluginSet,
    catalog: Catalog,
) -> tuple[PluginRef, ...]:
    """Upstream ``expandMultiPointPlugins`` for one extension point."""
    explicit: dict[str, int | None] = {}
    for plugin in specific.enabled:
        descriptor = catalog.get(plugin.name)
        if descriptor is not None and point in descriptor.extension_points:
            explicit.setdefault(plugin.name, plugin.weight)
    disabled = {p.name for p in specific.disabled}
    from_multipoint: dict[str, int | None] = {}
    overridden: set[str] = set()
    # "*" at a point keeps multiPoint out of it entirely; only explicit plugins remain.
    if "*" not in disabled:
        for name, weight in multipoint:
            if point not in catalog[name].extension_points or name in disabled:
                continue
            if name in explicit:
                # Enabled at the point itself: that entry's position and weight win.
                overridden.add(name)
            else:
                from_multipoint.setdefault(name, weight)
    # Order: overridden explicit plugins, then multiPoint ones, then other explicit ones.
    ordered: list[tuple[str, int | None]] = [
        *((n, w) for n, w in explicit.items() if n in overridden),
        *from_multipoint.items(),
        *((n, w) for n, w in explicit.items() if n not in overridden),
    ]
    if point not in ("score", "placementScore"):
        return tuple(PluginRef(name, 0) for name, _ in ordered)
    # getScoreWeights: an unset weight counts as 1.
    return tuple(PluginRef(name, weight or 1) for name, weight in ordered)


def _plugin_config_args(
    prefix: Loc, model: KubeSchedulerProfile, catalog: Catalog, problems: list[str]
) -> dict[str, pydantic.BaseModel]:
    """Validate every pluginConfig entry; upstream validates args even of unused plugins."""
    out: dict[str, pydantic.BaseModel] = {}
    first_at: dict[str, int] = {}
    for k, entry in enumerate(model.plugin_config):
        loc: Loc = (*prefix, "pluginConfig", k)
        path = format_loc(loc)
        descriptor = catalog.get(entry.name)
        if descriptor is None:
            problems.append(f"{path}.name: {unknown_plugin(entry.name, catalog)}")
            continue
        if entry.name in first_at:
            problems.append(
                f"{path}.name: duplicate pluginConfig for plugin {entry.name!r}, "
                f"first at pluginConfig[{first_at[entry.name]}]"
            )
            continue
        first_at[entry.name] = k
        args = dict(entry.args or {})
        problems.extend(pop_type_meta(path, entry.name, args))
        if descriptor.args_model is None:
            if args:
                problems.append(f"{path}.args: plugin {entry.name!r} takes no args")
            continue
        try:
            out[entry.name] = validate_args(descriptor.args_model, args)
        except ValidationError as exc:
            problems.extend(validation_problems(exc, (*loc, "args"), descriptor.args_model))
    return out


def unknown_plugin(name: str, catalog: Catalog) -> str:
    return f"unknown plugin {name!r}{did_you_mean(name, catalog)}"


def validate_args(args_model: type[pydantic.BaseModel], args: Mapping[str, Any]) -> Any:
    """A plugin's args as kube-scheduler decodes them: from JSON, strictly. A quoted
    number (``"10"``), a quoted bool (``"true"``) or a fraction where an integer goes
    is an error, as Go's decoder makes it, where pydantic's default mode would
    convert it. Through JSON so nested objects are read as mappings in strict mode
    too (a strict Python validation wants instances of the nested dataclasses)."""
    text = json.dumps(args, default=str)
    return args_model.model_validate_json(text, strict=True)


# --- across profiles ---------------------------------------------------------------


def _cross_profile_problems(profiles: Sequence[ResolvedProfile | None]) -> list[str]:
    out = []
    seen: set[str] = set()
    for i, profile in enumerate(profiles):
        if profile is None or not profile.scheduler_name:
            continue
        if profile.scheduler_name in seen:
            out.append(
                f"profiles[{i}].schedulerName: duplicate scheduler name {profile.scheduler_name!r}"
            )
        seen.add(profile.scheduler_name)
    # validateCommonQueueSort: all profiles share one queue, so they must sort it alike.
    sorted_by = [(i, p) for i, p in enumerate(profiles) if p and len(p.points["queueSort"]) == 1]
    if sorted_by:
        first_i, first = sorted_by[0]
        first_name = first.names("queueSort")[0]
        for i, profile in sorted_by[1:]:
            name = profile.names("queueSort")[0]
            if name != first_name:
                out.append(
                    f"profiles[{i}].plugins.queueSort: must be the same for all profiles, "
                    f"got {name!r} but profiles[{first_i}] uses {first_name!r}"
                )
            elif profile.args.get(name) != first.args.get(name):
                out.append(
                    f"profiles[{i}].pluginConfig: args of queue-sort plugin {name!r} "
                    "must be the same for all profiles"
                )
    return out


def _check_catalog(catalog: Catalog, defaults: Iterable[tuple[str, int]]) -> None:
    """Programming errors in the caller's wiring, not in the user's file."""
    for key, descriptor in catalog.items():
        if key != descriptor.name:
            raise ValueError(f"catalog key {key!r} names plugin {descriptor.name!r}")
        unknown = descriptor.extension_points - set(EXTENSION_POINTS)
        if unknown:
            raise ValueError(f"plugin {key!r} declares unknown extension points {sorted(unknown)}")
        if descriptor.default_weight < 0:
            raise ValueError(f"plugin {key!r} has a negative default weight")
        if descriptor.default_weight and not descriptor.in_default_profile:
            raise ValueError(f"plugin {key!r} has a default weight but is not a default plugin")
        scores = descriptor.extension_points & {"score", "placementScore"}
        if descriptor.default_weight and not scores:
            raise ValueError(f"plugin {key!r} has a default weight but does not score")
    missing = [name for name, _ in defaults if name not in catalog]
    if missing:
        raise ValueError(f"default plugins missing from the catalog: {missing}")


def _resolved_config(
    cfg: KubeSchedulerConfiguration, profiles: tuple[ResolvedProfile, ...]
) -> ResolvedConfig:
    return ResolvedConfig(
        parallelism=cfg.parallelism,
        percentage_of_nodes_to_score=cfg.percentage_of_nodes_to_score,
        pod_initial_backoff_seconds=cfg.pod_initial_backoff_seconds,
        pod_max_backoff_seconds=cfg.pod_max_backoff_seconds,
        pod_max_in_unschedulable_pods_duration=cfg.pod_max_in_unschedulable_pods_duration,
        assumed_pod_ttl_seconds=cfg.assumed_pod_ttl_seconds,
        binding_concurrency=cfg.binding_concurrency,
        max_binding_concurrency=max(
            cfg.binding_concurrency, cfg.max_binding_concurrency or DEFAULT_MAX_BINDING_CONCURRENCY
        ),
        gang_schedule_timeout_seconds=cfg.gang_schedule_timeout_seconds,
        leader_election=cfg.leader_election,
        client_connection=cfg.client_connection,
        profiles=profiles,
    )


def config_document(**fields: Any) -> dict[str, Any]:
    """A configuration mapping with apiVersion and kind filled in (for code that
    builds a profile rather than reading a file)."""
    return {"apiVersion": API_VERSION, "kind": KIND, **fields}
