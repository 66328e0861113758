"""Who may call a workspace, changed: API tokens issued, rotated and revoked; members added,
their role changed, removed. Each change writes its audit event in the same transaction.

A token's secret is returned once, by the service that makes it (issue, rotate), and only
its SHA-256 and its first characters (``prefix``) are stored; no event records more than
the prefix.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from policies.models import Workload
from portal.errors import ConflictError, NotFoundError, UnprocessableError, ValidationFailed
from portal.input_guard import has_control
from portal.models import (
    MEMBER_ROLES,
    ApiToken,
    Environment,
    Membership,
    Role,
    Workspace,
    hash_token,
)
from portal.permissions import AGENT_SCOPES, scopes_invalid

NAME_MAX = 100
# A token's name as the API states it: not blank, no control character (Unicode Cc).
NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*[^\x00-\x1f\x7f-\x9f\s][^\x00-\x1f\x7f-\x9f]*$"
RATE_MAX = 1_000_000
# How long a rotated token's previous secret may keep working, at most.
ROTATION_GRACE_MAX = timedelta(days=30)
MEMBER_ROLE_VALUES = [value for value, _ in MEMBER_ROLES]


@dataclass(frozen=True)
class TokenGrant:
    """What a token may do, as asked for: its role, and for an agent its scopes (None: all
    an agent may have) and binding (no workload, no environment: any)."""

    role: str
    scopes: Iterable[str] | None = None
    workloads: Iterable[Any] = ()
    environments: Iterable[str] = ()
    expires_at: datetime | None = None
    api_rate_per_minute: int | None = None
    recall_rate_per_minute: int | None = None


@transaction.atomic
def api_token_create(
    *,
    workspace: Workspace,
    name: str,
    role: str,
    replace: bool = False,
    author: str = "system:cli",
    scopes: Iterable[str] | None = None,
    workloads: Iterable[Any] = (),
    environments: Iterable[str] = (),
    expires_at: datetime | None = None,
    api_rate_per_minute: int | None = None,
    recall_rate_per_minute: int | None = None,
) -> tuple[ApiToken, str]:
    """Issue a token; its secret is returned once and only its hash is stored. A live token
    of the workspace with the same name is a conflict (``TOKEN_NAME_TAKEN``: the audit trail
    names tokens by name), unless ``replace``: it is revoked first.

    Issuing (and revoking) is audited: who can call the API is part of what the trail proves.
    """
    grant = TokenGrant(
        role=role, scopes=scopes, workloads=workloads, environments=environments,
        expires_at=expires_at, api_rate_per_minute=api_rate_per_minute,
        recall_rate_per_minute=recall_rate_per_minute,
    )  # fmt: skip
    name = _token_name(name)
    fields = _grant_fields(workspace, grant)
    # Issues of one name in this workspace take turns, so two cannot both find it free.
    _workspace_locked(workspace)
    for old in ApiToken.objects.filter(workspace=workspace, name=name, revoked_at__isnull=True):
        if not replace:
            raise ConflictError(
                f"A live token named {name!r} exists in this workspace; choose another name, "
                "or revoke that token first.",
                {"fields": {"name": "Taken by a live token."}},
                code="TOKEN_NAME_TAKEN",
            )
        api_token_revoke(token=old, author=author)
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        workspace=workspace, name=name, key_hash=hash_token(raw), prefix=raw[:10], **fields
    )
    _token_event(token, EventType.TOKEN_ISSUED, author, _grant_payload(token))
    return token, raw


@transaction.atomic
def api_token_rotate(*, token: ApiToken, grace: timedelta, author: str) -> tuple[ApiToken, str]:
    """Give the token a new secret, returned once; its current secret keeps working for
    ``grace`` (0: not at all), then is refused (401 ``TOKEN_EXPIRED``). A secret still in an
    earlier rotation's grace stops at once: a token has at most two."""
    if not timedelta(0) <= grace <= ROTATION_GRACE_MAX:
        raise ValidationFailed(
            {"graceSeconds": f"From 0 to {int(ROTATION_GRACE_MAX.total_seconds())} seconds."}
        )
    token = ApiToken.objects.select_for_update().select_related("workspace").get(pk=token.pk)
    now = timezone.now()
    if token.revoked_at is not None or (token.expires_at is not None and token.expires_at <= now):
        state = "revoked" if token.revoked_at is not None else "expired"
        raise ConflictError(
            f"Token {token.name!r} is {state}: it cannot be rotated. Issue a new token.",
            {"status": state},
            code="TOKEN_NOT_ACTIVE",
        )
    raw = ApiToken.generate()
    previous_prefix = token.prefix
    token.previous_key_hash, token.previous_valid_until = token.key_hash, now + grace
    token.key_hash, token.prefix, token.rotated_at = hash_token(raw), raw[:10], now
    token.save(
        update_fields=[
            "previous_key_hash", "previous_valid_until", "key_hash", "prefix", "rotated_at",
        ]
    )  # fmt: skip
    _token_event(
        token,
        EventType.TOKEN_ROTATED,
        author,
        {
            "previousPrefix": previous_prefix,
            "graceSeconds": int(grace.total_seconds()),
            "previousValidUntil": _iso(token.previous_valid_until),
        },
    )
    return token, raw


