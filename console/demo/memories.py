"""The demo's memories (plain Python, no Django): hand-written texts, filled in by habits.

Acme sells an invoicing platform. Its support assistant talks to customers (Ada at Northwind
Logistics, Grace at Brightwater Clinics, Mei at Kestrel Retail) and reads the support team's
playbook; the release planner keeps its own notes and reads the platform team's; the
onboarding guide helps new hires (Linus, and Priya, who starts during the demo's week).

Every text is written by hand, in ``acme.yaml``. What a memory does not state (its source,
confirmation, confidence, sensitivity, consent basis, age, earlier use) is drawn from the
habits of its type and of its actor, with a generator seeded per actor, so the demo is the
same on every machine and its memories differ the way real ones do: some inferred and
unsure, some old, some collected without a consent basis anyone recorded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).with_name("acme.yaml")

TYPE_SOURCES: dict[str, dict[str, int]] = {
    "preference": {"user": 6, "assistant": 3, "import": 1},
    "fact": {"user": 3, "tool": 2, "import": 3, "operator": 1, "retrieval": 1},
    "decision": {"operator": 3, "user": 2, "assistant": 1},
    "instruction": {"operator": 6, "system": 2, "user": 1},
    "episode": {"assistant": 5, "tool": 3},
    "summary": {"assistant": 8, "import": 1},
    "insight": {"assistant": 1},
    "entity": {"import": 4, "tool": 3, "retrieval": 2},
}
SOURCE_CONFIRMATIONS: dict[str, dict[str, int]] = {
    "user": {"user_confirmed": 6, "observed": 2, "unknown": 1},
    "assistant": {"inferred": 6, "observed": 3, "unknown": 1},
    "tool": {"observed": 8, "unknown": 1},
    "import": {"imported": 8, "unknown": 2},
    "operator": {"operator_confirmed": 1},
    "system": {"operator_confirmed": 5, "observed": 2},
    "retrieval": {"observed": 5, "imported": 3},
}
# Where a type changes what its source usually means: an episode the assistant took part in
# was observed, not guessed.
TYPE_CONFIRMATIONS: dict[tuple[str, str], dict[str, int]] = {
    ("episode", "assistant"): {"observed": 8, "inferred": 1, "unknown": 1},
    ("decision", "assistant"): {"observed": 3, "inferred": 2},
    ("summary", "assistant"): {"observed": 1, "inferred": 1},
}
CONFIDENCE_RANGES: dict[str, tuple[float, float]] = {
    "user_confirmed": (0.8, 0.98),
    "operator_confirmed": (0.85, 1.0),
    "observed": (0.6, 0.95),
    "inferred": (0.3, 0.78),
    "imported": (0.45, 0.9),
    "unknown": (0.2, 0.65),
}
# Days before the import: most memories are from the last few months, some from last year.
AGE_BANDS: tuple[tuple[float, float, int], ...] = ((2, 120, 55), (120, 365, 30), (365, 460, 15))
EARLIER_HITS = (0, 0, 0, 0, 1, 1, 2, 3, 5, 8, 13, 21)
# A memory that earned this many hits over three weeks had been promoted to long-term.
LONG_TERM_HITS, LONG_TERM_DAYS = 5, 21
STALE_SHARE = 0.06  # of the never-recalled ones, made stale by an earlier decay run


@dataclass(frozen=True)
class Memory:
    """One hand-written memory; a field left None is drawn from the habits."""

    memory_type: str
    text: str  # "{date}" becomes the day the memory was made ("14 March")
    source: str | None = None
    confirmation: str | None = None
    confidence: float | None = None
    sensitivity: str | None = None
    consent: str | None = None
    segment: str | None = None
    status: str = "active"
    age: float | None = None  # days before the import
    expires: float | None = None  # days after the memory was made


@dataclass(frozen=True)
class Persona:
    actor_id: str
    consent: dict[str, int]  # weights of the consent bases its memories were collected under
    sensitivity: dict[str, int]  # weights of the sensitivity levels
    memories: tuple[Memory, ...]


@dataclass(frozen=True)
class Arrival:
    """Memories an agent writes during the demo's week."""

    day: int  # 0 is the first day of the week
    hour: float  # UTC
    actor_id: str
    author: str
    memories: tuple[Memory, ...]


@dataclass(frozen=True)
class DemoQuery:
    """What a workload asks about an actor, and words of the memory it is asked for."""

    text: str
    finds: str


@dataclass(frozen=True)
class Post:
    """Messages an agent posts to a session at once, and words of the memory the context
    assembled for the last (the user's) must carry."""

    messages: tuple[tuple[str, str], ...]  # (role, text)
    finds: str


@dataclass(frozen=True)
class Conversation:
    """A chat session an agent holds through the portal, hours before the demo's now."""

    external_id: str  # the agent's own id for the session
    actor_id: str
    workload: str
    environment: str
    author: str
    hours_ago: float
    system_prompt: str
    posts: tuple[Post, ...]


@dataclass(frozen=True)
class DemoData:
    personas: tuple[Persona, ...]
    arrivals: tuple[Arrival, ...]
    queries: dict[str, dict[str, tuple[DemoQuery, ...]]]  # workload -> actor -> queries
    conversations: tuple[Conversation, ...] = ()

    def persona(self, actor_id: str) -> Persona:
        return next(p for p in self.personas if p.actor_id == actor_id)

    def memories(self, actor_id: str) -> tuple[Memory, ...]:
        """The actor's hand-written memories: imported, then arrived during the week."""
        memories = self.persona(actor_id).memories
        for arrival in self.arrivals:
            if arrival.actor_id == actor_id:
                memories += arrival.memories
        return memories

    def memory(self, actor_id: str, start: str) -> Memory:
        """The actor's hand-written memory whose text starts so (for the week's edits)."""
        return next(m for m in self.memories(actor_id) if m.text.startswith(start))

    def found_by(self, actor_id: str, query: DemoQuery) -> list[Memory]:
        """The actor's memories a query is asked for (exactly one in well-formed data)."""
        return [m for m in self.memories(actor_id) if query.finds in m.text]


