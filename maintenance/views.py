"""Maintenance pages: the sweeps and their runs, one run with its items and progress, the
confirmation before an execute, and the lifecycle settings with their history.

Every member reads; editors preview; operators execute, cancel, restore and change the
settings. A running run's progress bar polls the run page itself (htmx, target
``run-progress``), which answers with the bar alone, and asks for a full reload once the
run has finished.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from maintenance import archives, services
from maintenance.forms import LifecycleSettingsForm
from maintenance.lifecycle import (
    SETTINGS_BY_NAME,
    SWEEP_SUMMARY,
    SWEEPS,
    LifecycleSettingsInvalid,
    default_settings,
    normalize_settings,
)
from maintenance.models import (
    ACTIVE_STATUSES,
    LifecycleSettingsVersion,
    MaintenanceItem,
    MaintenanceRun,
    Mode,
    Outcome,
)
from maintenance.selectors import archive_manifest, lifecycle_settings_current, runs_for
from maintenance.words import (
    STATUS_BADGES,
    SWEEP_SETTINGS,
    SWEEP_TITLES,
    action,
    item_words,
    setting_value,
)
from policies import algebra
from portal.errors import DomainError, ValidationFailed
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import PageAccess, workspace_page
from portal.tasks import eager
from recall.models import MemoryRecord

ITEMS_PER_PAGE = 25
OUTCOME_LABELS = {"": "all", "listed": "not yet processed"}
UNPROCESSABLE = 422


def _run_or_404(access: PageAccess, run_id: int) -> MaintenanceRun:
    run = (
        MaintenanceRun.objects.select_related("workspace", "preview")
        .filter(pk=run_id, workspace=access.workspace)
        .first()
    )
    if run is None:
        raise Http404("No such maintenance run.")
    return run


def _run_url(run: MaintenanceRun) -> str:
    return reverse("maintenance:run", args=[run.workspace.slug, run.pk])


def _run_row(run: MaintenanceRun) -> dict[str, Any]:
    return {
        "run": run,
        "title": SWEEP_TITLES[run.sweep],
        "badge": STATUS_BADGES[run.status],
        "url": _run_url(run),
    }


@login_required
@require_GET
def index(request: HttpRequest, slug: str) -> HttpResponse:
    access = workspace_page(request, slug)
    version = lifecycle_settings_current(workspace=access.workspace)
    document = version.document
    runs = list(runs_for(workspace=access.workspace).select_related("workspace")[:200])
    sweeps = []
    for sweep in SWEEPS:
        mine = [r for r in runs if r.sweep == sweep]
        sweeps.append(
            {
                "name": sweep,
                "title": SWEEP_TITLES[sweep],
                "summary": SWEEP_SUMMARY[sweep],
                "schedule": document["schedule"][sweep],
                "settings": [
                    (SETTINGS_LABELS[name], setting_value(name, document[name]))
                    for name in SWEEP_SETTINGS[sweep]
                ],
                "runs": [_run_row(r) for r in mine[:3]],
            }
        )
    context = {
        **access.context(),
        "version": version,
        "every": setting_value("scheduleEveryHours", document["scheduleEveryHours"]),
        "sweeps": sweeps,
        "active": [_run_row(r) for r in runs if r.status in ACTIVE_STATUSES],
        "recent": [_run_row(r) for r in runs[:15]],
        "memories": MemoryRecord.objects.filter(workspace=access.workspace).count(),
        "eager": eager(),
    }
    return render(request, "maintenance/index.html", context)


SETTINGS_LABELS = {name: setting.label for name, setting in SETTINGS_BY_NAME.items()}


@login_required
@require_POST
def start(request: HttpRequest, slug: str, sweep: str) -> HttpResponse:
    """Preview a sweep (editors), from the Maintenance page."""
    access = workspace_page(request, slug, required=Role.EDITOR)
    if sweep not in SWEEPS:
        raise Http404("No such sweep.")
    try:
        run = services.maintenance_start(
            workspace=access.workspace, sweep=sweep, mode=Mode.PREVIEW, author=access.caller.label
        )
    except DomainError as exc:
        messages.error(request, f"Could not preview {SWEEP_TITLES[sweep].lower()}: {exc.message}")
        return redirect("maintenance:index", slug=slug)
    return redirect(_run_url(run))


def _progress_context(run: MaintenanceRun) -> dict[str, Any]:
    return {"run": run, "badge": STATUS_BADGES[run.status], "url": _run_url(run)}


@login_required
@require_GET
def run_page(request: HtmxHttpRequest, slug: str, run_id: int) -> HttpResponse:
    access = workspace_page(request, slug)
    run = _run_or_404(access, run_id)
    if request.htmx and request.htmx.target == "run-progress":
        response = render(request, "maintenance/_progress.html", _progress_context(run))
        if run.finished:
            response["HX-Refresh"] = "true"  # the items and actions have changed
        return response
    outcome = request.GET.get("outcome", "")
    if outcome not in ("", *Outcome.values):
        outcome = ""
    items = run.items.order_by("memory_id")
    if outcome:
        items = items.filter(outcome=outcome)
    page = Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    listed: list[MaintenanceItem] = list(page)
    contents = dict(
        MemoryRecord.objects.filter(
            workspace=access.workspace, pk__in=[item.memory_id for item in listed]
        ).values_list("pk", "content")
    )
    rows = [
        {
            "item": item,
            "words": item_words(run, item),
            "exists": item.memory_id in contents,
            "content": contents.get(item.memory_id, ""),
        }
        for item in listed
    ]
    execution = run.executions.order_by("-id").first() if run.mode == Mode.PREVIEW else None
    current = lifecycle_settings_current(workspace=access.workspace)
    executable = (
        run.mode == Mode.PREVIEW
        and run.status == "succeeded"
        and run.total > 0
        and (execution is None or execution.status in ("refused", "cancelled", "failed"))
    )
    stale_reason = ""
    if executable:
        try:
            services._usable_preview(access.workspace, run.sweep, run.pk, current)
        except DomainError as exc:
            stale_reason = exc.message
    counts = {
        outcome_name: run.items.filter(outcome=outcome_name).count()
        for outcome_name in Outcome.values
    }
    context = {
        **access.context(),
        **_progress_context(run),
        "title": SWEEP_TITLES[run.sweep],
        "summary": SWEEP_SUMMARY[run.sweep],
        "page": page,
        "rows": rows,
        "outcome": outcome,
        "counts": counts,
        "outcome_links": [
            (
                OUTCOME_LABELS.get(name, name),
                f"?{urlencode({'outcome': name})}" if name else "?",
                name == outcome,
                counts[name] if name else run.total,
            )
            for name in ("", *Outcome.values)
        ],  # fmt: skip
        "execution": execution,
        "executable": executable and not stale_reason,
        "stale_reason": stale_reason,
        "action_words": action(run.sweep, run.total),
        "has_archive": run.sweep == "retention" and run.mode == Mode.EXECUTE,
        "manifest": archive_manifest(run)
        if run.sweep == "retention" and run.mode == Mode.EXECUTE
        else None,
        "settings_current": current.version == run.settings_version,
    }
    return render(request, "maintenance/run.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def execute(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """Confirm (GET), then execute (POST) a preview: operators only."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    preview = _run_or_404(access, run_id)
    if preview.mode != Mode.PREVIEW:
        raise Http404("Only a preview is executed.")
    error = ""
    if request.method == "POST":
        try:
            confirm = int(request.POST.get("confirm", ""))
        except ValueError:
            error = "Confirm the number of memories to change."
        else:
            try:
                run = services.maintenance_start(
                    workspace=access.workspace,
                    sweep=preview.sweep,
                    mode=Mode.EXECUTE,
                    author=access.caller.label,
                    preview_id=preview.pk,
                    confirm=confirm,
                )
            except DomainError as exc:
                error = exc.message
            else:
                if run.finished:
                    messages.success(
                        request,
                        f"{SWEEP_TITLES[run.sweep]} run {run.pk} {run.status}: changed"
                        f" {run.applied} of {run.total}, skipped {run.skipped}.",
                    )
                return redirect(_run_url(run))
    context = {
        **access.context(),
        "preview": preview,
        "title": SWEEP_TITLES[preview.sweep],
        "summary": SWEEP_SUMMARY[preview.sweep],
        "action_words": action(preview.sweep, preview.total),
        "error": error,
        "preview_url": _run_url(preview),
        "retention": preview.sweep == "retention",
        "archive_days": setting_value(
            "archiveRetentionDays", preview.settings["archiveRetentionDays"]
        ),
    }
    return render(
        request, "maintenance/confirm.html", context, status=UNPROCESSABLE if error else 200
    )


