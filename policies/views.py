"""Policy pages: the operator floor, workload policies per environment, version history.

Each URL serves its full page and, for htmx requests, the fragment that changed (impact
preview, live validation, diff, environment switch). Reads are open to every member; writes
need the editor role (workload policies) or the operator role (the floor), checked before
anything else so a viewer's POST is a 403 whatever it carries.

A workload page asked for no environment opens on the one saved most recently (a workload
with only a prod policy opens on prod); ``?environment=`` (empty) asks for the
all-environments default, so every link and form these pages render names its environment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from policies import algebra, services
from policies.forms import (
    BASE_VERSION_FIELD,
    DiffRow,
    PolicyForm,
    diff_rows,
    domain_error_lines,
    floor_document,
)
from policies.impact import floor_change_impact
from policies.labels import axis_value
from policies.models import (
    PolicyVersionBase,
    Workload,
    WorkloadPolicyVersion,
    WorkspacePolicyVersion,
)
from policies.selectors import (
    effective_policy_for,
    workload_compliance,
    workload_policy_current,
    workspace_policy_current,
)
from portal.errors import DomainError, VersionConflict
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace
from portal.pages import PageAccess, safe_next, workspace_page
from portal.versioning import NO_VERSION, parse_base_version

UNPROCESSABLE = 422  # a submitted form with errors, re-rendered
CONFLICT = 409  # a form based on a version someone else has replaced since, re-rendered


def _access(request: HttpRequest, slug: str, *, write_role: str) -> PageAccess:
    required = write_role if request.method == "POST" else Role.VIEWER
    return workspace_page(request, slug, required=required)


def _workload(access: PageAccess, workload_id: uuid.UUID) -> Workload:
    return get_object_or_404(Workload, pk=workload_id, workspace=access.workspace)


class BadInput(Exception):
    """A query or form value that names nothing here: a 400 saying so (a 404 is a missing page)."""


def _bad_input(
    request: HttpRequest, access: PageAccess, message: str, *, back: str
) -> HttpResponse:
    context = {**access.context(), "message": message, "back_url": back}
    return render(request, "policies/bad_input.html", context, status=400)


ALL_ENVIRONMENTS = "All environments (default)"


def _environment(workspace: Workspace, raw: str | None) -> tuple[str, list[str]]:
    """The environment named in the request ('' = all environments) and the known ones."""
    known = list(workspace.environments.order_by("slug").values_list("slug", flat=True))
    environment = raw or ""
    if environment and environment not in known:
        raise BadInput(
            f"There is no environment {environment!r} in this workspace;"
            f" it has: {', '.join(known)}."
        )
    return environment, known


def _workload_url(name: str, slug: str, workload: Workload, environment: str) -> str:
    """A workload page for ``environment``, named even when it is '' (the default policy): a
    URL without one opens on the environment saved most recently."""
    url = reverse(name, args=[slug, workload.pk])
    return f"{url}?{urlencode({'environment': environment})}"


def _latest_by_environment(workload: Workload) -> dict[str, WorkloadPolicyVersion]:
    """The newest version of each of the workload's policies, by environment, in one query."""
    versions = workload.policy_versions.order_by("environment", "-version").distinct("environment")
    return {v.environment: v for v in versions}


def _most_recent_environment(
    latest: dict[str, WorkloadPolicyVersion], known: list[str]
) -> str | None:
    """The environment whose policy was saved last (None: no policy saved anywhere)."""
    saved = [v for env, v in latest.items() if env == "" or env in known]
    if not saved:
        return None
    return max(saved, key=lambda v: (v.created_at, v.pk)).environment


def _environment_label(environment: str) -> str:
    return environment or ALL_ENVIRONMENTS


@dataclass(frozen=True)
class EnvironmentTab:
    """One environment of a workload, marked with its own policy's newest version."""

    environment: str  # '' = all environments (the default policy)
    label: str
    latest: WorkloadPolicyVersion | None
    url: str
    selected: bool


def _environment_tabs(
    environment: str,
    known: list[str],
    latest: dict[str, WorkloadPolicyVersion],
    url: Callable[[str], str],
) -> list[EnvironmentTab]:
    return [
        EnvironmentTab(env, _environment_label(env), latest.get(env), url(env), env == environment)
        for env in ["", *known]
    ]


def _wants_fragment(request: HtmxHttpRequest) -> bool:
    """An htmx GET swaps a fragment in; a history restore (Back, cache miss) needs the page."""
    htmx = request.htmx
    return bool(htmx) and request.method == "GET" and not htmx.history_restore_request


