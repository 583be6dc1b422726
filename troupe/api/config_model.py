"""The KubeSchedulerConfiguration file as pydantic models, their checks and error wording.

These models are the edge where a user's YAML (the ``--config`` file or the
ConfigMap in ``manifests/``) becomes typed values. They mirror upstream
``k8s.io/kube-scheduler/config/v1`` field names (camelCase), reject unknown keys
the way upstream's strict decoder does, and add troupe's own top-level settings
(``assumedPodTTLSeconds``, ``bindingConcurrency``, ...). Defaults follow upstream
``SetDefaults_KubeSchedulerConfiguration`` except where troupe's name differs
(``troupe-scheduler`` for the profile name and the lease).

Only ``troupe.api.config`` calls this module: it validates the top level and each
profile separately (so one bad section does not hide the others), applies the
cross-field rules of upstream ``ValidateKubeSchedulerConfiguration``, and collects
every problem into one ``ConfigError`` (worded by ``troupe.api.config_errors``). The
models are strict, as upstream's decoder: ``weight: "5"`` is an error, not 5. Plugin
names and args are checked there, against the plugin catalog.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from troupe.api.config_errors import Loc, format_loc, validation_problems

__all__ = ["Loc", "format_loc", "validation_problems"]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "troupe-scheduler"
DEFAULT_MAX_BINDING_CONCURRENCY = 512
"""Bindings in flight at most when ``maxBindingConcurrency`` is not set (docs/configuration.md)."""

EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    # KEP-5710: after a failed pod-group cycle, victims for the whole gang.
    "podGroupPostFilter",
    "preScore",
    "score",
    # KEP-5732: candidate placements of a pod group, their scores, and early rejection.
    "placementGenerate",
    "placementScore",
    "placementFeasible",
    "reserve",
    "permit",
    # KEP-5710: preemptions for a gang are actuated only once the whole gang fits.
    "permitDisruption",
    "preBind",
    "bind",
    "postBind",
)
"""Every extension point a profile configures, in the order a pod meets them."""

MULTI_POINT = "multiPoint"

ModelT = TypeVar("ModelT", bound=BaseModel)


class ConfigError(ValueError):
    """A configuration that cannot be used; ``problems`` lists every reason found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: list[str] = list(problems)
        super().__init__("\n".join(self.problems))


# --- Go durations ----------------------------------------------------------------

# Go's time.ParseDuration units; metav1.Duration is serialised with them ("1m30s").
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string such as ``"15s"``, ``"1m30s"`` or ``"500ms"``."""
    body = text
    sign = 1.0
    if body and body[0] in "+-":
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total = 0.0
    pos = 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r}, expected e.g. '15s', '1m30s', '500ms'")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


def _duration_seconds(value: object) -> object:
    # metav1.Duration only decodes from a string; a bare number is a mistake
    # (seconds? nanoseconds?) that upstream rejects too.
    if isinstance(value, str):
        return parse_go_duration(value)
    if isinstance(value, float | int) and not isinstance(value, bool):
        raise ValueError(f"must be a duration string such as '15s', got {value!r}")
    return value


Duration = Annotated[float, BeforeValidator(_duration_seconds)]
"""A Go duration string in the file, float seconds once parsed."""


# --- the models ------------------------------------------------------------------


class ConfigModel(BaseModel):
    """Base of the config models: camelCase keys, unknown keys rejected, no coercion."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        serialize_by_alias=True,
    )


class Plugin(ConfigModel):
    name: str
    # Only read at the score point; validated positive by troupe.api.config.
    weight: int | None = None


class DisabledPlugin(ConfigModel):
    name: str


class PluginSet(ConfigModel):
    enabled: list[Plugin] = Field(default_factory=list)
    # ``"*"`` disables every default plugin at this point.
    disabled: list[DisabledPlugin] = Field(default_factory=list)


class Plugins(ConfigModel):
    pre_enqueue: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pod_group_post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    placement_generate: PluginSet = PluginSet()
    placement_score: PluginSet = PluginSet()
    placement_feasible: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    permit_disruption: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()
    multi_point: PluginSet = PluginSet()

    def at(self, point: str) -> PluginSet:
        """The set configured at ``point`` (a camelCase name, or ``multiPoint``)."""
        value = getattr(self, _SNAKE_FIELDS[point])
        assert isinstance(value, PluginSet)
        return value


_SNAKE_FIELDS = {field.alias or name: name for name, field in Plugins.model_fields.items()}


class PluginConfig(ConfigModel):
    name: str
    # Raw here: the plugin's own Args model validates it (troupe.api.config).
    args: dict[str, Any] | None = None


PartialGangPolicy = Literal["Evict", "Keep"]


class KubeSchedulerProfile(ConfigModel):
    # None: defaulted to ``troupe-scheduler`` when it is the only profile, as upstream.
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    # KEP-5732 beta: how many feasible placements of a topology gang are scored.
    percentage_of_placements_to_score: int | None = Field(default=None, ge=0, le=100)
    plugins: Plugins = Plugins()
    plugin_config: list[PluginConfig] = Field(default_factory=list)
    # troupe extension: what happens to a gang left with 0 < bound < minCount that
    # cannot be completed within its schedule timeout (docs/gangs.md, "Recovery").
    partial_gang_policy: PartialGangPolicy = "Evict"


