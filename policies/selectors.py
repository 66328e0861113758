from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from policies import algebra
from policies.axes import PolicyDocument, policy_copy
from policies.conflicts import Conflict
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from portal.access import Caller, scoped_get
from portal.canonical import canonical_json
from portal.db.cursors import prepared_statement
from portal.errors import ConflictError, NotFoundError, ValidationFailed
from portal.models import Role, Workspace


def workspace_policy_current(*, workspace: Workspace) -> WorkspacePolicyVersion:
    version = workspace.policy_versions.order_by("-version").first()
    if version is None:  # every workspace is created with a floor; this is a broken invariant
        raise NotFoundError(f"Workspace {workspace.slug!r} has no policy yet.")
    return version


def workload_policy_current(
    *, workload: Workload, environment: str
) -> WorkloadPolicyVersion | None:
    """The exact (workload, environment) policy; '' is the all-environments default."""
    return (
        WorkloadPolicyVersion.objects.filter(workload=workload, environment=environment)
        .order_by("-version")
        .first()
    )


def environment_check(*, workspace: Workspace, environment: str | None) -> str:
    """Validate an environment slug given by a caller; None/'' means the default policy."""
    if not environment:
        return ""
    if not workspace.environments.filter(slug=environment).exists():
        known = ", ".join(workspace.environments.values_list("slug", flat=True))
        raise ValidationFailed(
            {"environment": f"Unknown environment {environment!r}; this workspace has: {known}."}
        )
    return environment


@dataclass(frozen=True)
class EffectivePolicy:
    policy: PolicyDocument
    policy_hash: str
    budget_hash: str
    compliant: bool
    relaxing_axes: list[str]
    floor_version: int
    workload_version: int | None
    relaxable_axes: list[str]
    # The workload policy's environment: "" for its all-environments default, None without one.
    workload_environment: str | None = None
    override: bool = False
    # The request's override as validated and normalised (what it asked for, axis by axis);
    # None without one.
    override_document: dict[str, Any] | None = None
    # Where the floor overrules the stored workload policy (see policies.conflicts); each makes
    # the workload non-compliant, though recall still works: the floor wins.
    conflicts: tuple[Conflict, ...] = ()


def _context_key_sql(ws: str, wl: str, env: str) -> str:
    """SQL for what identifies a workload's policy context in an environment: the outcome of
    each check the context makes and the ids of the versions it applies (never the documents,
    which a version id fixes), with the named parameters given."""
    return f"""concat_ws(',',
    (SELECT count(*) FROM policies_environment e
     WHERE e.workspace_id = %({ws})s AND e.slug = %({env})s),
    (SELECT count(*) FROM policies_workload x WHERE x.id = %({wl})s AND x.workspace_id = %({ws})s),
    (SELECT count(*) FROM policies_workload x WHERE x.id = %({wl})s AND x.archived_at IS NOT NULL),
    coalesce((SELECT id FROM policies_workspacepolicyversion WHERE workspace_id = %({ws})s
              ORDER BY version DESC LIMIT 1), 0),
    coalesce((SELECT id FROM policies_workloadpolicyversion
              WHERE workload_id = %({wl})s AND environment IN (%({env})s, '')
              ORDER BY environment = '', version DESC LIMIT 1), 0))"""


# The policy context's key, for a statement of the recall's (named parameters: workspace,
# workload, environment) that checks a remembered context in its own round trip
# (``effective_policy_remembered``).
POLICY_CONTEXT_KEY_SQL = f"({_context_key_sql('workspace', 'workload', 'environment')})"

_POLICY_CONTEXT = prepared_statement(
    "policies.context",
    f"""
SELECT
    EXISTS (
        SELECT 1 FROM policies_environment e WHERE e.workspace_id = %(ws)s AND e.slug = %(env)s
    ),
    EXISTS (SELECT 1 FROM policies_workload x WHERE x.id = %(wl)s AND x.workspace_id = %(ws)s),
    -- a boolean, not the time: a timestamp column costs psycopg a loader on every recall
    (SELECT x.archived_at IS NOT NULL FROM policies_workload x WHERE x.id = %(wl)s),
    f.id, f.version, f.document, f.relaxable_axes,
    w.id, w.version, w.document, w.environment,
    {_context_key_sql("ws", "wl", "env")}
FROM (
    SELECT id, version, document, relaxable_axes FROM policies_workspacepolicyversion
    WHERE workspace_id = %(ws)s ORDER BY version DESC LIMIT 1
) f
LEFT JOIN LATERAL (
    SELECT id, version, document, environment FROM policies_workloadpolicyversion
    WHERE workload_id = %(wl)s AND environment IN (%(env)s, '')
    -- the environment's own policy wins over the all-environments default
    ORDER BY environment = '', version DESC LIMIT 1
) w ON true
""",
)