@dataclass(frozen=True)
class Conflict:
    """A save refused because the form was based on an older version: what changed since."""

    base: int  # the version the form was opened at (0: none was saved)
    current: PolicyVersionBase  # the version saved since
    saves: int  # how many saves came in between
    rows: list[DiffRow]  # base -> current, axis by axis (empty if the base is unknown)
    by_you: bool  # the newer version is the same caller's (another tab, a double submit)


def _conflict(
    exc: VersionConflict,
    versions: QuerySet[Any],
    document: Callable[[Any], dict[str, Any]],
    *,
    missing: str,
    caller: str,
) -> Conflict:
    """What ``exc`` needs shown: who saved what since the form's base version."""
    found = {v.version: v for v in versions.filter(version__in=[exc.base, exc.current])}
    current = found[exc.current]
    base = found.get(exc.base)
    rows: list[DiffRow] = []
    if base is not None or exc.base == NO_VERSION:
        before = document(base) if base is not None else {}
        after = document(current)
        rows = diff_rows(
            algebra.diff_documents(before, after), before=before, after=after, missing=missing
        )
    return Conflict(
        base=exc.base,
        current=current,
        saves=max(exc.current - exc.base, 1),
        rows=rows,
        by_you=current.author == caller,
    )


# --- the operator floor ------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def floor(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = _access(request, slug, write_role=Role.OPERATOR)
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
                conflict = _conflict(
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
def workload_policy(request: HtmxHttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    access = _access(request, slug, write_role=Role.EDITOR)
    workspace = access.workspace
    workload = _workload(access, workload_id)
    raw = request.GET.get("environment")
    try:
        environment, environments = _environment(workspace, raw)
    except BadInput as exc:
        raise Http404(str(exc)) from None  # the policy page of an environment that is not there
    latest = _latest_by_environment(workload)
    # Asked for none, a page opens where the workload's policy was saved last; a form posted
    # without one (only an old page or a script would) is about the default, as it always was.
    opened_on_latest = False
    if raw is None and request.method == "GET":
        recent = _most_recent_environment(latest, environments)
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
                    base_version=form.base_version,
                )
            except VersionConflict as exc:
                conflict = _conflict(
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
                    _workload_url("policies:workload-policy", slug, workload, environment)
                )
        status = CONFLICT if conflict is not None else UNPROCESSABLE
    relaxing = algebra.check_workload(floor_version.document, current.document) if current else []
    context = {
        **access.context(),
        "workload": workload,
        "environment": environment,
        "environment_label": _environment_label(environment),
        "environments": environments,
        "environment_tabs": _environment_tabs(
            environment,
            environments,
            latest,
            lambda env: _workload_url("policies:workload-policy", slug, workload, env),
        ),
        "opened_on_latest": opened_on_latest,
        "current": current,
        "floor_version": floor_version,
        "form": form,
        "groups": form.groups(),
        "conflict": conflict,
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
        "effective": [(name, axis_value(name, effective.policy[name])) for name in algebra.AXES],
        "effective_error": "",
        "effective_source": source,
        "effective_conflicts": effective.conflicts,
    }


@login_required
@require_POST
def workload_narrow(request: HttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    """One click: save the workload's policy as the floor leaves it (``narrow_to_floor``)."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    workload = _workload(access, workload_id)
    fallback = reverse("policies:floor", args=[slug])
    try:
        environment, _ = _environment(access.workspace, request.POST.get("environment"))
    except BadInput as exc:
        return _bad_input(request, access, str(exc), back=safe_next(request, fallback))
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


# --- version history ---------------------------------------------------------------------------


def _version(versions: Sequence[PolicyVersionBase], raw: str) -> PolicyVersionBase | None:
    """The version a query or form value names, if it names one."""
    try:
        wanted = int(raw)
    except ValueError:
        return None
    return next((v for v in versions if v.version == wanted), None)


def _posted_base_version(request: HttpRequest) -> int | None:
    """The version a posted page was opened at (None: it sent none); ValueError if damaged."""
    raw = request.POST.get(BASE_VERSION_FIELD, "").strip()
    return parse_base_version(raw) if raw else None


def _compared(
    request: HttpRequest, versions: Sequence[PolicyVersionBase]
) -> tuple[PolicyVersionBase | None, PolicyVersionBase | None]:
    """The two versions to compare (``?a=&b=``, default: the latest against its predecessor)."""
    latest = versions[0] if versions else None
    previous = versions[1] if len(versions) > 1 else latest
    picked = []
    for name, default in (("a", previous), ("b", latest)):
        raw = request.GET.get(name, "")
        version = _version(versions, raw) if raw else default
        if raw and version is None:
            raise BadInput(
                f"There is no version {raw} of this policy to compare: pick two from the list."
            )
        picked.append(version)
    return picked[0], picked[1]


@dataclass
class _History:
    """What differs between the floor's history page and a workload's."""

    listed: Sequence[PolicyVersionBase]  # every version the page lists, newest first
    versions: Sequence[PolicyVersionBase]  # those of the shown policy: compared and restored
    documents: dict[int, dict[str, Any]]  # by version: what is diffed and what a restore saves
    # (document, comment, base version) → the new version, or the current one if unchanged
    save: Callable[[dict[str, Any], str, int | None], PolicyVersionBase]
    can_restore: bool
    page_url: str  # this page, with its environment
    base_path: str  # this page, without a query
    environment: str | None  # the shown policy's environment; None: the floor has none
    missing: str  # an axis a version does not set
    context: dict[str, Any]


@dataclass(frozen=True)
class _Entry:
    """One row of the version list: a version, and the links and forms beside it."""

    version: PolicyVersionBase
    environment: str | None  # None: the floor's
    environment_label: str
    current: bool  # the newest version of its policy
    compare_url: str  # its diff with the version before it ('' for a first version)
    restore_url: str
    base_version: int  # what a restore from this row is based on: its policy's newest


def _history_url(base_path: str, environment: str | None, **params: Any) -> str:
    keep = {} if environment is None else {"environment": environment}
    query = urlencode({**keep, **params})
    return f"{base_path}?{query}" if query else base_path


def _entries(history: _History) -> list[_Entry]:
    newest: dict[str | None, int] = {}
    for v in history.listed:
        env = getattr(v, "environment", None)
        newest[env] = max(newest.get(env, 0), v.version)
    entries = []
    for v in history.listed:
        env = getattr(v, "environment", None)
        compare = (
            _history_url(history.base_path, env, a=v.version - 1, b=v.version)
            if v.version > 1
            else ""
        )
        entries.append(
            _Entry(
                version=v,
                environment=env,
                environment_label=_environment_label(env or ""),
                current=v.version == newest[env],
                compare_url=compare,
                restore_url=_history_url(history.base_path, env),
                base_version=newest[env],
            )
        )
    return entries


def _history_page(request: HtmxHttpRequest, access: PageAccess, history: _History) -> HttpResponse:
    """A version history: the versions, a diff of any two, and restore (a new save)."""
    versions, documents = history.versions, history.documents
    errors: list[str] = []  # why a restore was refused
    input_error = ""  # a version named in the request that is not there
    status = 200
    if request.method == "POST":
        raw = request.POST.get("version", "")
        target = _version(versions, raw)
        try:
            base = _posted_base_version(request)
        except ValueError:
            input_error = (
                "This page's version field was damaged, so it cannot tell whether someone saved"
                " since it was opened; nothing was restored. Reload the page and try again."
            )
            status = 400
        else:
            if target is None:
                input_error = (
                    f"There is no version {raw or '(none given)'} to restore; nothing was restored."
                )
                status = 400
        if target is not None and not input_error:
            try:
                saved = history.save(
                    documents[target.version], f"Restored version {target.version}", base
                )
            except VersionConflict as exc:
                who = next((v.author for v in versions if v.version == exc.current), "someone")
                input_error = (
                    f"Version {target.version} was not restored: {who} saved version"
                    f" {exc.current} since this page was opened at version {exc.base}. The list"
                    " below is up to date; restore again if you still want it."
                )
                status = CONFLICT
            except (algebra.PolicyError, DomainError) as exc:
                errors, status = domain_error_lines(exc), UNPROCESSABLE
            else:
                where = (
                    ""
                    if history.environment is None
                    else " of " + _environment_label(history.environment)
                )
                if saved.pk == versions[0].pk:
                    messages.info(
                        request,
                        f"No changes to save: version {target.version}{where} is the same as"
                        f" the current version {saved.version}.",
                    )
                else:
                    messages.success(
                        request,
                        f"Restored version {target.version}{where} as version {saved.version}.",
                    )
                return redirect(history.page_url)
    try:
        a, b = _compared(request, versions)
    except BadInput as exc:
        (a, b), input_error, status = (None, None), str(exc), 400
    rows = []
    if a is not None and b is not None:
        before, after = documents[a.version], documents[b.version]
        rows = diff_rows(
            algebra.diff_documents(before, after),
            before=before,
            after=after,
            missing=history.missing,
        )
    context = {
        **access.context(),
        **history.context,
        "versions": versions,
        "entries": _entries(history),
        "a": a,
        "b": b,
        "diff": rows,
        "latest": versions[0] if versions else None,
        "base_path": history.base_path,
        "environment": history.environment,
        "environment_label": _environment_label(history.environment or ""),
        "restore_errors": errors,
        "input_error": input_error,
        "can_restore": history.can_restore,
    }
    if status == 200 and _wants_fragment(request):
        return render(request, "policies/_compare.html", context)
    return render(request, "policies/history.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def floor_history(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = _access(request, slug, write_role=Role.OPERATOR)
    workspace = access.workspace
    versions: list[WorkspacePolicyVersion] = list(workspace.policy_versions.order_by("-version"))

    def save(document: dict[str, Any], comment: str, base: int | None) -> PolicyVersionBase:
        return services.workspace_policy_save(
            workspace=workspace,
            document=document,
            author=access.caller.label,
            comment=comment,
            base_version=base,
        )

    url = reverse("policies:floor-history", args=[slug])
    history = _History(
        listed=versions,
        versions=versions,
        documents={v.version: floor_document(v.document, v.relaxable_axes) for v in versions},
        save=save,
        can_restore=access.can_operate,
        page_url=url,
        base_path=url,
        environment=None,
        missing="—",
        context={"title": "Operator floor · history"},
    )
    return _history_page(request, access, history)


@login_required
@require_http_methods(["GET", "POST"])
def workload_history(request: HtmxHttpRequest, slug: str, workload_id: uuid.UUID) -> HttpResponse:
    """Every environment's versions in one list; the one asked for (else, as on the policy
    page, the one saved most recently) is the policy compared and restored."""
    access = _access(request, slug, write_role=Role.EDITOR)
    workload = _workload(access, workload_id)
    base_path = reverse("policies:workload-history", args=[slug, workload.pk])
    raw = request.GET.get("environment")
    try:
        environment, environments = _environment(access.workspace, raw)
    except BadInput as exc:
        return _bad_input(request, access, str(exc), back=base_path)
    listed = list(workload.policy_versions.order_by("-created_at", "-pk"))
    latest: dict[str, WorkloadPolicyVersion] = {}
    for v in listed:
        if v.environment not in latest or v.version > latest[v.environment].version:
            latest[v.environment] = v
    if raw is None and request.method == "GET":
        environment = _most_recent_environment(latest, environments) or ""
    versions = sorted((v for v in listed if v.environment == environment), key=lambda v: -v.version)

    def save(document: dict[str, Any], comment: str, base: int | None) -> PolicyVersionBase:
        return services.workload_policy_save(
            workload=workload,
            environment=environment,
            document=document,
            author=access.caller.label,
            comment=comment,
            base_version=base,
        )

    history = _History(
        listed=listed,
        versions=versions,
        documents={v.version: v.document for v in versions},
        save=save,
        can_restore=access.can_edit,
        page_url=_workload_url("policies:workload-history", slug, workload, environment),
        base_path=base_path,
        environment=environment,
        missing="inherits floor",
        context={
            "title": f"{workload.name} · policy history",
            "workload": workload,
            "environments": environments,
            "environment_tabs": _environment_tabs(
                environment,
                environments,
                latest,
                lambda env: _workload_url("policies:workload-history", slug, workload, env),
            ),
            "form_url": _workload_url("policies:workload-policy", slug, workload, environment),
        },
    )
    return _history_page(request, access, history)


@login_required
@require_POST
def query_storage(request: HttpRequest, slug: str) -> HttpResponse:
    """Switch whether assembled events keep the query text (the audit trail's page offers
    it): operators only, audited."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    choice = request.POST.get("store")
    if choice not in ("on", "off"):
        messages.error(request, "Choose to store queries or not.")
    else:
        services.workspace_store_queries_set(
            workspace=access.workspace, enabled=choice == "on", author=access.caller.label
        )
        messages.success(
            request,
            "Recall queries are stored from now on."
            if choice == "on"
            else "Recall queries are no longer stored (those already stored stay).",
        )
    return redirect("audit:events", slug=slug)
