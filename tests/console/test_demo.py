"""The demo's hand-written memories and its planned week (console/demo), without a database."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from console.demo.history import (
    CALLERS,
    DAYS,
    ImportMemories,
    PostTurns,
    Recall,
    SaveFloor,
    SavePolicy,
    StartSession,
    Step,
    week,
)
from console.demo.memories import demo_data

# One "now" per day of the week, at different hours, so every calendar layout is planned.
NOWS = [datetime(2026, 3, 2, 7, 30, tzinfo=UTC) + timedelta(days=d, hours=3 * d) for d in range(7)]


def plan(now: datetime) -> list[Step]:
    return week(demo_data(), now=now)


def edits(steps: list[Step]) -> list[Step]:
    """What people change after the first day (not the agents' recalls and sessions)."""
    first_day = steps[0].at.date()
    agents = (Recall, StartSession, PostTurns)
    return [s for s in steps if not isinstance(s, agents) and s.at.date() != first_day]


class DemoWeekTests:
    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_every_step_is_in_the_past_and_in_time_order(self, now):
        steps = plan(now)

        assert [s.at for s in steps] == sorted(s.at for s in steps)
        assert steps[-1].at < now
        assert steps[0].at > now - timedelta(days=DAYS)

    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_people_edit_on_working_days_before_today(self, now):
        changes = edits(plan(now))

        assert changes
        assert all(s.at.weekday() < 5 and s.at.date() < now.date() for s in changes)

    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_an_agent_s_session_starts_hours_ago_and_its_posts_follow_it(self, now):
        steps = plan(now)
        [start] = [s for s in steps if isinstance(s, StartSession)]
        posts = [s for s in steps if isinstance(s, PostTurns)]

        assert now - timedelta(hours=2) < start.at < now - timedelta(hours=1)
        assert [p.at - start.at for p in posts] == [timedelta(0), timedelta(minutes=2)]
        assert {p.external_id for p in posts} == {start.external_id}
        assert steps.index(start) < steps.index(posts[0]) < steps.index(posts[1])
        # Each post ends with the user's message: each is answered with a context.
        assert all(p.messages[-1][0] == "user" for p in posts)

    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_the_staging_policy_fits_the_floor_it_is_saved_under(self, now):
        steps = plan(now)
        staging = next(s for s in steps if isinstance(s, SavePolicy) and s.environment == "staging")
        raised = [s for s in steps if isinstance(s, SaveFloor)][-1]

        # Saved before the floor rises past it, so it is left non-compliant, not refused.
        assert staging.at < raised.at
        assert staging.document["confidenceMin"] < raised.changes["confidenceMin"]

    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_nobody_is_recalled_before_their_first_memory(self, now):
        steps = plan(now)
        first_memory = {}
        for step in steps:
            if isinstance(step, ImportMemories):
                first_memory.setdefault(step.actor_id, step.at)

        recalls = [s for s in steps if isinstance(s, Recall)]
        assert recalls
        assert all(first_memory[r.actor_id] < r.at for r in recalls)

    def test_recalls_come_from_every_workload_and_environment_more_on_weekdays(self):
        recalls = [s for s in plan(NOWS[3]) if isinstance(s, Recall)]
        per_day = Counter(r.at.date() for r in recalls)
        weekday = [n for day, n in per_day.items() if day.weekday() < 5]
        weekend = [n for day, n in per_day.items() if day.weekday() >= 5]

        assert {r.workload for r in recalls} == {
            "support-assistant",
            "release-planner",
            "onboarding-guide",
        }
        assert {r.environment for r in recalls} == {"dev", "staging", "prod"}
        assert len({r.author for r in recalls}) >= 4
        assert max(weekend) < min(n for n in weekday if n > 15)

    def test_the_week_is_the_same_on_every_run(self):
        assert plan(NOWS[0]) == plan(NOWS[0])


class DemoMemoryTests:
    def test_every_memory_is_written_once(self):
        data = demo_data()
        texts = [m.text for p in data.personas for m in p.memories]
        texts += [m.text for a in data.arrivals for m in a.memories]

        assert len(texts) >= 250
        assert len(set(texts)) == len(texts)
        # Hand-written, not a template: few texts share even their first three words.
        openings = Counter(" ".join(t.split()[:3]) for t in texts if not t.startswith("On {date}"))
        assert openings.most_common(1)[0][1] <= 5

    def test_the_memories_vary_in_source_consent_confidence_and_age(self):
        items = [
            item
            for step in plan(NOWS[0])
            if isinstance(step, ImportMemories)
            for item in step.items
        ]

        assert len({i["source_kind"] for i in items}) >= 6
        assert {"explicit", "contractual", "legitimate_interest", "implied", "unknown"} <= {
            i["consent_policy"] for i in items
        }
        assert {"public", "internal", "confidential", "restricted"} == {
            i["sensitivity"] for i in items
        }
        assert min(i["confidence"] for i in items) < 0.4 < 0.9 < max(i["confidence"] for i in items)
        ages = [NOWS[0] - i["created_at"] for i in items]
        assert min(ages) < timedelta(days=7) and max(ages) > timedelta(days=365)

    @pytest.mark.parametrize("now", NOWS, ids=lambda now: now.strftime("%A"))
    def test_every_memory_s_history_is_in_order(self, now):
        # Made, then last recalled, then made stale, all before it is imported: never a
        # memory stale before it was made (#145 of issue 36).
        for step in plan(now):
            if not isinstance(step, ImportMemories):
                continue
            for item in step.items:
                created, last = item["created_at"], item.get("last_accessed_at")
                stale = item.get("stale_since")
                assert created <= step.at < now, item["content"]
                assert last is None or created <= last <= step.at, item["content"]
                assert (stale is not None) == (item["lifecycle_status"] == "stale")
                if stale is not None:
                    assert max(created, last or created) < stale <= step.at, item["content"]
                expires = item["expires_at"]
                assert expires is None or expires > created, item["content"]

    def test_every_workload_has_queries_for_the_actors_it_recalls(self):
        queries = demo_data().queries
        for caller in CALLERS:
            for actor in caller.actors:
                assert queries[caller.workload][actor], (caller.workload, actor)

    def test_every_query_names_exactly_one_memory_of_its_actor(self):
        data = demo_data()
        for workload, by_actor in data.queries.items():
            for actor, queries in by_actor.items():
                for query in queries:
                    found = [m.text for m in data.found_by(actor, query)]
                    assert len(found) == 1, (workload, actor, query.text, found)
