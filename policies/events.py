"""How the audit pages show the events policies records: the floor and workload policies saved
(their changes axis by axis, in ``policies.labels``' words), the workspace renamed or its
settings changed, workloads created, changed, archived or deleted.

Registered with ``audit.presenters`` when the app is ready (``PoliciesConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.models import AuditEvent, EventType
from audit.presenters import (
    Change,
    DocumentPresenter,
    Fact,
    Presenter,
    Shown,
    changed_names,
    changed_order_register,
    first_version,
    free_text,
    presenter_register,
    quoted,
)
from policies import algebra, labels
from policies.axes import AXES
from policies.forms import DiffRow, diff_rows

# A policy's diff, the CSV's changed names and the list's summaries read in the algebra's order.
changed_order_register(AXES)

presenter_register(
    {
        EventType.WORKLOAD_CREATED: "Workload created",
        EventType.WORKLOAD_DELETED: "Workload deleted",
        EventType.WORKLOAD_ARCHIVED: "Workload archived",
    }
)(Presenter)  # these show the workload's name, as the base does


class PolicyPresenter(DocumentPresenter):
    """A policy version saved: its change, from its before and after (the stored diff as a
    fallback). A first version lists what it set, with nothing before."""

    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        version = f"v{payload.get('version')}"
        changed = ", ".join(labels.axis_label(name) for name in changed_names(payload))
        if first_version(payload):
            text = f"{version} created{self.created_suffix(changed)}"
        else:
            text = f"{version}: {changed or 'no axis changed'}"
        return quoted(text, payload.get("comment"))

    def created_suffix(self, changed: str) -> str:
        """What a first version's summary says after "created": by default nothing, since a
        first floor sets every axis."""
        return ""

    def changes(self, shown: Shown) -> list[Change]:
        payload = shown.payload
        try:
            rows = self.diff(payload.get("before"), payload.get("after"))
        except (KeyError, TypeError):
            rows = None  # an older payload shape
        if rows is None:
            rows = diff_rows(payload.get("diff") or {})
        return [Change(r.axis, labels.axis_label(r.axis), r.before, r.after) for r in rows]

    def diff(self, before: Any, after: Any) -> list[DiffRow] | None:
        """The change from the payload's before and after; None when it records neither."""
        return None


@presenter_register({EventType.WORKSPACE_POLICY_SET: "Operator floor saved"})
class FloorPresenter(PolicyPresenter):
    document = "Operator floor"

    def first_hint(self, shown: Shown) -> SafeString:
        return SafeString("The workspace's first floor: every axis as it was set.")

    def diff(self, before: Any, after: Any) -> list[DiffRow] | None:
        if not isinstance(after, dict):
            return None
        old = algebra.floor_document(before["policy"], before["relaxableAxes"]) if before else {}
        new = algebra.floor_document(after["policy"], after["relaxableAxes"])
        return diff_rows(algebra.diff_documents(old, new), before=old, after=new)


@presenter_register({EventType.WORKLOAD_POLICY_SET: "Workload policy saved"})
class WorkloadPolicyPresenter(PolicyPresenter):
    document = "Workload policy"
    no_environment = "all environments"

    def created_suffix(self, changed: str) -> str:
        # A first workload policy sets only the axes it names.
        return f": {changed or 'inherits the floor'}"

    def first_hint(self, shown: Shown) -> SafeString:
        return format_html(
            "The first policy of {} for {}: it sets the axes below; every other axis inherits "
            "the floor.",
            shown.workload.name if shown.workload else "this workload",
            shown.event.environment or "all environments",
        )

    def diff(self, before: Any, after: Any) -> list[DiffRow] | None:
        if not isinstance(after, dict):
            return None
        old = before or {}
        return diff_rows(
            algebra.diff_documents(old, after), before=old, after=after, missing="inherits floor"
        )


@presenter_register({EventType.WORKSPACE_RENAMED: "Workspace renamed"})
class RenamePresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        return f"{payload.get('before')} → {payload.get('after')}"

    def facts(self, shown: Shown) -> list[Fact]:
        return [
            Fact("Renamed from", free_text(shown.payload.get("before"))),
            Fact("Renamed to", free_text(shown.payload.get("after"))),
        ]


@presenter_register({EventType.WORKSPACE_SETTINGS_SET: "Workspace setting changed"})
class SettingPresenter(Presenter):
    """A workspace setting changed: ``storeQueries`` in words; another by its name, if any."""

    STORED: dict[Any, str] = {True: "stored", False: "not stored (a salted hash only)"}

    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        if "storeQueries" not in payload:
            return super().summary(event, payload)
        after = (payload["storeQueries"] or {}).get("after")
        return "recall queries stored" if after else "recall queries not stored"

    def facts(self, shown: Shown) -> list[Fact]:
        change = shown.payload.get("storeQueries")
        if not isinstance(change, dict):
            return super().facts(shown)
        before, after = (self.STORED.get(change.get(key), "—") for key in ("before", "after"))
        return [
            Fact(
                "Recall queries",
                f"{before} → {after}",
                hint="Only contexts assembled while queries are stored keep their query text.",
            )
        ]


@presenter_register({EventType.WORKLOAD_UPDATED: "Workload changed"})
class WorkloadUpdatePresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        return "; ".join(
            f"{name}: {free_text(change.get('before'), 40)} → {free_text(change.get('after'), 40)}"
            for name, change in (payload.get("changes") or {}).items()
            if isinstance(change, dict)
        )

    def facts(self, shown: Shown) -> list[Fact]:
        return [
            Fact(
                labels.value_label(name).capitalize(),
                f"{free_text(change.get('before'))} → {free_text(change.get('after'))}",
            )
            for name, change in (shown.payload.get("changes") or {}).items()
            if isinstance(change, dict)
        ]
