"""A workload's policy page, one environment at a time, and "narrow to the floor".

Writes need the editor role, checked before anything else.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from policies import algebra, services
from policies.forms import (
    PolicyForm,
)
from policies.impact import ImpactRow, workload_change_impact
from policies.labels import axis_value
from policies.models import (
    Workload,
    WorkloadPolicyVersion,
)
from policies.selectors import (
    effective_policy_for,
    workload_policy_current,
    workspace_policy_current,
)
from policies.views.common import (
    CONFLICT,
    UNPROCESSABLE,
    BadInput,
    Conflict,
    bad_input,
    conflict_of,
    environment_label,
    environment_of,
    environment_tabs,
    latest_by_environment,
    most_recent_environment,
    page_access,
    wants_fragment,
    workload_of,
    workload_url,
)
from portal.errors import DomainError, VersionConflict
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import safe_next, workspace_page
from portal.versioning import NO_VERSION

# --- workload policies -------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def workload_policy(request: HtmxHttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    access = page_access(request, slug, write_role=Role.EDITOR)
    workspace = access.workspace
    workload = workload_of(access, workload_id)
    raw = request.GET.get("environment")
    try:
        environment, environments = environment_of(workspace, raw)
    except BadInput as exc:
        raise Http404(str(exc)) from None  # the policy page of an environment that is not there
    latest = latest_by_environment(workload)
    # Asked for none, a page opens where the workload's policy was saved last; a form posted
    # without one (only an old page or a script would) is about the default, as it always was.
    opened_on_latest = False
    if raw is None and request.method == "GET":
        recent = most_recent_environment(latest, environments)
        if recent is not None:
            environment, opened_on_latest = recent, True
    floor_version = workspace_policy_current(workspace=workspace)
    current = latest.get(environment)
    form = PolicyForm(
        initial=current.document if current else {},
        partial=True,
        floor=floor_version.document,
        data=request.POST if request.method == "POST" else None,
        version=current.version if current else NO_VERSION,
    )
    conflict: Conflict | None = None
    status = 200
    if request.method == "POST":
        if request.POST.get("_validate") == "1":
            # Live validation: the same checks as a save, nothing written, and what the
            # policy as it stands would change in recall (a comment changes nothing there).
            impact: list[ImpactRow] | None = None
            if form.is_valid(saving=False):
                try:
                    algebra.validate_workload(floor_version.document, form.document)
                except algebra.PolicyError as exc:
                    form.add_error(exc)
                impact = _impact(
                    workload, environment, environments, form, floor_version.document, latest
                )
            return render(
                request,
                "policies/_workload_validation.html",
                {
                    **access.context(),
                    "form": form,
                    "groups": form.groups(),
                    "impact": impact,
                    "environment": environment,
                },
            )
        if form.is_valid():
            try:
                version = services.workload_policy_save(
                    workload=workload,
                    environment=environment,
                    document=form.document,
                    author=access.caller.label,
                    comment=form.comment,
                    base_version=form.base_version,
                )
            except VersionConflict as exc:
                conflict = conflict_of(
                    exc,
                    workload.policy_versions.filter(environment=environment),
                    lambda v: v.document,
                    missing="inherits floor",
                    caller=access.caller.label,
                )
                form.rebase(exc.current)
            except (algebra.PolicyError, DomainError) as exc:
                form.add_error(exc)
            else:
                where = environment or "all environments"
                if current is not None and version.pk == current.pk:
                    messages.info(
                        request,
                        f"No changes to save: the form matches {workload.name}'s policy for"
                        f" {where}, version {version.version}.",
                    )
                else:
                    messages.success(
                        request,
                        f"Saved {workload.name}'s policy for {where} as version {version.version}.",
                    )
                return redirect(
                    workload_url("policies:workload-policy", slug, workload, environment)
                )
        status = CONFLICT if conflict is not None else UNPROCESSABLE
    relaxing = algebra.check_workload(floor_version.document, current.document) if current else []
    context = {
        **access.context(),
        "workload": workload,
        "environment": environment,
        "environment_label": environment_label(environment),
        "environments": environments,
        "environment_tabs": environment_tabs(
            environment,
            environments,
            latest,
            lambda env: workload_url("policies:workload-policy", slug, workload, env),
        ),
        "opened_on_latest": opened_on_latest,
        "current": current,
        "floor_version": floor_version,
        "form": form,
        "groups": form.groups(),
        "conflict": conflict,
        "relaxing": relaxing,
        **_effective_context(workload, environment, current),
        "history_url": workload_url("policies:workload-history", slug, workload, environment),
        "form_url": workload_url("policies:workload-policy", slug, workload, environment),
    }
    template = "policies/_workload_body.html" if wants_fragment(request) else None
    return render(request, template or "policies/workload.html", context, status=status)


def _impact(
    workload: Workload,
    environment: str,
    environments: list[str],
    form: PolicyForm,
    floor: dict[str, Any],
    latest: dict[str, WorkloadPolicyVersion],
) -> list[ImpactRow] | None:
    """The impact preview of the form's policy, clamped and settled as recall would use it
    (a value wider than the floor counts as the floor's); None when an axis's value is not
    valid."""
    try:
        document = algebra.normalize_document(form.document, partial=True)
    except algebra.PolicyError:
        return None
    return workload_change_impact(
        workload=workload,
        environment=environment,
        proposed=document,
        floor=floor,
        latest=latest,
        environments=environments,
    )


def _effective_context(
    workload: Workload, environment: str, current: WorkloadPolicyVersion | None
) -> dict[str, Any]:
    """What recall applies here: the floor narrowed by the most specific policy, clamped."""
    try:
        effective = effective_policy_for(
            workload=workload, environment=environment, allow_archived=True
        )
    except algebra.PolicyError as exc:  # a stored policy the current floor cannot honour
        return {
            "effective": [],
            "effective_error": exc.message,
            "effective_source": "",
            "effective_conflicts": (),
        }
    if current is not None:
        source = "floor narrowed by this policy"
    elif effective.workload_version is not None:
        source = f"floor narrowed by the all-environments default (v{effective.workload_version})"
    else:
        source = "the floor as is: no workload policy applies"
    return {
        "effective": [(name, axis_value(name, value)) for name, value in effective.policy.items()],
        "effective_error": "",
        "effective_source": source,
        "effective_conflicts": effective.conflicts,
    }


@login_required
@require_POST
def workload_narrow(request: HttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    """One click: save the workload's policy as the floor leaves it (``narrow_to_floor``)."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    workload = workload_of(access, workload_id)
    fallback = reverse("policies:floor", args=[slug])
    try:
        environment, _ = environment_of(access.workspace, request.POST.get("environment"))
    except BadInput as exc:
        return bad_input(request, access, str(exc), back=safe_next(request, fallback))
    current = workload_policy_current(workload=workload, environment=environment)
    if current is None:
        messages.error(request, "There is no workload policy to narrow here.")
        return redirect(safe_next(request, fallback))
    floor_doc = workspace_policy_current(workspace=access.workspace).document
    # The axes it sets, plus any a conflict with the floor changed: within it and honourable.
    document = algebra.narrow_to_floor(floor_doc, current.document)
    try:
        version = services.workload_policy_save(
            workload=workload,
            environment=environment,
            document=document,
            author=access.caller.label,
            comment="Narrowed to floor",
            base_version=current.version,  # what was narrowed: refuse if it changed meanwhile
        )
    except (algebra.PolicyError, DomainError) as exc:
        messages.error(request, f"Could not narrow {workload.name}: {exc.message}")
    else:
        messages.success(
            request,
            f"Narrowed {workload.name} ({environment or 'all environments'}) to the floor"
            f" as version {version.version}.",
        )
    return redirect(safe_next(request, fallback))
