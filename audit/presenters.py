"""How the audit pages show an event: the extension point every app presents its events through.

The list gives each event a one-line summary; the event page gives it a title and says what it
is about, in words, before its hashes. Audit writes the trail for every app but knows the words
of none above it: each app registers a ``Presenter`` for every event type it records, in its own
``events.py``, which its ``AppConfig.ready()`` imports (explicit registration, as NetBox's
plugins register their template extensions). A test asserts that every ``EventType`` has one.

A presenter reads a payload as it was stored, however old: a key may be missing or of another
shape, and a presenter shows what it can rather than fail the page.

Here too are the value types the event page shows (``Fact``, ``Change``), the word helpers the
presenters share and the fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.utils.safestring import SafeString

from audit.models import AuditEvent, EventType
from portal.models import Workspace
from portal.registry import registry_put

# --- what the event page shows ------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """One line of an event's details: a label and its value in words, maybe a link, a code
    value (ids, prefixes), a badge, a hint, or a list of links."""

    label: str
    value: str = ""
    href: str = ""
    code: bool = False
    badge: str | None = None  # the badge's class: "ok", "bad", "warn" or ""
    hint: str = ""
    links: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (text, href or "")


@dataclass(frozen=True)
class Change:
    """One changed key of a versioned document (a policy axis, a lifecycle setting)."""

    key: str  # the API name, shown as a secondary hint
    label: str
    before: str
    after: str


@dataclass(frozen=True)
class Shown:
    """One event as its page shows it: the row, its payload (a dict whatever was stored), its
    workspace, and the workload it names (its id, name and ``archived_at``; None when it names
    none or the workload was deleted)."""

    event: AuditEvent
    payload: Mapping[str, Any]
    workspace: Workspace
    workload: Any  # a model of the app above that owns workloads; audit only reads it


def stored_query(event: AuditEvent) -> str | None:
    """The query text kept beside a ``context.assembled`` event (``StoredQuery``); None when
    its workspace did not store queries or its actor was erased since. (An event recorded
    before texts moved out of the payload, in a lane whose chain did not hold then, still
    holds its text in the payload.) Read through ``select_related("stored_query")``."""
    try:
        return event.stored_query.text
    except ObjectDoesNotExist:
        legacy = payload_of(event).get("query")
        return legacy if isinstance(legacy, str) else None


def payload_of(event: AuditEvent) -> dict[str, Any]:
    """The event's payload as a dict: any other stored shape reads as empty."""
    return event.payload if isinstance(event.payload, dict) else {}


def first_version(payload: Mapping[str, Any]) -> bool:
    """A versioned document's first save records that there was nothing before it."""
    return "before" in payload and payload["before"] is None


# --- the names an event changed ----------------------------------------------------------------

# Names that sort in a registered order, before all others (a policy's axes, in the algebra's
# order), so a diff reads as its document does rather than in jsonb's shortest-key-first order.
_NAME_ORDER: dict[str, int] = {}


def changed_order_register(names: Iterable[str]) -> None:
    """Sort these names, in this order, before any other changed name."""
    for name in names:
        _NAME_ORDER.setdefault(name, len(_NAME_ORDER))


def changed_names(payload: Mapping[str, Any]) -> list[str]:
    """The names an event changed: a versioned document's diff keys (in their registered
    order, then alphabetically), a workload's changed fields, a layout's changed paths, a
    memory edit's fields."""
    order = _NAME_ORDER
    for key in ("diff", "changes"):
        if isinstance(payload.get(key), dict):
            return sorted(payload[key], key=lambda name: (order.get(name, len(order)), name))
    for key in ("changed", "fields"):
        if isinstance(payload.get(key), list):
            return [str(name) for name in payload[key]]
    return []


# --- words the presenters share ----------------------------------------------------------------


def number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def memories(n: Any) -> str:
    return f"{number(n)} memor{'y' if n == 1 else 'ies'}"


def quoted(text: str, comment: Any) -> str:
    return f"{text} — “{comment}”" if comment else text


def free_text(value: Any, limit: int = 0) -> str:
    """A free-text field's value (cut to ``limit`` characters, if given); an empty one says so."""
    if value in (None, ""):
        return "(empty)"
    text = str(value)
    if limit and len(text) > limit:
        return text[: limit - 1].rstrip(" ,;:.") + "…"
    return text


# --- presenters ----------------------------------------------------------------------------------