@transaction.atomic
def api_token_revoke(*, token: ApiToken, author: str = "system:cli") -> ApiToken:
    """Revoke the token (both its secrets, during a rotation's grace): refused from its next
    call on. Revoking a revoked token changes nothing and records nothing."""
    token = ApiToken.objects.select_for_update().select_related("workspace").get(pk=token.pk)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        _token_event(token, EventType.TOKEN_REVOKED, author)
    return token


def _token_name(name: Any) -> str:
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > NAME_MAX or has_control(name):
        raise ValidationFailed(
            {"name": f"A token needs a name of 1-{NAME_MAX} characters, no control character."}
        )
    return name


def _grant_fields(workspace: Workspace, grant: TokenGrant) -> dict[str, Any]:
    """The model fields of a grant, checked: a malformed value is a 400 (``ValidationFailed``);
    values that do not go together, or that name what the workspace does not have, a 422
    (``TOKEN_GRANT_INVALID``); every problem of a kind at once."""
    malformed: dict[str, str] = {}
    if grant.role not in Role.values:
        malformed["role"] = f"Choose one of: {', '.join(Role.values)}."
    for key, rate in (
        ("apiRatePerMinute", grant.api_rate_per_minute),
        ("recallRatePerMinute", grant.recall_rate_per_minute),
    ):
        if rate is not None and not (isinstance(rate, int) and 1 <= rate <= RATE_MAX):
            malformed[key] = f"From 1 to {RATE_MAX:,} a minute, or none: the workspace's limit."
    if malformed:
        raise ValidationFailed(
            malformed, "The token was not issued: " + " ".join(malformed.values())
        )
    errors: dict[str, str] = {}
    agent = grant.role == Role.AGENT
    scopes = list(AGENT_SCOPES if grant.scopes is None else grant.scopes) if agent else []
    workloads = _workloads(workspace, grant.workloads, errors) if agent else []
    environments = sorted(set(grant.environments)) if agent else []
    if not agent:
        a_role = f"{'an' if grant.role[:1] in 'aeiou' else 'a'} {grant.role}"
        for key, words, given in (
            ("scopes", "scopes", grant.scopes),
            ("boundWorkloads", "workloads", grant.workloads),
            ("boundEnvironments", "environments", grant.environments),
        ):
            if given:
                errors[key] = (
                    f"Only agent tokens are bound to {words}: {a_role} token may do what its "
                    "role may, in any workload and environment."
                    if key != "scopes"
                    else f"Only agent tokens have scopes: {a_role} token may do what its role may."
                )
    elif not scopes or scopes_invalid(scopes):
        errors["scopes"] = f"Choose at least one of: {', '.join(AGENT_SCOPES)}."
    unknown = sorted(
        set(environments)
        - set(Environment.objects.filter(workspace=workspace).values_list("slug", flat=True))
    )
    if unknown:
        errors["boundEnvironments"] = f"Not an environment of this workspace: {', '.join(unknown)}."
    if grant.expires_at is not None and grant.expires_at <= timezone.now():
        errors["expiresAt"] = "Choose a time in the future (or none: the token never expires)."
    if errors:
        raise UnprocessableError(
            "TOKEN_GRANT_INVALID",
            "The token was not issued: " + " ".join(errors.values()),
            {"fields": errors},
        )
    return {
        "role": grant.role,
        "scopes": [scope for scope in AGENT_SCOPES if scope in scopes],
        "bound_workloads": workloads,
        "bound_environments": environments,
        "expires_at": grant.expires_at,
        "api_rate_per_minute": grant.api_rate_per_minute,
        "recall_rate_per_minute": grant.recall_rate_per_minute,
    }


