"""Maintenance pages: the sweeps and their runs, one run with its items and progress, the
confirmations before an execute, a revert and a memory's reactivation, and the lifecycle
settings with their history.

Every member reads; editors preview; operators execute, cancel, revert, restore, reactivate
and change the settings. A running run's progress bar polls the run page itself (htmx, target
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
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from maintenance import archives, reverts, services
from maintenance.forms import LifecycleSettingsForm, ReactivateForm
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
    RevertOutcome,
)
from maintenance.selectors import (
    archive_manifest,
    lifecycle_settings_current,
    memory_lifecycle,
    runs_for,
)
from maintenance.words import (
    STATUS_BADGES,
    SWEEP_SETTINGS,
    SWEEP_TITLES,
    action,
    item_words,
    revert_words,
    setting_value,
    undo_words,
)
from policies import algebra, labels
from portal.errors import DomainError, UnprocessableError, ValidationFailed
from portal.form_errors import add_domain_error
from portal.http import HtmxHttpRequest
from portal.models import Role
from portal.pages import PageAccess, workspace_page
from portal.tasks import eager
from recall import services as recall_services
from recall.models import MemoryRecord

ITEMS_PER_PAGE = 25
# How many memories a revert's confirmation lists, of those it puts back and those it skips.
REVERT_LISTED = 50
REVERT_SKIPS_LISTED = 200
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
    # A sessions run lists sessions (their ids in memory_id): no memory content to show.
    memory_ids = [] if run.sweep == "sessions" else [item.memory_id for item in listed]
    contents = dict(
        MemoryRecord.objects.filter(workspace=access.workspace, pk__in=memory_ids).values_list(
            "pk", "content"
        )
    )
    rows = [
        {
            "item": item,
            "words": item_words(run, item),
            "exists": item.memory_id in contents,
            "content": contents.get(item.memory_id, ""),
            "revert_note": reverts.SKIP_REASONS.get(item.revert_reason, ""),
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
        **_revert_context(run),
    }
    return render(request, "maintenance/run.html", context)


def _revert_context(run: MaintenanceRun) -> dict[str, Any]:
    """Whether the run page offers "Revert this run", or says why not, or what a revert did."""
    if run.mode != Mode.EXECUTE or not run.finished:
        return {"revertible": False, "revert_refusal": "", "reverted": None}
    if run.reverted_at is not None:
        counts = {
            name: run.items.filter(revert_outcome=name).count() for name in RevertOutcome.values
        }
        return {"revertible": False, "revert_refusal": "", "reverted": counts}
    refusal = reverts.revert_refusal(run)
    # A retention run's page offers its archive instead.
    shown = refusal is not None and run.sweep != "retention"
    return {
        "revertible": refusal is None,
        "revert_refusal": refusal.message if shown and refusal is not None else "",
        "reverted": None,
    }


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
        "undo": undo_words(
            preview.sweep,
            setting_value("archiveRetentionDays", preview.settings["archiveRetentionDays"]),
        ),
    }
    return render(
        request, "maintenance/confirm.html", context, status=UNPROCESSABLE if error else 200
    )


@login_required
@require_http_methods(["GET", "POST"])
def revert(request: HttpRequest, slug: str, run_id: int) -> HttpResponse:
    """Preview a revert of an executed run (GET), then execute it (POST): operators only."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    run = _run_or_404(access, run_id)
    error = ""
    status = 200
    if request.method == "POST":
        try:
            confirm = int(request.POST.get("confirm", ""))
        except ValueError:
            error, status = "Confirm the number of memories to put back.", UNPROCESSABLE
        else:
            try:
                done = reverts.maintenance_revert(
                    run=run, author=access.caller.label, confirm=confirm
                )
            except DomainError as exc:
                error, status = exc.message, exc.status
            else:
                messages.success(
                    request,
                    f"Reverted {SWEEP_TITLES[run.sweep].lower()} run {run.pk}: put back"
                    f" {len(done.restore)} of {done.changed} memories, skipped"
                    f" {len(done.skipped)}.",
                )
                return redirect(_run_url(run))
        run.refresh_from_db()
    plan = None
    try:
        plan = reverts.maintenance_revert_preview(run=run)
    except DomainError as exc:
        if not error:
            error, status = exc.message, exc.status
    context: dict[str, Any] = {
        **access.context(),
        "run": run,
        "title": SWEEP_TITLES[run.sweep],
        "run_url": _run_url(run),
        "plan": plan,
        "error": error,
    }
    if plan is not None:
        shown = plan.restore[:REVERT_LISTED]
        skips = plan.skipped[:REVERT_SKIPS_LISTED]
        items = {item.memory_id: item for item in run.items.filter(memory_id__in=shown)}
        contents = dict(
            MemoryRecord.objects.filter(
                workspace=access.workspace, pk__in=[*shown, *(s.memory_id for s in skips)]
            ).values_list("pk", "content")
        )
        context.update(
            fields=", ".join(labels.value_label(name) for name in plan.fields),
            restore_rows=[
                {
                    "item": items[pk],
                    "change": revert_words(items[pk]),
                    "content": contents.get(pk, ""),
                }
                for pk in shown
            ],
            skip_rows=[{"skip": skip, "exists": skip.memory_id in contents} for skip in skips],
        )
    return render(request, "maintenance/revert.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def reactivate(request: HttpRequest, slug: str, memory_id: int) -> HttpResponse:
    """Confirm (GET), then make active again (POST) a stale or expired memory: operators."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    memory = (
        MemoryRecord.objects.select_related("actor", "workspace")
        .defer("embedding")
        .filter(pk=memory_id, workspace=access.workspace)
        .first()
    )
    if memory is None:
        raise Http404("No such memory.")
    memory_url = reverse("recall:memory", args=[slug, memory.pk])
    form = ReactivateForm(request.POST if request.method == "POST" else None)
    status = 200
    if form.is_bound:
        if form.is_valid():
            try:
                recall_services.memory_reactivate(
                    memory=memory,
                    author=access.caller.label,
                    expires_at=form.cleaned_data["expires_at"],
                )
            except DomainError as exc:
                add_domain_error(form, exc, aliases={"expiresAt": "expires_at"})
                status = exc.status if exc.status == 409 else UNPROCESSABLE
            else:
                messages.success(request, f"Reactivated memory {memory.pk}.")
                return redirect(memory_url)
        else:
            status = UNPROCESSABLE
    now = timezone.now()
    context = {
        **access.context(),
        "m": memory,
        "form": form,
        "memory_url": memory_url,
        "reactivatable": memory.lifecycle_status in recall_services.REACTIVATABLE,
        "expiry_past": memory.expires_at is not None and memory.expires_at <= now,
        "state": memory_lifecycle(memory=memory, now=now),
    }
    return render(request, "maintenance/reactivate.html", context, status=status)


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
            except (ValidationFailed, UnprocessableError) as exc:
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
