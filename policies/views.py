"""Policy pages: the operator floor, workload policies per environment, version history.

Each URL serves its full page and, for htmx requests, the fragment that changed (impact
preview, live validation, diff, environment switch). Reads are open to every member; writes
need the editor role (workload policies) or the operator role (the floor), checked before
anything else so a viewer's POST is a 403 whatever it carries.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from policies import algebra, services
from policies.forms import PolicyForm, diff_rows, floor_document, format_value
from policies.models import (
    PolicyVersionBase,
    Workload,
    WorkloadPolicyVersion,
    Workspace,
    WorkspacePolicyVersion,
)
from policies.selectors import (
    effective_policy_for,
    floor_change_impact,
    workload_compliance,
    workload_policy_current,
    workspace_policy_current,
)
from portal.errors import DomainError
from portal.models import Role
from portal.pages import PageAccess, workspace_page

UNPROCESSABLE = 422  # a submitted form with errors, re-rendered


def _access(request: HttpRequest, slug: str, *, write_role: str) -> PageAccess:
    required = write_role if request.method == "POST" else Role.VIEWER
    return workspace_page(request, slug, required=required)


def _workload(access: PageAccess, workload_id: uuid.UUID) -> Workload:
    return get_object_or_404(Workload, pk=workload_id, workspace=access.workspace)


def _environment(workspace: Workspace, raw: str | None) -> tuple[str, list[str]]:
    """The environment named in the query string ('' = all environments) and the known ones."""
    known = list(workspace.environments.order_by("slug").values_list("slug", flat=True))
    environment = raw or ""
    if environment and environment not in known:
        raise Http404("No such environment.")
    return environment, known


def _workload_url(name: str, slug: str, workload: Workload, environment: str) -> str:
    url = reverse(name, args=[slug, workload.pk])
    return f"{url}?{urlencode({'environment': environment})}" if environment else url


def _wants_fragment(request: HttpRequest) -> bool:
    """An htmx GET swaps a fragment in; a history restore (Back, cache miss) needs the page."""
    htmx = request.htmx
    return bool(htmx) and request.method == "GET" and not htmx.history_restore_request


def _safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return fallback


# --- the operator floor ------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def floor(request: HttpRequest, slug: str) -> HttpResponse:
    access = _access(request, slug, write_role=Role.OPERATOR)
    workspace = access.workspace
    current = workspace_policy_current(workspace=workspace)
    form = PolicyForm(
        initial=current.document,
        partial=False,
        relaxable=current.relaxable_axes,
        data=request.POST if request.method == "POST" else None,
    )
    impact: dict[str, Any] | None = None
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
                )
            except (algebra.PolicyError, DomainError) as exc:
                form.add_error(exc)
            else:
                messages.success(request, f"Saved the operator floor as version {version.version}.")
                return redirect("policies:floor", slug=slug)
        if form.errors or form.non_field_errors:
            status = UNPROCESSABLE
    environments, compliance = workload_compliance(workspace=workspace, floor=current.document)
    context = {
        **access.context(),
        "current": current,
        "form": form,
        "groups": form.groups(),
        "relaxable_display": format_value(algebra.RELAXABLE_KEY, current.relaxable_axes),
        "impact": impact,
        "environments": environments,
        "compliance": compliance,
    }
    return render(request, "policies/floor.html", context, status=status)


def _impact(
    workspace: Workspace, form: PolicyForm, current: WorkspacePolicyVersion
) -> dict[str, Any]:
    """The impact preview's context: rows, or the errors that prevent computing them."""
    if not form.is_valid():
        return {"impact_rows": None, "impact_errors": form.errors}
    try:
        rows = floor_change_impact(workspace=workspace, proposed=form.document, current=current)
    except algebra.PolicyError as exc:
        form.add_error(exc)
        return {"impact_rows": None, "impact_errors": form.errors}
    return {"impact_rows": rows, "impact_errors": {}}


