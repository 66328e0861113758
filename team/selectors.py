"""Who may call a workspace, read: its API tokens and its members, for the page and the API
alike."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F, QuerySet
from django.utils import timezone

from portal.errors import NotFoundError
from portal.models import ApiToken, Membership, Workspace

ACTIVE, EXPIRED, REVOKED = "active", "expired", "revoked"


def api_tokens(*, workspace: Workspace) -> QuerySet[ApiToken]:
    """The workspace's tokens: the live ones first, newest first, then the revoked ones,
    the latest revoked first."""
    return ApiToken.objects.filter(workspace=workspace).order_by(
        F("revoked_at").desc(nulls_first=True), "-created_at", "-pk"
    )


def api_token_get(*, workspace: Workspace, token_id: int) -> ApiToken:
    token = api_tokens(workspace=workspace).select_related("workspace").filter(pk=token_id).first()
    if token is None:
        raise NotFoundError(f"No API token {token_id} in workspace {workspace.slug!r}.")
    return token


def token_status(token: ApiToken, now: datetime | None = None) -> str:
    """``active``, ``expired`` or ``revoked``."""
    if token.revoked_at is not None:
        return REVOKED
    if token.expires_at is not None and token.expires_at <= (now or timezone.now()):
        return EXPIRED
    return ACTIVE


def token_previous_live(token: ApiToken, now: datetime | None = None) -> bool:
    """Whether the token's previous secret (a rotation's) still works."""
    return (
        token.revoked_at is None
        and token.previous_valid_until is not None
        and token.previous_valid_until > (now or timezone.now())
    )


def members(*, workspace: Workspace) -> QuerySet[Membership]:
    return (
        Membership.objects.filter(workspace=workspace)
        .select_related("user")
        .order_by("user__username")
    )


def member_get(*, workspace: Workspace, username: str) -> Membership:
    membership = members(workspace=workspace).filter(user__username=username).first()
    if membership is None:
        raise NotFoundError(f"{username!r} is not a member of workspace {workspace.slug!r}.")
    return membership