class LeaderElectionConfiguration(ConfigModel):
    leader_elect: bool = True
    lease_duration: Duration = 15.0
    renew_deadline: Duration = 10.0
    retry_period: Duration = 2.0
    resource_lock: str = "leases"
    resource_name: str = DEFAULT_SCHEDULER_NAME
    resource_namespace: str = "kube-system"


class ClientConnectionConfiguration(ConfigModel):
    kubeconfig: str = ""
    qps: float = 50.0
    burst: int = Field(default=100, ge=0)
    # Upstream defaults to protobuf; troupe's informers parse JSON.
    content_type: str = "application/json"
    accept_content_types: str = ""


def _default_profiles() -> list[KubeSchedulerProfile]:
    return [KubeSchedulerProfile()]


class KubeSchedulerConfiguration(ConfigModel):
    api_version: Literal["kubescheduler.config.k8s.io/v1"]
    kind: Literal["KubeSchedulerConfiguration"]
    parallelism: int = Field(default=16, gt=0)
    # 0 = adaptive (50% minus nodes/125, at least 5%), as upstream.
    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100)
    percentage_of_placements_to_score: int = Field(default=0, ge=0, le=100)
    pod_initial_backoff_seconds: int = Field(default=1, gt=0)
    pod_max_backoff_seconds: int = Field(default=10, gt=0)
    leader_election: LeaderElectionConfiguration = LeaderElectionConfiguration()
    client_connection: ClientConnectionConfiguration = ClientConnectionConfiguration()
    profiles: list[KubeSchedulerProfile] = Field(default_factory=_default_profiles)
    # troupe extensions.
    pod_max_in_unschedulable_pods_duration: Duration = 300.0
    assumed_pod_ttl_seconds: int = Field(default=900, gt=0, alias="assumedPodTTLSeconds")
    binding_concurrency: int = Field(default=64, gt=0)
    # None: DEFAULT_MAX_BINDING_CONCURRENCY, or bindingConcurrency when that is larger.
    max_binding_concurrency: int | None = Field(default=None, gt=0)
    gang_schedule_timeout_seconds: int = Field(default=300, gt=0)


# --- validation in pieces, so one bad section does not hide the others --------------


def validate_leniently(
    model: type[ModelT], data: Mapping[str, Any], prefix: Loc, problems: list[str]
) -> tuple[ModelT | None, set[str]]:
    """Validate ``data``; on errors report them, drop what they point at and retry.

    Only the offending value goes (a profile's ``weight: "5"`` drops that weight, not
    the profile's ``plugins``), so the rest is still checked and one mistake is
    reported once. Returns the model (None if nothing usable is left) and the
    top-level keys that had errors, whose cross-field rules the caller skips."""
    try:
        return model.model_validate(data), set()
    except ValidationError as exc:
        problems.extend(validation_problems(exc, prefix, model))
        errors = exc.errors()
    bad = {str(err["loc"][0]) for err in errors if err["loc"]}
    retry: Any = copy.deepcopy(dict(data))
    for _ in range(_RETRIES):
        for loc in sorted((tuple(e["loc"]) for e in errors), key=_deepest_last_index_first):
            retry = _without(retry, loc)
        if model is KubeSchedulerConfiguration:
            retry |= {"apiVersion": API_VERSION, "kind": KIND}
        try:
            return model.model_validate(retry), bad
        except ValidationError as again:
            errors = again.errors()
    fallback = {k: v for k, v in data.items() if k not in bad}
    if model is KubeSchedulerConfiguration:
        fallback |= {"apiVersion": API_VERSION, "kind": KIND}
    try:
        return model.model_validate(fallback), bad
    except ValidationError:
        return None, bad


# Dropping a value can uncover one more level (a required key now missing drops its
# parent next round); nesting in a profile is shallower than this.
_RETRIES = 6


def _deepest_last_index_first(loc: tuple[str | int, ...]) -> tuple[int, list[int]]:
    # List elements are removed from the highest index down, so earlier ones keep theirs.
    return (-len(loc), [-p if isinstance(p, int) else 0 for p in loc])


def _has(container: Any, key: str | int) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _without(data: Any, loc: tuple[str | int, ...]) -> Any:
    """``data`` without the value at ``loc``; its parent when ``loc`` does not exist
    (a required key that is missing)."""
    if not loc:
        return data
    parent = data
    for part in loc[:-1]:
        if not _has(parent, part):
            return _without(data, loc[:-1])
        parent = parent[part]
    if not _has(parent, loc[-1]):
        return _without(data, loc[:-1])
    del parent[loc[-1]]
    return data


