"""Every key the layout configuration accepts is used or refused (seed 000: "a flexible dict
accepting a misspelled key does not mean the formatter uses it").

The walk takes every key of the parser's tables. A key of ``NO_EFFECT`` set away from its
default is refused, saying it has no effect; so is, at a save of a workload's configuration
(what its sessions run under), a key of ``SESSION_NO_EFFECT``. Every other key has a scenario
here: the same
session, in a fresh workspace each time (so no run's hits or sessions reach another), is run
under a base configuration and under the base with that key changed, and what the turns
answer (prompt, layout, recall budget, budget status, compaction decision) or what the
session's compaction runs did (their outcome, tokens, turns, summaries, insights superseded;
not the service they name) must differ. A key added to the parser without a scenario, or one
whose change changes nothing, fails.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.db import transaction

from chat.models import CompactionRun, Session, Turn
from chat.services import Message, session_create, session_turns_post, turns_numbered
from policies.services import workload_create, workspace_create
from portal.errors import ValidationFailed
from recall.layout.config import (
    COMPACTION_SCALARS,
    MEMORY_SCALARS,
    NO_EFFECT,
    PRIMING_SCALARS,
    SESSION_NO_EFFECT,
    SUPPORTING_NESTED,
    SUPPORTING_SCALARS,
    LayoutConfig,
    LayoutConfigError,
    layout_config_to_dict,
    parse_memory_config,
)
from recall.layout.services import layout_config_current, layout_config_save
from recall.models import WorkloadLayoutConfigVersion
from tests.chat.helpers import roomy_floor
from tests.recall import factories

pytestmark = pytest.mark.django_db

ACCEPTED = sorted(
    [f"{key}" for key in MEMORY_SCALARS]
    + [f"supporting_context.{key}" for key in (*SUPPORTING_SCALARS, *SUPPORTING_NESTED)]
    + [f"priming.{key}" for key in PRIMING_SCALARS]
    + [f"compaction.{key}" for key in COMPACTION_SCALARS]
)

TWO_TURNS = (
    [("user", "release notes for ada")],
    [("assistant", "Here they are."), ("user", "release plans please")],
)
# Each exchange longer than the last: utilization rises from turn to turn.
FOUR_TURNS = (
    *TWO_TURNS,
    [("assistant", "planned " * 300), ("user", "release dates and owners")],
    [("assistant", "dated " * 600), ("user", "release risks and the open questions")],
)
# Long exchanges in a small window: the session reaches warning and is compacted (eager runs).
LONG_TURNS = tuple(
    [("assistant", f"Answer {n}. " + "The release train leaves on Friday with owners. " * 12),
     ("user", f"release question {n} about notes and plans?")]
    for n in range(10)
)  # fmt: skip
COMPACTING = {
    "context_window": 1600,
    "output_buffer": 0,
    "compaction": {
        "enabled": True,
        "cooldown_turns": 1,
        "min_turns_to_summarize": 2,
        "max_turns_per_summary": 4,
        "compaction_recency_window": 2,
    },
}
TREND = {"compaction": {"enabled": True}}
RISING = {"compaction": {"enabled": True, "compaction_threshold": 0.0}}
FULL = {"context_window": 60, "output_buffer": 0, "compaction": {"enabled": True}}

# key -> (base configuration, the key's other value, the turns posted)
SCENARIOS: dict[str, tuple[dict[str, Any], Any, tuple[list[tuple[str, str]], ...]]] = {
    "context_window": ({}, 20_000, TWO_TURNS),
    "output_buffer": ({}, 1_000, TWO_TURNS),
    "max_history_turns": ({}, 1, TWO_TURNS),
    "supporting_context.budget_ratio": ({}, 0.05, TWO_TURNS),
    "supporting_context.section_priority": ({}, ["known_facts"], TWO_TURNS),
    "supporting_context.max_items": ({}, {"known_facts": 1}, TWO_TURNS),
    "supporting_context.min_query_relevance": ({}, 0.9, TWO_TURNS),
    "priming.enabled": ({}, False, TWO_TURNS),
    "priming.token_budget": ({}, 60, TWO_TURNS),
    "priming.top_entities": ({}, 1, TWO_TURNS),
    "priming.max_insights": ({}, 1, TWO_TURNS),
    "priming.max_summaries": ({}, 1, TWO_TURNS),
    "priming.max_known_facts": ({}, 1, TWO_TURNS),
    "priming.previous_sessions": ({}, 2, TWO_TURNS),
    "priming.previous_session_turns": ({}, 1, TWO_TURNS),
    "compaction.enabled": ({}, True, TWO_TURNS),
    "compaction.compaction_threshold": (TREND, 0.0, FOUR_TURNS),
    "compaction.trend_window": (RISING, 2, FOUR_TURNS),
    "compaction.max_duration_ms": (RISING, 1_000, FOUR_TURNS),
    "compaction.critical_max_duration_ms": (FULL, 1_000, TWO_TURNS),
    "compaction.llm_service": (COMPACTING, "terse", LONG_TURNS),
    "compaction.target_utilization": (COMPACTING, 0.3, LONG_TURNS),
    "compaction.cooldown_turns": (COMPACTING, 4, LONG_TURNS),
    "compaction.min_turns_to_summarize": (COMPACTING, 5, LONG_TURNS),
    "compaction.max_turns_per_summary": (COMPACTING, 2, LONG_TURNS),
    "compaction.compaction_recency_window": (COMPACTING, 12, LONG_TURNS),
    "compaction.insight_dedup_enabled": (COMPACTING, False, LONG_TURNS),
    "compaction.insight_similarity_threshold": (COMPACTING, 0.5, LONG_TURNS),
    "compaction.max_insights_to_check": (COMPACTING, 2, LONG_TURNS),
}
# The compaction services the walk may name: the built-in one and a terser one.
SERVICES = {
    "compaction": {"kind": "extractive"},
    "terse": {"kind": "extractive", "max_tokens": 25},
}


def _with(base: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    changed = {name: dict(part) if isinstance(part, dict) else part for name, part in base.items()}
    *path, name = key.split(".")
    target = changed
    for part in path:
        target = target.setdefault(part, {})
    target[name] = value
    return changed


_worlds = itertools.count(1)


def _world() -> tuple[Any, Any]:
    """A fresh workspace: a workload, memories of every section, two earlier sessions."""
    workspace = workspace_create(slug=f"walk-{next(_worlds)}", name="Walk", author="system:test")
    roomy_floor(workspace)
    workload = workload_create(workspace=workspace, name="bot", author="system:test")
    kinds = [
        {"memory_type": "fact"}, {"memory_type": "insight"}, {"memory_type": "summary"},
        {"memory_type": "entity"}, {"segment_kind": "retrieval"},
        {"segment_kind": "tool_result"},
    ]  # fmt: skip
    factories.memories(
        workspace,
        *(
            {**kind, "content": f"release {n} {word} of ada"}
            for n, kind in enumerate(kinds)
            for word in ("notes", "plans", "dates")
        ),
    )
    # Three insights saying the same, oldest first: compaction's insight dedup supersedes the
    # two older ones (one, when it checks only the two most recent).
    for _ in range(3):
        factories.memories(
            workspace, {"memory_type": "insight", "content": "Ada reads the release notes"}
        )
    for number in (1, 2):
        earlier = session_create(
            workspace=workspace, actor_id="user:ada", workload_id=workload.id,
            environment="prod", author="system:test",
        )  # fmt: skip
        with transaction.atomic():
            messages = [Message("user", f"earlier {number} turn {n}") for n in range(1, 4)]
            Turn.objects.bulk_create(turns_numbered(session=earlier, messages=messages))
            earlier.save()
    return workspace, workload


RUN_FIELDS = (
    "status", "trigger", "reason", "severity", "time_budget_ms", "time_budget_exhausted",
    "target_utilization", "target_met", "tokens_before", "tokens_after", "utilization_after",
    "turns_summarised", "notes", "error_code",
)  # fmt: skip


def _runs(session: Session) -> list[Any]:
    """What the session's compaction runs did, without ids, times or the service's name."""
    runs = CompactionRun.objects.filter(session=session).order_by("pk")
    return [
        (
            *(getattr(run, name) for name in RUN_FIELDS),
            len(run.summary_ids),
            len(run.insights_superseded),
            len(run.memories_promoted),
        )
        for run in runs
    ]


def _run(memory: dict[str, Any], turns: tuple[list[tuple[str, str]], ...]) -> list[Any]:
    """What each turn of a session answers under ``memory``, without ids or times, and what
    its compaction runs did."""
    workspace, workload = _world()
    if memory:
        layout_config_save(workload=workload, document={"memory": memory}, author="system:test")
    session = session_create(
        workspace=workspace, actor_id="user:ada", workload_id=workload.id, environment="prod",
        author="system:test", system_prompt="You help Ada.",
    )  # fmt: skip
    seen = []
    for messages in turns:
        posted = session_turns_post(
            session=Session.objects.get(pk=session.pk),
            messages=[{"role": role, "content": content} for role, content in messages],
            author="system:test",
        )
        context = posted.context
        assert context is not None
        layout = {k: v for k, v in context.layout.items() if k != "configVersion"}
        recall = {k: context.recall[k] for k in ("topK", "tokenBudget", "counts", "usedTokens")}
        compaction = {
            k: v for k, v in context.compaction.items() if k not in ("runId", "waitedFor")
        }
        seen.append((context.prompt, layout, recall, context.budget_status, compaction))
    seen.append(_runs(session))
    return seen


class ConfigKeyWalkTests:
    def test_every_accepted_key_is_used_or_refused(self):
        assert set(ACCEPTED) == set(SCENARIOS) | set(NO_EFFECT) | set(SESSION_NO_EFFECT)
        assert not set(NO_EFFECT) & set(SCENARIOS)
        assert not set(SESSION_NO_EFFECT) & (set(SCENARIOS) | set(NO_EFFECT))

    @pytest.mark.parametrize("key", sorted(NO_EFFECT))
    def test_a_key_with_no_effect_is_refused_away_from_its_default(self, key):
        section, name = key.split(".")
        default, other = _default_and_other(section, name)

        parse_memory_config({section: {name: default}})  # at its default it is accepted
        with pytest.raises(LayoutConfigError) as caught:
            parse_memory_config({section: {name: other}})

        assert "has no effect" in caught.value.errors[f"memory.{key}"]

    def test_every_other_key_changes_what_a_session_turn_gives(self, settings):
        settings.COMPACTION_SERVICES = SERVICES
        baselines: dict[str, list[Any]] = {}
        unchanged = []
        for key, (base, value, turns) in SCENARIOS.items():
            label = repr((base, len(turns)))
            if label not in baselines:
                baselines[label] = _run(base, turns)
            if _run(_with(base, key, value), turns) == baselines[label]:
                unchanged.append(key)

        assert unchanged == []

    @pytest.mark.parametrize("key", sorted(SESSION_NO_EFFECT))
    def test_a_key_no_session_reads_is_refused_at_a_save(self, key, workload_a):
        section, name = key.split(".")
        default, other = _default_and_other(section, name)
        layout_config_save(
            workload=workload_a, document={"memory": {section: {name: default}}}, author="t"
        )  # at its default it is accepted

        with pytest.raises(ValidationFailed) as caught:
            layout_config_save(
                workload=workload_a, document={"memory": {section: {name: other}}}, author="t"
            )

        assert "has no effect on a session" in caught.value.details["fields"][f"memory.{key}"]
        current = layout_config_current(workload=workload_a).version
        assert current is not None and current.version == 1  # nothing was saved
        parse_memory_config({section: {name: other}})  # a layout request still takes it


def _default_and_other(section: str, name: str) -> tuple[Any, Any]:
    """A key's default and another value of its type."""
    default = getattr(getattr(parse_memory_config({}), section), name)
    other: Any = not default if isinstance(default, bool) else "other"
    if isinstance(default, int | float) and not isinstance(default, bool):
        other = 0.5 if isinstance(default, float) and default != 0.5 else 1
        other = 0.2 if isinstance(default, float) and default == 0.5 else other
    return default, other


class NoEffectSavedBeforeTests:
    def test_a_save_refuses_it_and_names_the_key(self, operator, workload_a):
        response = operator.api().put(
            f"/v1/workloads/{workload_a.id}/layout-config",
            {"memory": {"compaction": {"critical_threshold": 0.5}}},
            format="json",
        )

        assert response.status_code == 400
        fields = response.json()["error"]["details"]["fields"]
        assert "has no effect" in fields["memory.compaction.critical_threshold"]

    def test_a_document_stored_before_is_read_as_it_was_saved(self, editor, workload_a):
        document = layout_config_to_dict(LayoutConfig())
        document["memory"]["compaction"]["critical_threshold"] = 0.5
        WorkloadLayoutConfigVersion.objects.create(
            workload=workload_a, version=1, document=document, author="system:test"
        )

        current = layout_config_current(workload=workload_a)

        assert current.config.compaction.critical_threshold == 0.5
        session = session_create(
            workspace=editor.workspace, actor_id="user:ada", workload_id=workload_a.id,
            environment="prod", author="system:test",
        )  # fmt: skip
        posted = session_turns_post(
            session=session, messages=[{"role": "user", "content": "hi"}], author="t"
        )
        assert posted.context is not None and posted.context.layout["configVersion"] == 1