@login_required
@require_POST
def cancel(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    access = workspace_page(request, slug, required=Role.OPERATOR)
    run = _run_or_404(access, run_id)
    try:
        services.maintenance_cancel(run=run, author=access.caller.label)
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Cancelled run {run.pk}; what it changed so far stays changed.")
    return redirect(_run_url(run))


@login_required
@require_POST
def restore(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    access = workspace_page(request, slug, required=Role.OPERATOR)
    run = _run_or_404(access, run_id)
    try:
        result = archives.maintenance_archive_restore(run=run, author=access.caller.label)
    except DomainError as exc:
        messages.error(request, f"Nothing was restored: {exc.message}")
    else:
        already = f"; {result.already_present} were already back" if result.already_present else ""
        messages.success(
            request, f"Restored {result.restored} memories under their own ids{already}."
        )
    return redirect(_run_url(run))


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest, slug: str) -> HttpResponse:
    required = Role.OPERATOR if request.method == "POST" else Role.VIEWER
    access = workspace_page(request, slug, required=required)
    current = lifecycle_settings_current(workspace=access.workspace)
    form = LifecycleSettingsForm(
        request.POST if request.method == "POST" else None, initial=current.document
    )
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                normalize_settings(form.document())
                version = services.lifecycle_settings_save(
                    workspace=access.workspace,
                    document=form.document(),
                    author=access.caller.label,
                    comment=form.cleaned_data["comment"],
                )
            except LifecycleSettingsInvalid as exc:
                form.add_rule_errors(exc.fields)
            except ValidationFailed as exc:
                form.add_rule_errors(exc.details.get("fields", {}))
            else:
                if version.version == current.version:
                    messages.info(request, "Nothing changed: the settings are as they were.")
                else:
                    messages.success(
                        request, f"Saved the lifecycle settings as v{version.version}."
                    )
                return redirect("maintenance:settings", slug=slug)
        status = UNPROCESSABLE
    versions = list(
        LifecycleSettingsVersion.objects.filter(workspace=access.workspace).order_by("-version")
    )
    history = []
    for index, version in enumerate(versions):
        before = versions[index + 1].document if index + 1 < len(versions) else None
        base = before or default_settings()
        history.append(
            {
                "version": version,
                "changes": [
                    (
                        SETTINGS_LABELS.get(name, name),
                        name,
                        setting_value(name, change["before"])
                        if change["before"] is not None
                        else "—",
                        setting_value(name, change["after"]),
                    )
                    for name, change in algebra.diff_documents(base, version.document).items()
                ],  # fmt: skip
            }
        )
    context = {
        **access.context(),
        "current": current,
        "form": form,
        "groups": form.groups(),
        "history": history,
    }
    return render(request, "maintenance/settings.html", context, status=status)
