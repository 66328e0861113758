"""A week in the life of the demo workspace, as a time-ordered list of steps (no Django).

Day 0, a week ago, the operator creates the workspace and sets a real floor, an editor sets up
three workloads, the agents get their tokens and Acme's memories are imported from the system
it used before. From that afternoon on the agents recall, in three environments, more on
working days and in working hours; along the week editors tune workload policies, suppress
memories that should not be recalled, the operator tightens the floor once (which leaves one
workload policy non-compliant until someone narrows it) and starts storing recall queries;
the agents write new memories after their conversations, and a new hire arrives. Day 7 is
today, up to now.

``week`` only plans: ``manage.py load_demo`` carries each step out through the services, at
its time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from console.demo.memories import Conversation, DemoData, arrival_items, persona_items

SLUG = "acme"
DAYS = 8  # day 0 is a week ago, day 7 is today
SEED = 20261202
OPERATOR, EDITOR = "user:operator", "user:editor"
# How a recall's time of day is drawn (UTC): Acme's customers are mostly in Europe.
HOUR_WEIGHTS = (1, 1, 1, 1, 1, 2, 4, 7, 9, 10, 9, 8, 7, 8, 9, 9, 8, 6, 4, 3, 2, 2, 1, 1)
RECALLS_PER_DAY = {"weekday": (34, 46), "weekend": (6, 12)}
FIRST_RECALL_HOUR = 13.5  # on day 0, once everything is set up
LAST_RECALL_MARGIN = timedelta(minutes=5)  # today's recalls stop a little before now

# A moment of the week: (day, hour of the day in UTC) -> datetime.
Clock = Callable[[int, float], datetime]


@dataclass(frozen=True)
class Step:
    at: datetime
    author: str


@dataclass(frozen=True)
class CreateWorkspace(Step):
    slug: str
    name: str


@dataclass(frozen=True)
class SaveFloor(Step):
    changes: dict[str, Any]  # axes (and relaxableAxes) that change from the current floor
    comment: str


@dataclass(frozen=True)
class CreateWorkload(Step):
    name: str
    description: str


@dataclass(frozen=True)
class SavePolicy(Step):
    workload: str
    environment: str | None  # None: the workload's all-environments policy
    document: dict[str, Any]
    comment: str


@dataclass(frozen=True)
class IssueToken(Step):
    name: str
    role: str


@dataclass(frozen=True)
class ImportMemories(Step):
    actor_id: str
    items: list[dict[str, Any]]


@dataclass(frozen=True)
class ChangeMemory(Step):
    """Change one hand-written memory: its status (suppress) or other fields (edit)."""

    actor_id: str
    starts_with: str
    status: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoreQueries(Step):
    enabled: bool


@dataclass(frozen=True)
class StartSession(Step):
    """A chat session an agent starts, under the caller's own id for it (``external_id``)."""

    external_id: str
    workload: str
    environment: str
    actor_id: str
    system_prompt: str


@dataclass(frozen=True)
class PostTurns(Step):
    """Messages an agent appends to the session it started under ``external_id``."""

    external_id: str
    messages: tuple[tuple[str, str], ...]  # (role, text)


@dataclass(frozen=True)
class Recall(Step):
    workload: str
    environment: str
    actor_id: str
    query: str
    top_k: int
    override: dict[str, Any] | None = None


@dataclass(frozen=True)
class Caller:
    """Who recalls for a workload in an environment, about whom, how often."""

    weight: int
    workload: str
    environment: str
    author: str
    actors: dict[str, int]
    top_k: int
    override: dict[str, Any] | None = None