# --- workload policies -------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def workload_policy(request: HttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    access = _access(request, slug, write_role=Role.EDITOR)
    workspace = access.workspace
    workload = _workload(access, workload_id)
    environment, environments = _environment(workspace, request.GET.get("environment"))
    floor_version = workspace_policy_current(workspace=workspace)
    current = workload_policy_current(workload=workload, environment=environment)
    form = PolicyForm(
        initial=current.document if current else {},
        partial=True,
        floor=floor_version.document,
        data=request.POST if request.method == "POST" else None,
    )
    status = 200
    if request.method == "POST":
        if request.POST.get("_validate") == "1":
            # Live validation: the same checks as a save, nothing written.
            if form.is_valid():
                try:
                    algebra.validate_workload(floor_version.document, form.document)
                except algebra.PolicyError as exc:
                    form.add_error(exc)
            return render(
                request,
                "policies/_workload_validation.html",
                {"form": form, "groups": form.groups()},
            )
        if form.is_valid():
            try:
                version = services.workload_policy_save(
                    workload=workload,
                    environment=environment,
                    document=form.document,
                    author=access.caller.label,
                    comment=form.comment,
                )
            except (algebra.PolicyError, DomainError) as exc:
                form.add_error(exc)
            else:
                messages.success(
                    request,
                    f"Saved {workload.name}'s policy for {environment or 'all environments'}"
                    f" as version {version.version}.",
                )
                return redirect(
                    _workload_url("policies:workload-policy", slug, workload, environment)
                )
        status = UNPROCESSABLE
    relaxing = algebra.check_workload(floor_version.document, current.document) if current else []
    context = {
        **access.context(),
        "workload": workload,
        "environment": environment,
        "environments": environments,
        "current": current,
        "floor_version": floor_version,
        "form": form,
        "groups": form.groups(),
        "relaxing": relaxing,
        **_effective_context(workload, environment, current),
        "history_url": _workload_url("policies:workload-history", slug, workload, environment),
        "form_url": _workload_url("policies:workload-policy", slug, workload, environment),
    }
    template = "policies/_workload_body.html" if _wants_fragment(request) else None
    return render(request, template or "policies/workload.html", context, status=status)


def _effective_context(
    workload: Workload, environment: str, current: WorkloadPolicyVersion | None
) -> dict[str, Any]:
    """What recall applies here: the floor narrowed by the most specific policy, clamped."""
    try:
        effective = effective_policy_for(workload=workload, environment=environment)
    except algebra.PolicyError as exc:  # a stored policy the current floor cannot honour
        return {"effective": [], "effective_error": exc.message, "effective_source": ""}
    if current is not None:
        source = "floor narrowed by this policy"
    elif effective.workload_version is not None:
        source = f"floor narrowed by the all-environments default (v{effective.workload_version})"
    else:
        source = "the floor as is: no workload policy applies"
    return {
        "effective": [(name, format_value(name, effective.policy[name])) for name in algebra.AXES],
        "effective_error": "",
        "effective_source": source,
    }