def _memory(entry: list[Any]) -> Memory:
    memory_type, text, *rest = entry
    return Memory(memory_type, text, **(rest[0] if rest else {}))


@cache
def demo_data() -> DemoData:
    raw = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    personas = tuple(
        Persona(
            p["actor"],
            p["consent"],
            p["sensitivity"],
            tuple(_memory(m) for m in p["memories"]),
        )
        for p in raw["personas"]
    )
    arrivals = tuple(
        Arrival(
            a["day"], a["hour"], a["actor"], a["author"], tuple(_memory(m) for m in a["memories"])
        )
        for a in raw["arrivals"]
    )
    queries = {
        workload: {
            actor: tuple(DemoQuery(text, finds) for text, finds in pairs)
            for actor, pairs in by_actor.items()
        }
        for workload, by_actor in raw["queries"].items()
    }
    conversations = tuple(
        Conversation(
            c["external_id"],
            c["actor"],
            c["workload"],
            c["environment"],
            c["author"],
            c["hours_ago"],
            c["system_prompt"],
            tuple(
                Post(tuple((role, text) for role, text in post["messages"]), post["finds"])
                for post in c["posts"]
            ),
        )
        for c in raw.get("conversations", [])
    )
    return DemoData(personas, arrivals, queries, conversations)


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _age_days(rng: random.Random) -> float:
    low, high, _ = rng.choices(AGE_BANDS, weights=[w for _, _, w in AGE_BANDS])[0]
    return rng.uniform(low, high)


def _segment(memory: Memory, source: str, rng: random.Random) -> str:
    if memory.segment:
        return memory.segment
    if source == "retrieval":
        return "retrieval"
    if source == "tool" and rng.random() < 0.4:
        return "tool_result"
    return "memory"


def memory_fields(
    memory: Memory, persona: Persona, *, created_at: datetime, rng: random.Random
) -> dict[str, Any]:
    """The memory's model fields; what it does not state is drawn from the habits."""
    source = memory.source or _pick(rng, TYPE_SOURCES[memory.memory_type])
    confirmations = TYPE_CONFIRMATIONS.get((memory.memory_type, source))
    confirmation = memory.confirmation or _pick(rng, confirmations or SOURCE_CONFIRMATIONS[source])
    confidence = memory.confidence
    if confidence is None:
        confidence = rng.uniform(*CONFIDENCE_RANGES[confirmation])
    return {
        "content": memory.text.replace("{date}", f"{created_at.day} {created_at:%B}"),
        "memory_type": memory.memory_type,
        "source_kind": source,
        "confirmation_status": confirmation,
        "confidence": round(confidence, 2),
        "sensitivity": memory.sensitivity or _pick(rng, persona.sensitivity),
        "consent_policy": memory.consent or _pick(rng, persona.consent),
        "segment_kind": _segment(memory, source, rng),
        "lifecycle_status": memory.status,
        "created_at": created_at,
        "expires_at": created_at + timedelta(days=memory.expires)
        if memory.expires is not None
        else None,
    }


def _earlier_use(fields: dict[str, Any], *, until: datetime, rng: random.Random) -> dict[str, Any]:
    """What a memory's life in the system Acme used before left on it: its hits, when it was
    last recalled, its tier, and a status an earlier sweep gave it."""
    created, status = fields["created_at"], fields["lifecycle_status"]
    hits = rng.choice(EARLIER_HITS)
    last = None
    if hits:
        # Most memories in use were recalled lately; a few not for weeks.
        last = until - (until - created) * min(rng.random() ** 3, 0.98)
    if status == "active" and not hits and rng.random() < STALE_SHARE:
        status = "stale"
    expires = fields["expires_at"]
    if status == "active" and expires is not None and expires < until - timedelta(days=3):
        status = "expired"  # the expiry sweep ran now and then
    long_term = hits >= LONG_TERM_HITS and until - created >= timedelta(days=LONG_TERM_DAYS)
    stale_since = None
    if status == "stale":
        # Made stale by a decay run some time after it was last used (or made), never before.
        since = last or created
        stale_since = since + (until - since) * rng.uniform(0.4, 0.95)
    return {
        **fields,
        "lifecycle_status": status,
        "stale_since": stale_since,
        "hit_count": hits,
        "last_accessed_at": last,
        "tier": "long_term" if long_term else "short_term",
    }


def persona_items(persona: Persona, *, imported_at: datetime, seed: int) -> list[dict[str, Any]]:
    """The persona's memories as they stand when imported at ``imported_at``."""
    rng = random.Random(f"{seed}:{persona.actor_id}")
    items = []
    for memory in persona.memories:
        age = memory.age if memory.age is not None else _age_days(rng)
        created = imported_at - timedelta(days=age, minutes=rng.uniform(0, 600))
        fields = memory_fields(memory, persona, created_at=created, rng=rng)
        items.append(_earlier_use(fields, until=imported_at, rng=rng))
    return items


def arrival_items(
    arrival: Arrival, persona: Persona, *, at: datetime, seed: int
) -> list[dict[str, Any]]:
    """The arrival's memories, made at ``at``: new, never recalled."""
    rng = random.Random(f"{seed}:{arrival.actor_id}:{arrival.day}")
    return [memory_fields(m, persona, created_at=at, rng=rng) for m in arrival.memories]
