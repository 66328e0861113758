"""How the audit pages show the events maintenance records: runs executed or previewed (sweep,
mode, status, counts, archive), the lifecycle settings saved (setting by setting, in the
settings' own words and units), a retention archive restored, a run reverted; and which of
them belong to a memory's history (the runs that changed it, the reverts that put it back).

Registered with ``audit.presenters`` and ``audit.memory_events`` when the app is ready
(``MaintenanceConfig.ready``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString

from audit.memory_events import memory_events_register
from audit.models import AuditEvent, EventType
from audit.presenters import (
    Change,
    DocumentPresenter,
    Fact,
    Presenter,
    Shown,
    changed_names,
    memories,
    number,
    presenter_register,
    quoted,
)
from maintenance.lifecycle import SETTINGS_BY_NAME
from maintenance.models import MaintenanceItem, Outcome, RevertOutcome
from maintenance.reverts import SKIP_REASONS
from maintenance.words import STATUS_BADGES, SWEEP_TITLES, setting_value
from policies import labels
from portal.models import Workspace


def _run_link(slug: str, pk: Any) -> str:
    return reverse("maintenance:run", args=[slug, pk]) if str(pk).isdigit() else ""


def _sweep(payload: Mapping[str, Any]) -> str:
    sweep = str(payload.get("sweep", "—"))
    return SWEEP_TITLES.get(sweep, sweep)


def _when(raw: Any) -> str:
    value = parse_datetime(raw) if isinstance(raw, str) else None
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value is not None else "—"


@presenter_register(
    {
        EventType.MAINTENANCE_EXECUTED: "Maintenance run executed",
        EventType.MAINTENANCE_PREVIEWED: "Maintenance run previewed",
    }
)
class RunPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        counts = payload.get("counts") or {}
        text = (
            f"{_sweep(payload)} {payload.get('mode')}, {payload.get('status')}:"
            f" {number(counts.get('listed'))} listed"
        )
        if payload.get("mode") == "execute":
            text += f", {number(counts.get('applied', 0))} changed"
        return text

    def facts(self, shown: Shown) -> list[Fact]:
        payload, slug = shown.payload, shown.workspace.slug
        counts = payload.get("counts") if isinstance(payload.get("counts"), dict) else {}
        mode = payload.get("mode")
        facts = [
            Fact("Run", f"#{payload.get('runId')}", href=_run_link(slug, payload.get("runId"))),
            Fact("Sweep", _sweep(payload)),
            Fact(
                "Mode",
                "preview (changes no memory)" if mode == "preview" else str(mode or "—"),
            ),
            Fact(
                "Status",
                str(payload.get("status", "—")),
                badge=STATUS_BADGES.get(str(payload.get("status")), ""),
            ),
        ]
        if counts:
            text = f"{number(counts.get('listed', 0))} listed"
            if mode == "execute":
                text += (
                    f", {number(counts.get('applied', 0))} changed,"
                    f" {number(counts.get('skipped', 0))} skipped"
                )
            facts.append(Fact("Memories", text))
        if payload.get("preview"):
            facts.append(
                Fact(
                    "Preview executed",
                    f"#{payload['preview']}",
                    href=_run_link(slug, payload["preview"]),
                )
            )
        if payload.get("confirm") is not None:
            facts.append(Fact("Count confirmed", number(payload["confirm"])))
        if payload.get("trigger"):
            facts.append(
                Fact(
                    "Started", "by the schedule" if payload["trigger"] == "schedule" else "by hand"
                )
            )
        if payload.get("asOf"):
            facts.append(Fact("As of", _when(payload["asOf"])))
        if payload.get("settingsVersion") is not None:
            version = payload["settingsVersion"]
            facts.append(
                Fact(
                    "Lifecycle settings", f"v{version}" if version else "the defaults (none saved)"
                )
            )
        if payload.get("embedder"):
            facts.append(Fact("Embedder", str(payload["embedder"]), code=True))
        archive = payload.get("archive")
        if isinstance(archive, dict):
            facts.append(
                Fact(
                    "Archive",
                    f"{memories(archive.get('count', 0))}, SHA-256 {archive.get('sha256', '')}",
                )
            )
        error = payload.get("error")
        if isinstance(error, dict):
            facts.append(Fact("Error", f"{error.get('code', '')}: {error.get('message', '')}"))
        return facts


def _setting_label(name: str) -> str:
    setting = SETTINGS_BY_NAME.get(name)
    return setting.label if setting is not None else name


def _setting_text(name: str, value: Any) -> str:
    if value is None:
        return "—"
    try:
        return setting_value(name, value)
    except (KeyError, TypeError, ValueError):  # a setting that no longer exists
        return str(value)


@presenter_register({EventType.LIFECYCLE_SETTINGS_SET: "Lifecycle settings saved"})
class SettingsPresenter(DocumentPresenter):
    document = "Lifecycle settings"
    key_label = "Setting"

    def first_hint(self, shown: Shown) -> SafeString:
        # The service saves over the defaults (version 0), so no event it writes has nothing
        # before it; an older or hand-written one may.
        return SafeString("The workspace's first lifecycle settings: every setting as it was set.")

    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        names = [_setting_label(name) for name in changed_names(payload)]
        return quoted(f"v{payload.get('version')}: {', '.join(names)}", payload.get("comment"))

    def changes(self, shown: Shown) -> list[Change]:
        diff = shown.payload.get("diff")
        return [
            Change(
                name,
                _setting_label(name),
                _setting_text(name, change.get("before")),
                _setting_text(name, change.get("after")),
            )
            for name, change in (diff.items() if isinstance(diff, dict) else ())
            if isinstance(change, dict)
        ]


@presenter_register({EventType.ARCHIVE_RESTORED: "Retention archive restored"})
class RestorePresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        return (
            f"run #{payload.get('runId')}: {number(payload.get('restored'))} restored, "
            f"{number(payload.get('alreadyPresent'))} already present"
        )

    def facts(self, shown: Shown) -> list[Fact]:
        payload = shown.payload
        pk = payload.get("runId")
        return [
            Fact("Retention run", f"#{pk}", href=_run_link(shown.workspace.slug, pk)),
            Fact("Memories restored", number(payload.get("restored", 0))),
            Fact("Already back", number(payload.get("alreadyPresent", 0))),
        ]


@presenter_register({EventType.MAINTENANCE_REVERTED: "Maintenance run reverted"})
class RevertPresenter(Presenter):
    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        counts = payload.get("counts") or {}
        return (
            f"{_sweep(payload)} run #{payload.get('runId')}: {number(counts.get('reverted'))}"
            f" put back, {number(counts.get('skipped'))} skipped"
        )

    def facts(self, shown: Shown) -> list[Fact]:
        payload, slug = shown.payload, shown.workspace.slug
        pk = payload.get("runId")
        counts = payload.get("counts") or {}
        facts = [
            Fact("Run reverted", f"#{pk}", href=_run_link(slug, pk)),
            Fact("Sweep", _sweep(payload)),
            Fact(
                "Memories put back",
                f"{number(counts.get('reverted', 0))} of the"
                f" {memories(counts.get('changed', 0))} the run changed",
            ),
        ]
        reasons = payload.get("skippedReasons")
        if isinstance(reasons, dict) and reasons:
            facts.append(
                Fact(
                    "Skipped",
                    "; ".join(
                        f"{number(n)} {SKIP_REASONS.get(str(reason), str(reason))}"
                        for reason, n in reasons.items()
                    ),
                )
            )
        if isinstance(payload.get("fields"), list):
            facts.append(
                Fact(
                    "Fields put back",
                    ", ".join(labels.value_label(name) for name in payload["fields"]),
                    hint="The trail names fields and ids, never content.",
                )
            )
        return facts


# --- a memory's history ---------------------------------------------------------------------


@memory_events_register
def run_events_of_memory(workspace: Workspace, memory_id: int) -> list[QuerySet[Any]]:
    """The events of the runs that changed the memory, and of the reverts that put it back
    (the runs' items name every memory; the events' id lists stop at a thousand)."""
    items = MaintenanceItem.objects.filter(run__workspace=workspace, memory_id=memory_id)
    return [
        items.filter(outcome=Outcome.APPLIED, run__event_id__isnull=False).values("run__event_id"),
        items.filter(
            revert_outcome=RevertOutcome.REVERTED, run__revert_event_id__isnull=False
        ).values("run__revert_event_id"),
    ]