def _workloads(workspace: Workspace, given: Iterable[Any], errors: dict[str, str]) -> list[Any]:
    """The workload ids of a binding: live workloads of the workspace."""
    ids: set[uuid.UUID] = set()
    for value in given:
        try:
            ids.add(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
        except ValueError:
            errors["boundWorkloads"] = f"Not a workload id: {value!r}."
            return []
    found = set(
        Workload.objects.filter(
            workspace=workspace, pk__in=ids, archived_at__isnull=True
        ).values_list("pk", flat=True)
    )
    missing = sorted(str(pk) for pk in ids - found)
    if missing:
        errors["boundWorkloads"] = f"Not a live workload of this workspace: {', '.join(missing)}."
    return sorted(found, key=str)


def _grant_payload(token: ApiToken) -> dict[str, Any]:
    """What an issue records beyond the name, role and prefix: what sets the token apart."""
    payload: dict[str, Any] = {}
    if token.is_agent:
        payload["scopes"] = list(token.scopes)
        payload["boundWorkloads"] = [str(pk) for pk in token.bound_workloads]
        payload["boundEnvironments"] = list(token.bound_environments)
    if token.expires_at is not None:
        payload["expiresAt"] = _iso(token.expires_at)
    for key, value in (
        ("apiRatePerMinute", token.api_rate_per_minute),
        ("recallRatePerMinute", token.recall_rate_per_minute),
    ):
        if value is not None:
            payload[key] = value
    return payload


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _token_event(
    token: ApiToken, type: str, author: str, extra: dict[str, Any] | None = None
) -> None:
    # Name, role and the public prefix only: the token's secret is never recorded.
    audit_event_record(
        workspace=token.workspace,
        type=type,
        author=author,
        payload={"name": token.name, "role": token.role, "prefix": token.prefix, **(extra or {})},
    )


# --- members ------------------------------------------------------------------------------------


@transaction.atomic
def membership_add(*, workspace: Workspace, username: str, role: str, author: str) -> Membership:
    """Give an existing user a role in the workspace."""
    _member_role(role)
    _workspace_locked(workspace)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise NotFoundError(
            f"No user {username!r}: add someone who has an account here.",
            {"fields": {"username": "No such user."}},
        )
    if Membership.objects.filter(workspace=workspace, user=user).exists():
        raise ConflictError(
            f"{username} is a member already; change their role instead.",
            {"fields": {"username": "A member already."}},
            code="MEMBER_EXISTS",
        )
    membership = Membership.objects.create(workspace=workspace, user=user, role=role)
    _member_event(membership, EventType.MEMBER_ADDED, author, {"role": role})
    return membership


@transaction.atomic
def membership_role_change(*, membership: Membership, role: str, author: str) -> Membership:
    """Change a member's role; the workspace's last operator keeps theirs
    (``LAST_OPERATOR``). The same role again changes nothing and records nothing."""
    _member_role(role)
    membership = _locked(membership)
    before = membership.role
    if role == before:
        return membership
    if before == Role.OPERATOR:
        _not_the_last_operator(membership, "lose the operator role")
    membership.role = role
    membership.save(update_fields=["role"])
    _member_event(
        membership, EventType.MEMBER_ROLE_CHANGED, author, {"before": before, "after": role}
    )
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership, author: str) -> None:
    """Remove a member from the workspace; never its last operator (``LAST_OPERATOR``)."""
    membership = _locked(membership)
    if membership.role == Role.OPERATOR:
        _not_the_last_operator(membership, "be removed")
    _member_event(membership, EventType.MEMBER_REMOVED, author, {"role": membership.role})
    membership.delete()


def _member_role(role: Any) -> None:
    if role not in MEMBER_ROLE_VALUES:
        raise ValidationFailed(
            {"role": f"Choose one of: {', '.join(MEMBER_ROLE_VALUES)} (agent is a token's)."}
        )


def _workspace_locked(workspace: Workspace) -> None:
    """Take the workspace's row lock, held to the end of the transaction: changes to its
    members (and issues of its tokens) take turns, so two operators demoting each other at
    once cannot both find the other still an operator."""
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()


def _locked(membership: Membership) -> Membership:
    """The membership as it is now, its workspace locked (``_workspace_locked``)."""
    _workspace_locked(membership.workspace)
    found = Membership.objects.select_related("user", "workspace").filter(pk=membership.pk)
    current = found.first()
    if current is None:
        raise NotFoundError(f"{membership.user.get_username()} is no longer a member.")
    return current


def _not_the_last_operator(membership: Membership, change: str) -> None:
    """Refuse a change that would leave the workspace without an operator."""
    operators = list(
        Membership.objects.filter(workspace=membership.workspace, role=Role.OPERATOR).values_list(
            "pk", flat=True
        )
    )
    if operators == [membership.pk]:
        raise ConflictError(
            f"{membership.user.get_username()} is the last operator of this workspace and "
            f"cannot {change}: make someone else an operator first.",
            {"username": membership.user.get_username()},
            code="LAST_OPERATOR",
        )


def _member_event(membership: Membership, type: str, author: str, extra: dict[str, Any]) -> None:
    audit_event_record(
        workspace=membership.workspace,
        type=type,
        author=author,
        payload={"username": membership.user.get_username(), **extra},
    )
