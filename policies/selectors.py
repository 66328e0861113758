from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies import algebra
from policies.models import (
    Workload,
    WorkloadPolicyVersion,
    Workspace,
    WorkspacePolicyVersion,
)
from portal.errors import NotFoundError, ValidationFailed


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


def workload_policy_applicable(
    *, workload: Workload, environment: str
) -> WorkloadPolicyVersion | None:
    """The most specific policy that applies in ``environment``: its own, else the default."""
    candidates = WorkloadPolicyVersion.objects.filter(
        workload=workload, environment__in=[environment, ""]
    ).order_by("-version")
    specific = next((v for v in candidates if v.environment == environment), None)
    if specific is not None or environment == "":
        return specific
    return next((v for v in candidates if v.environment == ""), None)


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
    policy: dict[str, Any]
    policy_hash: str
    budget_hash: str
    compliant: bool
    relaxing_axes: list[str]
    floor_version: int
    workload_version: int | None


def effective_policy_for(
    *,
    workload: Workload,
    environment: str,
    override: dict[str, Any] | None = None,
) -> EffectivePolicy:
    floor_version = workspace_policy_current(workspace=workload.workspace)
    applicable = workload_policy_applicable(workload=workload, environment=environment)
    workload_doc = applicable.document if applicable else {}
    relaxing = algebra.check_workload(floor_version.document, workload_doc)
    policy = algebra.effective_policy(
        floor_version.document, workload_doc, override, floor_version.relaxable_axes
    )
    policy_hash, budget_hash = algebra.policy_hashes(policy)
    return EffectivePolicy(
        policy=policy,
        policy_hash=policy_hash,
        budget_hash=budget_hash,
        compliant=not relaxing,
        relaxing_axes=relaxing,
        floor_version=floor_version.version,
        workload_version=applicable.version if applicable else None,
    )
