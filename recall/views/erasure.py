"""Erasing an actor (a data-subject request): confirm with the count, then erase."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal.errors import DomainError
from portal.models import Role
from portal.pages import workspace_page
from recall import erasure
from recall.views.memories import memories_url


@login_required
@require_http_methods(["GET", "POST"])
def actor_erase(request: HttpRequest, slug: str) -> HttpResponse:
    """Erase an actor (a data-subject request): confirm with the count (GET), erase (POST).
    Operators only."""
    access = workspace_page(request, slug, required=Role.OPERATOR)
    actor_id = (request.POST if request.method == "POST" else request.GET).get("actor", "")
    try:
        actor, count = erasure.actor_erase_preview(workspace=access.workspace, actor_id=actor_id)
    except DomainError as exc:
        raise Http404(exc.message) from None
    error = ""
    if request.method == "POST" and actor.erased_at is None:
        typed = request.POST.get("confirm", "").strip()
        if typed != str(count):
            error = f"Type {count}, the number of memories to erase, to confirm."
        else:
            try:
                done = erasure.actor_erase(
                    workspace=access.workspace,
                    actor_id=actor.external_id,
                    author=access.caller.label,
                    expected_count=count,
                )
            except DomainError as exc:
                error = exc.message
            else:
                messages.success(
                    request,
                    f"Erased {actor.external_id}: {done.count} memor"
                    f"{'y' if done.count == 1 else 'ies'} deleted"
                    + (
                        f", {done.archive_lines} archived lines removed"
                        if done.archive_lines
                        else ""
                    )
                    + (f", {done.queries} stored queries removed" if done.queries else "")
                    + f" (audit event #{done.event_id}).",
                )
                return redirect(memories_url(slug, actor=actor.external_id))
    context = {
        **access.context(),
        "actor": actor,
        "count": count,
        "error": error,
        "list_url": memories_url(slug, actor=actor.external_id),
    }
    return render(request, "recall/actor_erase.html", context, status=422 if error else 200)
