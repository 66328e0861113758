"""The operator floor page: edit the floor, preview its impact, see workload compliance.

Writes need the operator role, checked before anything else so a viewer's POST is a 403
whatever it carries. One URL serves the page and, for htmx requests, the fragment that changed.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from policies import algebra, services
from policies.algebra import floor_document
from policies.forms import (
    PolicyForm,
)
from policies.impact import floor_change_impact
from policies.models import (
    WorkspacePolicyVersion,
)
from policies.selectors import (
    workload_compliance,
    workspace_policy_current,
)
from policies.views.common import (
    CONFLICT,
    UNPROCESSABLE,
    Conflict,
    conflict_of,
    page_access,
)
from portal.errors import DomainError, VersionConflict
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace

# --- the operator floor ------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def floor(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = page_access(request, slug, write_role=Role.OPERATOR)
    workspace = access.workspace
    current = workspace_policy_current(workspace=workspace)
    form = PolicyForm(
        initial=current.document,
        partial=False,
        relaxable=current.relaxable_axes,
        data=request.POST if request.method == "POST" else None,
        version=current.version,
    )
    impact: dict[str, Any] | None = None
    conflict: Conflict | None = None
    status = 200
    if request.method == "POST":
        if request.POST.get("action") == "preview":
            impact = _impact(workspace, form, current)
            if request.htmx:
                return render(request, "policies/_impact.html", {**access.context(), **impact})
        elif form.is_valid():
            try:
                version = services.workspace_policy_save(
                    workspace=workspace,
                    document=form.document,
                    author=access.caller.label,
                    comment=form.comment,
                    base_version=form.base_version,
                )
            except VersionConflict as exc:
                conflict = conflict_of(
                    exc,
                    workspace.policy_versions.all(),
                    lambda v: floor_document(v.document, v.relaxable_axes),
                    missing="—",
                    caller=access.caller.label,
                )
                form.rebase(exc.current)
            except (algebra.PolicyError, DomainError) as exc:
                form.add_error(exc)
            else:
                if version.pk == current.pk:
                    messages.info(
                        request,
                        f"No changes to save: the form matches the operator floor's current"
                        f" version {version.version}.",
                    )
                else:
                    messages.success(
                        request, f"Saved the operator floor as version {version.version}."
                    )
                return redirect("policies:floor", slug=slug)
        if conflict is not None:
            status = CONFLICT
        elif form.errors or form.non_field_errors:
            status = UNPROCESSABLE
    environments, compliance = workload_compliance(workspace=workspace, floor=current.document)
    context = {
        **access.context(),
        "current": current,
        "form": form,
        "groups": form.groups(),
        "impact": impact,
        "conflict": conflict,
        "environments": environments,
        "compliance": compliance,
    }
    return render(request, "policies/floor.html", context, status=status)


def _impact(
    workspace: Workspace, form: PolicyForm, current: WorkspacePolicyVersion
) -> dict[str, Any]:
    """The impact preview's context: rows, or the errors that prevent computing them."""
    if not form.is_valid(saving=False):
        return {"impact_rows": None, "impact_errors": form.errors}
    try:
        rows = floor_change_impact(workspace=workspace, proposed=form.document, current=current)
    except algebra.PolicyError as exc:
        form.add_error(exc)
        return {"impact_rows": None, "impact_errors": form.errors}
    return {"impact_rows": rows, "impact_errors": {}}