CUSTOMERS = {"user:ada": 35, "user:grace": 25, "user:mei": 25, "team:support": 15}
PLANNING = {"agent:planner": 60, "team:platform": 40}
NEW_HIRES = {"user:linus": 55, "team:platform": 25, "user:priya": 20}
CALLERS: tuple[Caller, ...] = (
    Caller(44, "support-assistant", "prod", "token:support-bot", CUSTOMERS, 8),
    Caller(8, "support-assistant", "staging", "token:support-staging", CUSTOMERS, 8),
    # An editor trying answers out in the sandbox, asking for every decision.
    Caller(
        4, "support-assistant", "staging", EDITOR, CUSTOMERS, 5, {"diagnosticsVerbosity": "full"}
    ),
    Caller(18, "release-planner", "prod", "token:release-planner", PLANNING, 10),
    Caller(5, "release-planner", "staging", "token:release-planner", PLANNING, 10),
    Caller(13, "onboarding-guide", "prod", "token:onboarding-guide", NEW_HIRES, 6),
    Caller(8, "onboarding-guide", "dev", EDITOR, NEW_HIRES, 6),
)

SUPPORT_TYPES = ["fact", "preference", "decision", "instruction", "episode", "summary", "entity"]
ONBOARDING_TYPES = ["fact", "preference", "decision", "instruction", "summary", "entity"]

# Similarity floors, measured on the demo's queries with the default embedder (all-MiniLM-L6-v2,
# tests/console/test_demo_recall.py): at 0.3 the floor keeps every memory a query asks for
# (the least similar is 0.33) and leaves out six in seven of the others; the support assistant
# answers customers from memories about their question (0.45), the planner from its topic (0.4).
# Without them, the week's newest memories, barely related, outrank older relevant ones on age.
FLOOR_SIMILARITY = 0.3
SUPPORT_SIMILARITY = 0.45
PLANNER_SIMILARITY = 0.4


def _floor_changes() -> dict[str, Any]:
    return {
        "consentPolicyAllowed": ["explicit", "contractual", "legitimate_interest"],
        "confidenceMin": 0.5,
        "sensitivityCeiling": "confidential",
        "maxAgeSeconds": 365 * 24 * 3600,
        "similarityMin": FLOOR_SIMILARITY,
        "diagnosticsVerbosity": "full",
        "relaxableAxes": [
            "memoryTypeAllowed",
            "diagnosticsVerbosity",
            "confidenceMin",
            "similarityMin",
        ],
    }


def _setup(at: Clock) -> list[Step]:
    """Day 0: the workspace, its floor, the workloads and their first policies, the tokens."""
    support_prod = {
        "sensitivityCeiling": "internal",
        "confidenceMin": 0.55,
        "similarityMin": SUPPORT_SIMILARITY,
        "memoryTypeAllowed": SUPPORT_TYPES,
        "diagnosticsVerbosity": "summary",
    }
    return [
        CreateWorkspace(at(0, 8.5), OPERATOR, SLUG, "Acme Corp"),
        SaveFloor(
            at(0, 8.7),
            OPERATOR,
            _floor_changes(),
            "Acme's floor: only memories with a consent basis we can name (explicit, "
            "contractual, legitimate interest), inferred or observed ones at confidence 0.5 "
            "or more, at most a year old, nothing restricted, nothing less similar to the "
            "question than 0.3. Agents may narrow memory types, raise the confidence and the "
            "similarity floor and ask for full diagnostics.",
        ),
        CreateWorkload(
            at(0, 8.9), EDITOR, "support-assistant", "Answers customers in the help widget"
        ),
        SavePolicy(
            at(0, 8.95),
            EDITOR,
            "support-assistant",
            "prod",
            support_prod,
            "Customers see answers built from internal memories only, no guessed insights, "
            "and only memories about what they asked.",
        ),
        CreateWorkload(at(0, 9.05), EDITOR, "release-planner", "Drafts release plans and notes"),
        SavePolicy(
            at(0, 9.1),
            EDITOR,
            "release-planner",
            None,
            {
                "diagnosticsVerbosity": "summary",
                "totalTokenBudget": 3000,
                "similarityMin": PLANNER_SIMILARITY,
            },
            "Planner default for every environment: a little less context than the floor, "
            "and on topic.",
        ),
        CreateWorkload(
            at(0, 9.2), EDITOR, "onboarding-guide", "Helps new hires through their first weeks"
        ),
        SavePolicy(
            at(0, 9.25),
            EDITOR,
            "onboarding-guide",
            None,
            {
                "sensitivityCeiling": "internal",
                "memoryTypeAllowed": ONBOARDING_TYPES,
                "diagnosticsVerbosity": "summary",
            },
            "New hires see internal knowledge only, and no insights about people.",
        ),
        *(
            IssueToken(at(0, 9.6 + n * 0.02), OPERATOR, name, "editor")
            for n, name in enumerate(
                ["support-bot", "support-staging", "release-planner", "onboarding-guide"]
            )
        ),
    ]


