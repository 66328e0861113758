"""What the recall pages share: the live workloads, the environments, which one opens."""

from __future__ import annotations

from policies.algebra import PolicyError
from policies.models import Workload
from policies.selectors import EffectivePolicy, effective_policy_for
from portal.models import Workspace

UNPROCESSABLE = 422  # a submitted form with errors, re-rendered
DEFAULT_ENVIRONMENT = "prod"


def live_workloads(workspace: Workspace) -> list[Workload]:
    workloads = list(workspace.workloads.filter(archived_at__isnull=True).order_by("name"))
    for workload in workloads:
        workload.workspace = workspace  # effective_policy_for reads it: no query per workload
    return workloads


def environment_slugs(workspace: Workspace) -> list[str]:
    return list(workspace.environments.order_by("slug").values_list("slug", flat=True))


def pick_workload(workloads: list[Workload], wanted: str | None) -> Workload | None:
    return next((w for w in workloads if str(w.pk) == wanted), workloads[0] if workloads else None)


def pick_environment(environments: list[str], wanted: str | None) -> str:
    if wanted in environments:
        return str(wanted)
    if DEFAULT_ENVIRONMENT in environments:
        return DEFAULT_ENVIRONMENT
    return environments[0] if environments else ""


def saved_policy(workload: Workload | None, environment: str) -> EffectivePolicy | None:
    if workload is None:
        return None
    try:
        return effective_policy_for(workload=workload, environment=environment)
    except PolicyError:  # a stored policy the current floor cannot honour; the run says why
        return None
