"""Version history of the floor and of a workload's policies: compare two versions, restore one."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from policies import algebra, services
from policies.algebra import floor_document
from policies.forms import (
    BASE_VERSION_FIELD,
    diff_rows,
    domain_error_lines,
)
from policies.models import (
    PolicyVersionBase,
    WorkloadPolicyVersion,
    WorkspacePolicyVersion,
)
from policies.views.common import (
    CONFLICT,
    UNPROCESSABLE,
    BadInput,
    bad_input,
    environment_label,
    environment_of,
    environment_tabs,
    most_recent_environment,
    page_access,
    wants_fragment,
    workload_of,
    workload_url,
)
from portal.errors import DomainError, VersionConflict
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import PageAccess
from portal.versioning import parse_base_version

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
                environment_label=environment_label(env or ""),
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
                    else " of " + environment_label(history.environment)
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
        "environment_label": environment_label(history.environment or ""),
        "restore_errors": errors,
        "input_error": input_error,
        "can_restore": history.can_restore,
    }
    if status == 200 and wants_fragment(request):
        return render(request, "policies/_compare.html", context)
    return render(request, "policies/history.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def floor_history(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = page_access(request, slug, write_role=Role.OPERATOR)
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
    access = page_access(request, slug, write_role=Role.EDITOR)
    workload = workload_of(access, workload_id)
    base_path = reverse("policies:workload-history", args=[slug, workload.pk])
    raw = request.GET.get("environment")
    try:
        environment, environments = environment_of(access.workspace, raw)
    except BadInput as exc:
        return bad_input(request, access, str(exc), back=base_path)
    listed = list(workload.policy_versions.order_by("-created_at", "-pk"))
    latest: dict[str, WorkloadPolicyVersion] = {}
    for v in listed:
        if v.environment not in latest or v.version > latest[v.environment].version:
            latest[v.environment] = v
    if raw is None and request.method == "GET":
        environment = most_recent_environment(latest, environments) or ""
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
        page_url=workload_url("policies:workload-history", slug, workload, environment),
        base_path=base_path,
        environment=environment,
        missing="inherits floor",
        context={
            "title": f"{workload.name} · policy history",
            "workload": workload,
            "environments": environments,
            "environment_tabs": environment_tabs(
                environment,
                environments,
                latest,
                lambda env: workload_url("policies:workload-history", slug, workload, env),
            ),
            "form_url": workload_url("policies:workload-policy", slug, workload, environment),
        },
    )
    return _history_page(request, access, history)