def validate_settings(raw: Mapping[Any, Any], problems: list[str]) -> KubeSchedulerConfiguration:
    """The top level without its profiles (see ``profile_models``), defaults filled in."""
    data = {str(k): v for k, v in raw.items() if k != "profiles"}
    top, bad = validate_leniently(KubeSchedulerConfiguration, data, (), problems)
    if top is None:  # not expected: dropping the bad keys leaves only valid ones
        raise ConfigError(problems)
    problems.extend(settings_problems(top, bad))
    return top


def profile_models(
    raw_profiles: object, problems: list[str]
) -> list[tuple[KubeSchedulerProfile | None, bool]]:
    """Each profile's model (None if unusable) and whether parts of it were dropped."""
    # Upstream defaulting: no profiles (absent or empty) means one default profile.
    if raw_profiles is None or raw_profiles == []:
        return [(KubeSchedulerProfile(), False)]
    if not isinstance(raw_profiles, list):
        problems.append(f"profiles: must be a list, got {type(raw_profiles).__name__}")
        return []
    out: list[tuple[KubeSchedulerProfile | None, bool]] = []
    for i, item in enumerate(raw_profiles):
        if not isinstance(item, Mapping):
            problems.append(f"profiles[{i}]: must be a mapping, got {type(item).__name__}")
            out.append((None, True))
            continue
        data = {str(k): v for k, v in item.items()}
        model, bad = validate_leniently(KubeSchedulerProfile, data, ("profiles", i), problems)
        out.append((model, bool(bad)))
    return out


def _secs(value: float) -> str:
    return f"{value:g}s"


def settings_problems(cfg: KubeSchedulerConfiguration, bad: set[str]) -> list[str]:
    """Cross-field rules of upstream ``ValidateKubeSchedulerConfiguration``."""
    out = []
    if not {"podInitialBackoffSeconds", "podMaxBackoffSeconds"} & bad and (
        cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds
    ):
        out.append(
            "podMaxBackoffSeconds: must be >= podInitialBackoffSeconds "
            f"({cfg.pod_initial_backoff_seconds}), got {cfg.pod_max_backoff_seconds}"
        )
    if (
        not {"bindingConcurrency", "maxBindingConcurrency"} & bad
        and cfg.max_binding_concurrency is not None
        and cfg.max_binding_concurrency < cfg.binding_concurrency
    ):
        out.append(
            "maxBindingConcurrency: must be >= bindingConcurrency "
            f"({cfg.binding_concurrency}), got {cfg.max_binding_concurrency}"
        )
    if "podMaxInUnschedulablePodsDuration" not in bad and (
        cfg.pod_max_in_unschedulable_pods_duration <= 0
    ):
        out.append("podMaxInUnschedulablePodsDuration: must be greater than zero")
    le = cfg.leader_election
    # component-base checks leader election settings only when it is enabled.
    if "leaderElection" in bad or not le.leader_elect:
        return out
    path = "leaderElection"
    for field, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            out.append(f"{path}.{field}: must be greater than zero, got {_secs(value)}")
    if 0 < le.lease_duration <= le.renew_deadline:
        out.append(
            f"{path}.renewDeadline: must be less than leaseDuration "
            f"({_secs(le.lease_duration)}), got {_secs(le.renew_deadline)}"
        )
    # client-go's NewLeaderElector: the deadline must leave room for a jittered retry.
    if 0 < le.renew_deadline <= 1.2 * le.retry_period:
        out.append(
            f"{path}.renewDeadline: must be greater than 1.2 * retryPeriod "
            f"({_secs(1.2 * le.retry_period)}), got {_secs(le.renew_deadline)}"
        )
    if le.resource_lock != "leases":
        out.append(f"{path}.resourceLock: must be 'leases', got {le.resource_lock!r}")
    for field, text in (
        ("resourceName", le.resource_name),
        ("resourceNamespace", le.resource_namespace),
    ):
        if not text:
            out.append(f"{path}.{field}: must not be empty")
    return out


def profile_scheduler_name(
    i: int, model: KubeSchedulerProfile, count: int, problems: list[str]
) -> str:
    # Upstream defaults the name only when there is a single profile.
    if model.scheduler_name is None:
        if count == 1:
            return DEFAULT_SCHEDULER_NAME
        problems.append(f"profiles[{i}].schedulerName: required when there are several profiles")
        return ""
    if not model.scheduler_name:
        problems.append(f"profiles[{i}].schedulerName: must not be empty")
    return model.scheduler_name


def pop_type_meta(path: str, name: str, args: dict[str, Any]) -> list[str]:
    # Upstream files may tag args with their type (``kind: NodeResourcesFitArgs``);
    # accept and check that, then hand the plugin only its own fields.
    out = []
    api_version = args.pop("apiVersion", None)
    kind = args.pop("kind", None)
    if api_version is not None and api_version != API_VERSION:
        out.append(f"{path}.args.apiVersion: {api_version!r} is not one of [{API_VERSION!r}]")
    if kind is not None and kind != f"{name}Args":
        out.append(f"{path}.args.kind: must be {name + 'Args'!r}, got {kind!r}")
    return out