@login_required
@require_POST
def workload_narrow(request: HttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    """One click: save the workload's policy clamped to the floor, on the axes it sets."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    workload = _workload(access, workload_id)
    environment, _ = _environment(access.workspace, request.POST.get("environment"))
    fallback = reverse("policies:floor", args=[slug])
    current = workload_policy_current(workload=workload, environment=environment)
    if current is None:
        messages.error(request, "There is no workload policy to narrow here.")
        return redirect(_safe_next(request, fallback))
    floor_doc = workspace_policy_current(workspace=access.workspace).document
    narrowed = algebra.narrow(floor_doc, current.document)
    document = {name: narrowed[name] for name in current.document if name in narrowed}
    try:
        version = services.workload_policy_save(
            workload=workload,
            environment=environment,
            document=document,
            author=access.caller.label,
            comment="Narrowed to floor",
        )
    except (algebra.PolicyError, DomainError) as exc:
        messages.error(request, f"Could not narrow {workload.name}: {exc.message}")
    else:
        messages.success(
            request,
            f"Narrowed {workload.name} ({environment or 'all environments'}) to the floor"
            f" as version {version.version}.",
        )
    return redirect(_safe_next(request, fallback))


# --- version history ---------------------------------------------------------------------------


def _pick(versions: list[Any], raw: str | None, default: Any) -> Any:
    try:
        wanted = int(raw or "")
    except ValueError:
        return default
    return next((v for v in versions if v.version == wanted), default)


def _history_context(
    request: HttpRequest,
    versions: list[Any],
    documents: dict[int, dict[str, Any]],
    *,
    base_path: str,
    environment: str | None,
    missing: str = "—",
) -> dict[str, Any]:
    """The two versions to compare (``?a=&b=``, default: the latest against its predecessor)."""
    latest = versions[0] if versions else None
    previous = versions[1] if len(versions) > 1 else latest
    a = _pick(versions, request.GET.get("a"), previous)
    b = _pick(versions, request.GET.get("b"), latest)
    rows = []
    if a is not None and b is not None:
        before, after = documents[a.version], documents[b.version]
        rows = diff_rows(
            algebra.diff_documents(before, after), before=before, after=after, missing=missing
        )
    keep = {"environment": environment} if environment else {}
    entries = [
        {
            "version": v,
            "compare_url": f"{base_path}?{urlencode({**keep, 'a': v.version - 1, 'b': v.version})}"
            if v.version > 1
            else "",
        }
        for v in versions
    ]
    return {
        "versions": versions,
        "entries": entries,
        "a": a,
        "b": b,
        "diff": rows,
        "latest": latest,
        "base_path": base_path,
        "environment": environment,
    }


def _restore_errors(exc: algebra.PolicyError | DomainError) -> list[str]:
    details = exc.details or {}
    if exc.code == algebra.WORKLOAD_RELAXES_OPERATOR_FLOOR:
        floor = details.get("floor", {})
        return [
            f"{algebra.WORKLOAD_RELAXES_OPERATOR_FLOOR}: {name} is wider than the operator floor"
            f" (floor: {format_value(name, floor.get(name))})."
            for name in details.get("axes", [])
        ]
    fields = details.get("fields") or {}
    return [f"{name}: {message}" for name, message in fields.items()] or [exc.message]


@login_required
@require_http_methods(["GET", "POST"])
def floor_history(request: HttpRequest, slug: str) -> HttpResponse:
    access = _access(request, slug, write_role=Role.OPERATOR)
    workspace = access.workspace
    versions: list[PolicyVersionBase] = list(workspace.policy_versions.order_by("-version"))
    documents = {v.version: floor_document(v.document, v.relaxable_axes) for v in versions}
    errors: list[str] = []
    if request.method == "POST":
        target = _pick(versions, request.POST.get("version"), None)
        if target is None:
            raise Http404("No such version.")
        try:
            saved = services.workspace_policy_save(
                workspace=workspace,
                document=documents[target.version],
                author=access.caller.label,
                comment=f"Restored version {target.version}",
            )
        except (algebra.PolicyError, DomainError) as exc:
            errors = _restore_errors(exc)
        else:
            messages.success(
                request, f"Restored version {target.version} as version {saved.version}."
            )
            return redirect("policies:floor-history", slug=slug)
    context = {
        **access.context(),
        **_history_context(
            request,
            versions,
            documents,
            base_path=reverse("policies:floor-history", args=[slug]),
            environment=None,
        ),
        "restore_errors": errors,
        "can_restore": access.can_operate,
        "title": "Operator floor · history",
        "restore_url": reverse("policies:floor-history", args=[slug]),
    }
    if _wants_fragment(request):
        return render(request, "policies/_diff.html", context)
    return render(
        request, "policies/history.html", context, status=UNPROCESSABLE if errors else 200
    )


@login_required
@require_http_methods(["GET", "POST"])
def workload_history(request: HttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    access = _access(request, slug, write_role=Role.EDITOR)
    workload = _workload(access, workload_id)
    environment, environments = _environment(access.workspace, request.GET.get("environment"))
    versions = list(workload.policy_versions.filter(environment=environment).order_by("-version"))
    documents = {v.version: v.document for v in versions}
    errors: list[str] = []
    base_url = _workload_url("policies:workload-history", slug, workload, environment)
    if request.method == "POST":
        target = _pick(versions, request.POST.get("version"), None)
        if target is None:
            raise Http404("No such version.")
        try:
            saved = services.workload_policy_save(
                workload=workload,
                environment=environment,
                document=target.document,
                author=access.caller.label,
                comment=f"Restored version {target.version}",
            )
        except (algebra.PolicyError, DomainError) as exc:
            errors = _restore_errors(exc)
        else:
            messages.success(
                request, f"Restored version {target.version} as version {saved.version}."
            )
            return redirect(base_url)
    context = {
        **access.context(),
        **_history_context(
            request,
            versions,
            documents,
            base_path=reverse("policies:workload-history", args=[slug, workload.pk]),
            environment=environment,
            missing="inherits floor",
        ),
        "restore_errors": errors,
        "can_restore": access.can_edit,
        "title": f"{workload.name} · {environment or 'all environments'} · history",
        "workload": workload,
        "environments": environments,
        "restore_url": base_url,
        "form_url": _workload_url("policies:workload-policy", slug, workload, environment),
    }
    if _wants_fragment(request):
        return render(request, "policies/_diff.html", context)
    return render(
        request, "policies/history.html", context, status=UNPROCESSABLE if errors else 200
    )