# The effective policy (without an override) this process last computed for each workspace,
# workload and environment, with its context key (``_context_key_sql``): valid while the key
# is the same, which the recall checks in its read statement (``POLICY_CONTEXT_KEY_SQL``).
_remembered: dict[tuple[int, Any, str], tuple[str, EffectivePolicy]] = {}
_REMEMBERED_KEPT = 10_000

_EFFECTIVE_CACHE_SIZE = 2048
_Effective = tuple[PolicyDocument, str, str, list[str], tuple[Conflict, ...], str]
_effective_cache: dict[tuple[int, int | None, str], _Effective] = {}


def _effective_cached(
    floor_id: int,
    floor_doc: dict[str, Any],
    relaxable: list[str],
    workload_id: int | None,
    workload_doc: dict[str, Any],
    override: dict[str, Any] | None,
) -> _Effective:
    """The pure computation, memoised: policy versions are immutable, so their ids and the
    override's canonical form fully determine the result."""
    # Keyed on the normalised override: equal overrides share an entry, and the key stays as
    # small as the policy whatever the request repeated (a malformed one is refused here).
    normal = algebra.normalize_document(override, partial=True) if override else {}
    key = (floor_id, workload_id, canonical_json(normal))
    cached = _effective_cache.get(key)
    if cached is None:
        policy = algebra.effective_policy(floor_doc, workload_doc, override, relaxable)
        policy_hash, budget_hash = algebra.policy_hashes(policy)
        relaxing = algebra.check_workload(floor_doc, workload_doc)
        found = tuple(algebra.floor_conflicts(floor_doc, workload_doc))
        cached = (policy, policy_hash, budget_hash, relaxing, found, key[2])
        if len(_effective_cache) >= _EFFECTIVE_CACHE_SIZE:
            _effective_cache.clear()
        _effective_cache[key] = cached
    policy, policy_hash, budget_hash, relaxing, found, normal_json = cached
    # Callers may annotate the policy dict; never hand out the cached object itself.
    return policy_copy(policy), policy_hash, budget_hash, list(relaxing), found, normal_json


def effective_policy_for(
    *,
    workload: Workload,
    environment: str,
    override: dict[str, Any] | None = None,
    allow_archived: bool = False,
) -> EffectivePolicy:
    """Floor + the most specific workload policy + override, in one query.

    The same query checks that the workload belongs to the workspace (404 otherwise), that
    it is not archived (409 ``WORKLOAD_ARCHIVED``, unless ``allow_archived``: pages that only
    read it) and that the environment exists (400 naming the field otherwise), so the recall
    hot path needs no separate lookups.
    """
    params: dict[str, Any] = {"ws": workload.workspace_id, "wl": workload.pk, "env": environment}
    row = _POLICY_CONTEXT.fetchone(params)
    if row is None:  # every workspace is created with a floor; this is a broken invariant
        raise NotFoundError(f"Workspace {workload.workspace_id} has no policy yet.")
    (
        env_ok,
        workload_ok,
        archived,
        floor_id,
        floor_version,
        floor_doc,
        relaxable,
        wl_id,
        wl_version,
        wl_doc,
        wl_environment,
        context_key,
    ) = row
    if not workload_ok:
        raise NotFoundError(
            f"No workload {workload.pk} in this workspace.",
            {"fields": {"workloadId": "Unknown workload."}},
        )
    if archived and not allow_archived:
        archived_at = Workload.objects.values_list("archived_at", flat=True).get(pk=workload.pk)
        raise ConflictError(
            f"Workload {workload.pk} was archived on {archived_at:%Y-%m-%d %H:%M} UTC: recall "
            "for it is refused. Its policies stay readable.",
            {"workloadId": str(workload.pk), "archivedAt": archived_at and archived_at.isoformat()},
            code="WORKLOAD_ARCHIVED",
        )
    # Django reads jsonb as text on raw cursors; the ORM would parse it for us.
    floor_doc, relaxable, wl_doc = (
        json.loads(v) if isinstance(v, str) else v for v in (floor_doc, relaxable, wl_doc)
    )
    if environment and not env_ok:
        environment_check(workspace=workload.workspace, environment=environment)
    policy, policy_hash, budget_hash, relaxing, found, override_json = _effective_cached(
        floor_id, floor_doc, relaxable, wl_id, wl_doc or {}, override
    )
    effective = EffectivePolicy(
        policy=policy,
        policy_hash=policy_hash,
        budget_hash=budget_hash,
        compliant=not relaxing and not found,
        relaxing_axes=relaxing,
        floor_version=floor_version,
        workload_version=wl_version,
        relaxable_axes=list(relaxable),
        workload_environment=wl_environment,
        override=bool(override),
        override_document=json.loads(override_json) if override else None,
        conflicts=found,
    )
    if not override and not archived:
        if len(_remembered) >= _REMEMBERED_KEPT:
            _remembered.clear()
        remembered = (workload.workspace_id, workload.pk, environment)
        _remembered[remembered] = (context_key, _effective_copy(effective))
    return effective


