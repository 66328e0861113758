from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit.models import EventType
from audit.services import audit_event_record
from portal.errors import ValidationFailed
from portal.models import ApiToken, Role, Workspace, hash_token


@transaction.atomic
def api_token_create(
    *, workspace: Workspace, name: str, role: str, replace: bool = False, author: str = "system:cli"
) -> tuple[ApiToken, str]:
    """Issue a token; the raw value is returned once and only its hash is stored.

    Issuing (and revoking) is audited: who can call the API is part of what the trail proves.
    """
    if role not in Role.values:
        raise ValidationFailed({"role": f"Choose one of: {', '.join(Role.values)}."})
    if not name or len(name) > 100:
        raise ValidationFailed({"name": "A token needs a name of 1-100 characters."})
    if replace:
        for old in ApiToken.objects.filter(workspace=workspace, name=name, revoked_at__isnull=True):
            api_token_revoke(token=old, author=author)
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        workspace=workspace, name=name, role=role, key_hash=hash_token(raw), prefix=raw[:10]
    )
    _token_event(token, EventType.TOKEN_ISSUED, author)
    return token, raw


@transaction.atomic
def api_token_revoke(*, token: ApiToken, author: str = "system:cli") -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        _token_event(token, EventType.TOKEN_REVOKED, author)


def _token_event(token: ApiToken, type: str, author: str) -> None:
    # Name, role and the public prefix only: the token itself is never recorded.
    audit_event_record(
        workspace=token.workspace,
        type=type,
        author=author,
        payload={"name": token.name, "role": token.role, "prefix": token.prefix},
    )