class Presenter:
    """How one event type reads. This base shows the ``name`` an event records (a workload's),
    if any: the fallback for an event type that needs no more."""

    # The event page's section(s) saying what the event is about, between its header and its
    # chain; given this presenter's ``context()`` besides the page's own.
    template = "audit/_details.html"
    # What the page says of an event recorded for no environment.
    no_environment = "—"

    def __init__(self, type: str, title: str) -> None:
        self.type = type
        self.title = title

    def summary(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        """One line for the list: what changed, what was assembled, for whom."""
        return str(payload["name"]) if "name" in payload else ""

    def row_hint(self, event: AuditEvent, payload: Mapping[str, Any]) -> str:
        """A tooltip for the list's summary, if it needs one."""
        return ""

    def listed(self, events: Sequence[AuditEvent]) -> dict[int, dict[str, Any]]:
        """What the list's summaries of ``events`` (this presenter's, on one page) read
        besides each event's payload, by event id, read at once for the page; each event's
        is given to ``summary`` and ``row_hint`` over its payload. Nothing by default."""
        return {}

    def first_version(self, shown: Shown) -> bool:
        return False

    def changes(self, shown: Shown) -> list[Change]:
        return []

    def facts(self, shown: Shown) -> list[Fact]:
        return [Fact("Name", str(shown.payload["name"]))] if "name" in shown.payload else []

    def context(self, shown: Shown) -> dict[str, Any]:
        """What this presenter's ``template`` reads besides the page's own context."""
        return {}


class DocumentPresenter(Presenter):
    """The save of a versioned document (a policy, the lifecycle settings): its version, its
    comment, and the keys it changed before and after (on a first version, what it set)."""

    template = "audit/_change.html"
    document = ""  # what the change section is headed, before "version n"
    key_label = "Axis"  # the changed keys' column

    def first_hint(self, shown: Shown) -> SafeString:
        """What a first version's table lists, above it."""
        return SafeString("")

    def first_version(self, shown: Shown) -> bool:
        return first_version(shown.payload)

    def facts(self, shown: Shown) -> list[Fact]:
        return []

    def context(self, shown: Shown) -> dict[str, Any]:
        return {
            "document": self.document,
            "key_label": self.key_label,
            "first_hint": self.first_hint(shown),
        }


_PRESENTERS: dict[str, Presenter] = {}


def _same_presenter(present: Presenter, value: Presenter) -> bool:
    return (type(present), present.title) == (type(value), value.title)


P = TypeVar("P", bound=type[Presenter])


def presenter_register(titles: Mapping[str, str]) -> Callable[[P], P]:
    """Class decorator: present each event type of ``titles`` with this class, under its title
    (the event page's heading). An event type is presented once (``portal.registry``)."""

    def register(cls: P) -> P:
        for event_type, title in titles.items():
            registry_put(
                _PRESENTERS,
                str(event_type),
                cls(str(event_type), title),
                what="event presenter",
                same=_same_presenter,
            )
        return cls

    return register


def presenter_for(type: str) -> Presenter:
    """The event type's presenter; an unknown type reads by its name."""
    return _PRESENTERS.get(type) or Presenter(type, type)


def presented_types() -> frozenset[str]:
    return frozenset(_PRESENTERS)


def summary(event: AuditEvent) -> str:
    """The list's one line about an event."""
    return presenter_for(event.type).summary(event, payload_of(event))


def listed_payloads(events: Sequence[AuditEvent]) -> dict[int, Mapping[str, Any]]:
    """Each event's payload as the list's summaries read it: with what its presenter reads
    for the whole page (``Presenter.listed``), one read per presenter that needs any."""
    by_presenter: dict[int, tuple[Presenter, list[AuditEvent]]] = {}
    for event in events:
        presenter = presenter_for(event.type)
        by_presenter.setdefault(id(presenter), (presenter, []))[1].append(event)
    payloads: dict[int, Mapping[str, Any]] = {e.pk: payload_of(e) for e in events}
    for presenter, own in by_presenter.values():
        for pk, extra in presenter.listed(own).items():
            payloads[pk] = {**payloads[pk], **extra}
    return payloads


# --- the type filter ---------------------------------------------------------------------------

E = EventType
# The audit trail's type filter offers the event types in these groups, in this order, each
# under its presenter's title. Every event type is in one group (a test checks).
TYPE_GROUPS: tuple[tuple[str, tuple[EventType, ...]], ...] = (
    ("Policies", (E.WORKSPACE_POLICY_SET, E.WORKLOAD_POLICY_SET, E.LAYOUT_CONFIG_SET)),
    ("Contexts and sessions", (E.ASSEMBLED, E.SESSION_STARTED, E.SESSION_ENDED, E.COMPACTED)),
    ("Memories", (E.MEMORY_CHANGED, E.MEMORY_ERASED)),
    (
        "Maintenance",
        (
            E.MAINTENANCE_EXECUTED, E.MAINTENANCE_PREVIEWED, E.MAINTENANCE_REVERTED,
            E.ARCHIVE_RESTORED, E.LIFECYCLE_SETTINGS_SET,
        ),
    ),
    (
        "Workspace and workloads",
        (
            E.WORKSPACE_RENAMED, E.WORKSPACE_SETTINGS_SET, E.WORKLOAD_CREATED,
            E.WORKLOAD_UPDATED, E.WORKLOAD_ARCHIVED, E.WORKLOAD_DELETED,
        ),
    ),
    (
        "Tokens and members",
        (
            E.TOKEN_ISSUED, E.TOKEN_ROTATED, E.TOKEN_REVOKED,
            E.MEMBER_ADDED, E.MEMBER_ROLE_CHANGED, E.MEMBER_REMOVED,
        ),
    ),
)  # fmt: skip


def type_groups() -> list[tuple[str, list[tuple[str, str]]]]:
    """The type filter's choices: (group, [(event type, its title)])."""
    return [
        (group, [(str(type), presenter_for(type).title) for type in types])
        for group, types in TYPE_GROUPS
    ]
