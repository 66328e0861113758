from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from policies.models import Workspace
from portal.errors import ValidationFailed
from portal.models import ApiToken, Role, hash_token


@transaction.atomic
def api_token_create(
    *, workspace: Workspace, name: str, role: str, replace: bool = False
) -> tuple[ApiToken, str]:
    """Issue a token; the raw value is returned once and only its hash is stored."""
    if role not in Role.values:
        raise ValidationFailed({"role": f"Choose one of: {', '.join(Role.values)}."})
    if not name or len(name) > 100:
        raise ValidationFailed({"name": "A token needs a name of 1-100 characters."})
    if replace:
        ApiToken.objects.filter(workspace=workspace, name=name, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
    raw = ApiToken.generate()
    token = ApiToken.objects.create(
        workspace=workspace, name=name, role=role, key_hash=hash_token(raw), prefix=raw[:10]
    )
    return token, raw


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