def _week_edits(at: Clock) -> list[Step]:
    """What people change along the week."""
    support_prod = {
        "sensitivityCeiling": "internal",
        "similarityMin": SUPPORT_SIMILARITY,
        "memoryTypeAllowed": SUPPORT_TYPES,
        "diagnosticsVerbosity": "summary",
    }
    return [
        SavePolicy(
            at(1, 10.5),
            EDITOR,
            "support-assistant",
            "staging",
            {
                "sensitivityCeiling": "internal",
                "confidenceMin": 0.5,
                "similarityMin": SUPPORT_SIMILARITY,
                "memoryTypeAllowed": [*SUPPORT_TYPES, "insight"],
                "diagnosticsVerbosity": "full",
            },
            "Staging also tries insights, with full diagnostics, to see why answers miss "
            "context before prod does.",
        ),
        ChangeMemory(
            at(2, 11.7),
            EDITOR,
            "user:grace",
            "Grace gave the Harbourside receptionist's mobile",
            status="suppressed",
        ),
        SavePolicy(
            at(2, 15.2),
            EDITOR,
            "onboarding-guide",
            "dev",
            {
                "sensitivityCeiling": "internal",
                "memoryTypeAllowed": ONBOARDING_TYPES,
                "diagnosticsVerbosity": "full",
            },
            "Dev: full diagnostics while we tune the first-week answers.",
        ),
        ChangeMemory(
            at(3, 9.25),
            EDITOR,
            "user:ada",
            "Northwind is negotiating a 15% discount",
            changes={"sensitivity": "confidential"},
        ),
        SaveFloor(
            at(3, 11.35),
            OPERATOR,
            {"confidenceMin": 0.6},
            "Raise the confidence floor to 0.6: the support assistant quoted an inferred "
            "preference (0.55) to a customer as if she had said it.",
        ),
        SavePolicy(
            at(3, 14.1),
            EDITOR,
            "support-assistant",
            "prod",
            {**support_prod, "confidenceMin": 0.65},
            "Back above the new floor, with a margin: prod answers quote these memories.",
        ),
        StoreQueries(at(4, 9.0), OPERATOR, True),
        SavePolicy(
            at(4, 16.7),
            EDITOR,
            "release-planner",
            "prod",
            {
                "diagnosticsVerbosity": "summary",
                "totalTokenBudget": 3000,
                "similarityMin": PLANNER_SIMILARITY,
                "memoryTypeAllowed": [
                    "fact",
                    "decision",
                    "instruction",
                    "episode",
                    "summary",
                    "insight",
                    "entity",
                ],
                "sourceKindAllowed": [
                    "user",
                    "assistant",
                    "tool",
                    "retrieval",
                    "operator",
                    "system",
                ],
            },  # fmt: skip
            "Prod plans leave out preferences and anything imported from the old wiki: the "
            "24.11 draft quoted the Jenkins deploy steps.",
        ),
        ChangeMemory(
            at(5, 13.5), EDITOR, "user:mei", "Mei seems to prefer XML payloads", status="suppressed"
        ),
        ChangeMemory(
            at(6, 10.1),
            EDITOR,
            "user:ada",
            "Ada might be evaluating a competitor",
            status="suppressed",
        ),
    ]


