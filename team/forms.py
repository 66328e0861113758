from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django import forms

from policies.models import Workload
from portal.models import Role, Workspace
from portal.permissions import AGENT_SCOPES
from team.services import MEMBER_ROLE_VALUES, NAME_MAX, RATE_MAX

SCOPE_WORDS = {
    "recall": "recall",
    "memory.create": "write new memories",
    "session.use": "open sessions and add turns",
    "session.read": "read sessions and turns",
}
# How long a rotated token's previous secret keeps working, as offered on the page.
GRACE_CHOICES = [
    ("0", "none: stop at once"),
    ("3600", "1 hour"),
    ("86400", "1 day"),
    ("604800", "7 days"),
]
# The page's names for the fields the API spells otherwise (``add_domain_error``).
TOKEN_ALIASES = {
    "boundWorkloads": "workloads",
    "boundEnvironments": "environments",
    "expiresAt": "expires",
    "apiRatePerMinute": "api_rate",
    "recallRatePerMinute": "recall_rate",
}


class TokenIssueForm(forms.Form):
    name = forms.CharField(
        max_length=NAME_MAX,
        label="Token name",
        help_text="What uses it (support-agent, say): the audit trail names its calls token:NAME.",
    )
    role = forms.ChoiceField(
        choices=Role.choices,
        initial=Role.AGENT,
        help_text="Agent: only what its scopes allow, within its binding. The other roles "
        "may do what a member with the role may.",
    )
    scopes = forms.MultipleChoiceField(
        choices=[(scope, SCOPE_WORDS.get(scope, scope)) for scope in AGENT_SCOPES],
        initial=list(AGENT_SCOPES),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Agent tokens only.",
    )
    workloads = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Agent tokens only; none ticked: any workload.",
    )
    environments = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Agent tokens only; none ticked: any environment.",
    )
    expires = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="It stops working at the start of this day (UTC); empty: never.",
    )
    api_rate = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=RATE_MAX,
        label="Calls a minute",
        help_text="Empty: the server's limit.",
    )
    recall_rate = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=RATE_MAX,
        label="Recalls a minute",
        help_text="Empty: the workspace's limit.",
    )

    def __init__(self, *args: Any, workspace: Workspace, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        live = Workload.objects.filter(workspace=workspace, archived_at__isnull=True)
        fields: Any = self.fields
        fields["workloads"].choices = [(str(w.pk), w.name) for w in live.order_by("name")]
        fields["environments"].choices = [
            (env.slug, env.slug) for env in workspace.environments.order_by("slug")
        ]

    def grant(self) -> dict[str, Any]:
        """The service's keyword arguments. Scopes are an agent's only: the boxes ticked by
        default are not sent for another role."""
        data = self.cleaned_data
        agent = data["role"] == Role.AGENT
        expires = data.get("expires")
        return {
            "name": data["name"],
            "role": data["role"],
            "scopes": data["scopes"] if agent else None,
            "workloads": data["workloads"],
            "environments": data["environments"],
            "expires_at": datetime.combine(expires, time(0), tzinfo=UTC) if expires else None,
            "api_rate_per_minute": data.get("api_rate"),
            "recall_rate_per_minute": data.get("recall_rate"),
        }


class TokenRotateForm(forms.Form):
    grace = forms.TypedChoiceField(
        choices=GRACE_CHOICES,
        coerce=int,
        initial="3600",
        label="The old secret works for",
    )


class MemberAddForm(forms.Form):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Its ids apart from the token form's on the same page (both have a role).
        kwargs.setdefault("auto_id", "member_%s")
        super().__init__(*args, **kwargs)

    username = forms.CharField(max_length=150, help_text="Someone with an account here.")
    role = forms.ChoiceField(choices=[(r, r) for r in MEMBER_ROLE_VALUES], initial=Role.VIEWER)


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=[(r, r) for r in MEMBER_ROLE_VALUES])
