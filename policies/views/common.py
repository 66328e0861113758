"""What the policy pages share: access, the environment a page is about, its tabs, and how a
save that lost a race (a version conflict) is shown.

A workload page asked for no environment opens on the one saved most recently (a workload
with only a prod policy opens on prod); ``?environment=`` (empty) asks for the
all-environments default, so every link and form these pages render names its environment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from policies import algebra
from policies.forms import (
    DiffRow,
    diff_rows,
)
from policies.models import (
    PolicyVersionBase,
    Workload,
    WorkloadPolicyVersion,
)
from portal.errors import VersionConflict
from portal.http import HtmxHttpRequest
from portal.models import Role, Workspace
from portal.pages import PageAccess, workspace_page
from portal.versioning import NO_VERSION

UNPROCESSABLE = 422  # a submitted form with errors, re-rendered
CONFLICT = 409  # a form based on a version someone else has replaced since, re-rendered


def page_access(request: HttpRequest, slug: str, *, write_role: str) -> PageAccess:
    required = write_role if request.method == "POST" else Role.VIEWER
    return workspace_page(request, slug, required=required)


def workload_of(access: PageAccess, workload_id: uuid.UUID) -> Workload:
    return get_object_or_404(Workload, pk=workload_id, workspace=access.workspace)


class BadInput(Exception):
    """A query or form value that names nothing here: a 400 saying so (a 404 is a missing page)."""


def bad_input(request: HttpRequest, access: PageAccess, message: str, *, back: str) -> HttpResponse:
    context = {**access.context(), "message": message, "back_url": back}
    return render(request, "policies/bad_input.html", context, status=400)


ALL_ENVIRONMENTS = "All environments (default)"


def environment_of(workspace: Workspace, raw: str | None) -> tuple[str, list[str]]:
    """The environment named in the request ('' = all environments) and the known ones."""
    known = list(workspace.environments.order_by("slug").values_list("slug", flat=True))
    environment = raw or ""
    if environment and environment not in known:
        raise BadInput(
            f"There is no environment {environment!r} in this workspace;"
            f" it has: {', '.join(known)}."
        )
    return environment, known


def workload_url(name: str, slug: str, workload: Workload, environment: str) -> str:
    """A workload page for ``environment``, named even when it is '' (the default policy): a
    URL without one opens on the environment saved most recently."""
    url = reverse(name, args=[slug, workload.pk])
    return f"{url}?{urlencode({'environment': environment})}"


def latest_by_environment(workload: Workload) -> dict[str, WorkloadPolicyVersion]:
    """The newest version of each of the workload's policies, by environment, in one query."""
    versions = workload.policy_versions.order_by("environment", "-version").distinct("environment")
    return {v.environment: v for v in versions}


def most_recent_environment(
    latest: dict[str, WorkloadPolicyVersion], known: list[str]
) -> str | None:
    """The environment whose policy was saved last (None: no policy saved anywhere)."""
    saved = [v for env, v in latest.items() if env == "" or env in known]
    if not saved:
        return None
    return max(saved, key=lambda v: (v.created_at, v.pk)).environment


def environment_label(environment: str) -> str:
    return environment or ALL_ENVIRONMENTS


@dataclass(frozen=True)
class EnvironmentTab:
    """One environment of a workload, marked with its own policy's newest version."""

    environment: str  # '' = all environments (the default policy)
    label: str
    latest: WorkloadPolicyVersion | None
    url: str
    selected: bool


def environment_tabs(
    environment: str,
    known: list[str],
    latest: dict[str, WorkloadPolicyVersion],
    url: Callable[[str], str],
) -> list[EnvironmentTab]:
    return [
        EnvironmentTab(env, environment_label(env), latest.get(env), url(env), env == environment)
        for env in ["", *known]
    ]


def wants_fragment(request: HtmxHttpRequest) -> bool:
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


def conflict_of(
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