def _recalls(
    data: DemoData,
    at: Clock,
    arrived: dict[str, datetime],
    first: date,
    now: datetime,
    rng: random.Random,
) -> list[Step]:
    present = {p.actor_id for p in data.personas if p.memories}
    steps: list[Step] = []
    for day in range(DAYS):
        weekend = (first + timedelta(days=day)).weekday() >= 5
        low, high = RECALLS_PER_DAY["weekend" if weekend else "weekday"]
        for _ in range(rng.randint(low, high)):
            hour = rng.choices(range(24), weights=HOUR_WEIGHTS)[0] + rng.random()
            when = at(day, hour)
            if (day == 0 and hour < FIRST_RECALL_HOUR) or when > now - LAST_RECALL_MARGIN:
                continue
            caller = rng.choices(CALLERS, weights=[c.weight for c in CALLERS])[0]
            actors = {
                actor: weight
                for actor, weight in caller.actors.items()
                if actor in present or arrived.get(actor, now) < when
            }
            actor = rng.choices(list(actors), weights=list(actors.values()))[0]
            query = rng.choice(data.queries[caller.workload][actor]).text
            steps.append(
                Recall(
                    when,
                    caller.author,
                    caller.workload,
                    caller.environment,
                    actor,
                    query,
                    caller.top_k,
                    caller.override,
                )
            )
    return steps


def _working_day(first: date, day: int) -> int:
    """The day itself if a weekday, else the next weekday before today (else the last one):
    people edit on working days. Never earlier than an earlier day's, so order is kept."""
    weekdays = [d for d in range(1, DAYS - 1) if (first + timedelta(days=d)).weekday() < 5]
    return next((d for d in weekdays if d >= day), weekdays[-1])


def _conversation(conversation: Conversation, now: datetime) -> list[Step]:
    """A session started hours before ``now``, its posts two minutes apart, left active."""
    c = conversation
    start = now - timedelta(hours=c.hours_ago)
    return [
        StartSession(
            start, c.author, c.external_id, c.workload, c.environment, c.actor_id, c.system_prompt
        ),
        *(
            PostTurns(start + timedelta(minutes=2 * n), c.author, c.external_id, post.messages)
            for n, post in enumerate(c.posts)
        ),
    ]


def week(data: DemoData, *, now: datetime, seed: int = SEED) -> list[Step]:
    """Every step of the demo's week, oldest first, all before ``now``."""
    first = (now - timedelta(days=DAYS - 1)).astimezone(UTC).date()

    def at(day: int, hour: float) -> datetime:
        midnight = datetime.combine(first + timedelta(days=day), time.min, tzinfo=UTC)
        return midnight + timedelta(hours=hour)

    def on_working_day(day: int, hour: float) -> datetime:
        return at(_working_day(first, day), hour)

    imported_at = at(0, 10.1)
    imports: list[Step] = [
        ImportMemories(
            imported_at + timedelta(minutes=n),
            OPERATOR,
            persona.actor_id,
            persona_items(persona, imported_at=imported_at, seed=seed),
        )
        for n, persona in enumerate(p for p in data.personas if p.memories)
    ]
    arrivals: list[Step] = []
    arrived: dict[str, datetime] = {}
    for arrival in data.arrivals:
        when = on_working_day(arrival.day, arrival.hour)
        arrived[arrival.actor_id] = min(when, arrived.get(arrival.actor_id, when))
        persona = data.persona(arrival.actor_id)
        items = arrival_items(arrival, persona, at=when, seed=seed)
        arrivals.append(ImportMemories(when, arrival.author, arrival.actor_id, items))
    rng = random.Random(seed)
    steps = [
        *_setup(at),
        *imports,
        *_week_edits(on_working_day),
        *arrivals,
        *_recalls(data, at, arrived, first, now, rng),
        *(step for c in data.conversations for step in _conversation(c, now)),
    ]
    # Stable: steps planned at the same moment keep the order above.
    return sorted(steps, key=lambda step: step.at)