def remembered_policies_forget() -> None:
    """Forget the effective policies remembered (tests start each case afresh)."""
    _remembered.clear()


def effective_policy_remembered(
    *, workload: Workload, environment: str
) -> tuple[str, EffectivePolicy] | None:
    """The effective policy without an override that ``effective_policy_for`` last gave in this
    process for the workload and environment, and its context key; None if none. It is the
    current one only while ``POLICY_CONTEXT_KEY_SQL`` still gives that key: the caller checks,
    and asks ``effective_policy_for`` (which raises what it must) when it does not."""
    found = _remembered.get((workload.workspace_id, workload.pk, environment))
    if found is None:
        return None
    key, effective = found
    return key, _effective_copy(effective)


def _effective_copy(effective: EffectivePolicy) -> EffectivePolicy:
    # Callers may annotate the policy and the lists; never hand out what is remembered.
    return replace(
        effective,
        policy=policy_copy(effective.policy),
        relaxing_axes=list(effective.relaxing_axes),
        relaxable_axes=list(effective.relaxable_axes),
    )


# --- portal pages: compliance (the floor change's impact: policies.impact) ---------------------


def workload_policies_latest(
    *, workspace: Workspace
) -> dict[tuple[uuid.UUID, str], WorkloadPolicyVersion]:
    """The newest version of every (workload, environment) policy of a workspace, one query."""
    versions = (
        WorkloadPolicyVersion.objects.filter(workload__workspace=workspace)
        .order_by("workload_id", "environment", "-version")
        .distinct("workload_id", "environment")
    )
    return {(v.workload_id, v.environment): v for v in versions}


@dataclass(frozen=True)
class ComplianceCell:
    """How one workload stands in one environment ('' = the all-environments default)."""

    environment: str
    version: WorkloadPolicyVersion | None  # the applicable version: own, else the default
    own: bool  # whether ``version`` is this environment's own policy
    relaxing_axes: list[str]
    # Where the floor overrules the policy although no axis relaxes it (policies.conflicts).
    conflicts: list[Conflict]

    @property
    def compliant(self) -> bool:
        """The policy applies as written: nothing relaxes the floor, nothing is overruled."""
        return not self.relaxing_axes and not self.conflicts

    @property
    def status(self) -> str:
        """``compliant``, ``adjusted`` (by the floor: conflicts only) or ``non-compliant``."""
        if self.relaxing_axes:
            return "non-compliant"
        return "adjusted" if self.conflicts else "compliant"


@dataclass(frozen=True)
class WorkloadCompliance:
    workload: Workload
    cells: list[ComplianceCell]

    @property
    def compliant(self) -> bool:
        return all(cell.compliant for cell in self.cells)

    @property
    def status(self) -> str:
        """The worst of its cells: ``non-compliant``, then ``adjusted``, else ``compliant``."""
        statuses = {cell.status for cell in self.cells}
        return next((s for s in ("non-compliant", "adjusted") if s in statuses), "compliant")


def workload_compliance(
    *, workspace: Workspace, floor: dict[str, Any]
) -> tuple[list[str], list[WorkloadCompliance]]:
    """Environments ('' first) and, per workload, whether its applicable policy fits the floor:
    the axes that relax it and the conflicts the floor wins (``algebra.floor_conflicts``).

    Three queries whatever the number of workloads: environments, workloads, latest versions.
    """
    environments = ["", *workspace.environments.order_by("slug").values_list("slug", flat=True)]
    latest = workload_policies_latest(workspace=workspace)
    rows = []
    for workload in workspace.workloads.filter(archived_at__isnull=True).order_by("name"):
        default = latest.get((workload.id, ""))
        cells = []
        for environment in environments:
            own = latest.get((workload.id, environment))
            version = own or default
            document = version.document if version else {}
            relaxing = algebra.check_workload(floor, document)
            found = algebra.floor_conflicts(floor, document)
            cells.append(ComplianceCell(environment, version, own is not None, relaxing, found))
        rows.append(WorkloadCompliance(workload, cells))
    return environments, rows


def workload_for(caller: Caller, workload_id: Any, *, required: str = Role.VIEWER) -> Workload:
    """A workload of a workspace the caller may see, checked for ``required`` role."""
    rows = Workload.objects.all()
    return scoped_get(caller, rows, workload_id, what="workload", required=required)
