"""The event page: what an event is about first, in words (a policy's change, a recall's
request, counts, tokens and sandbox link, a token's or a workload's fields), hashes after;
the list's one-line summaries; the CSV's payload columns as a pure function."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.exports import PAYLOAD_COLUMNS, payload_cells
from audit.models import AuditEvent, EventType
from audit.presenters import presented_types, presenter_for, summary
from audit.services import audit_event_record
from maintenance import services as maintenance
from policies import labels
from policies.services import (
    workload_archive,
    workload_policy_save,
    workload_update,
    workspace_rename,
    workspace_store_queries_set,
)
from recall.erasure import actor_erase
from recall.services import memory_delete, memory_update
from team.services import api_token_revoke
from tests.audit.test_pages import assembled
from tests.helpers import QUERY, recall
from tests.module_personas import module_scoped
from tests.recall import factories

# The personas and workload the tests here act as and on, made once per module.
workspace_a, editor, viewer, workload_a, made_first = module_scoped(
    "workspace_a", "editor", "viewer", "workload_a"
)

pytestmark = pytest.mark.django_db


def page_of(persona: Any, event: AuditEvent) -> Any:
    client = Client()
    client.force_login(persona.user)
    response = client.get(reverse("audit:event", args=[event.workspace.slug, event.pk]))
    assert response.status_code == 200
    return response


def text_of(response: Any) -> str:
    """The page's text without tags, whitespace collapsed."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", response.content.decode(), flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def latest(workspace: Any, type: str) -> AuditEvent:
    return AuditEvent.objects.filter(workspace=workspace, type=type).order_by("-id").first()


class PolicyEventTests:
    def test_the_first_floor_reads_as_created_with_no_before_column(self, viewer, workspace_a):
        response = page_of(viewer, latest(workspace_a, EventType.WORKSPACE_POLICY_SET))
        html, text = response.content.decode(), text_of(response)

        assert response.context["first_version"] is True
        assert "Operator floor version 1 created" in text
        assert "The workspace's first floor" in text
        assert 'class="before"' not in html and "Set to" in text
        keys = [c.key for c in response.context["changes"]]
        assert "sensitivityCeiling" in keys and "relaxableAxes" in keys
        assert "Sensitivity ceiling" in text and "Relaxable axes" in text

    def test_a_first_workload_policy_lists_what_it_sets_and_the_rest_inherits(
        self, viewer, workload_a
    ):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"sensitivityCeiling": "internal", "maxAgeSeconds": 2_592_000},
            author="user:eddie",
            comment="Less for support",
        )
        response = page_of(viewer, latest(workload_a.workspace, EventType.WORKLOAD_POLICY_SET))
        text = text_of(response)

        assert [(c.label, c.after) for c in response.context["changes"]] == [
            ("Sensitivity ceiling", "internal"),
            ("Maximum age", "30 days"),
        ]
        assert "Workload policy version 1 created" in text
        assert "The first policy of support-bot for prod" in text
        assert "every other axis inherits the floor" in text
        assert "Comment: “Less for support”" in text and "checked against floor v1" in text
        assert 'class="before"' not in response.content.decode()

    def test_a_later_version_shows_before_and_after(self, viewer, workload_a):
        for ceiling, comment in (("internal", "first"), ("public", "narrower")):
            workload_policy_save(
                workload=workload_a,
                environment="prod",
                document={"sensitivityCeiling": ceiling},
                author="user:eddie",
                comment=comment,
            )
        response = page_of(viewer, latest(workload_a.workspace, EventType.WORKLOAD_POLICY_SET))
        text = text_of(response)

        assert response.context["first_version"] is False
        assert [(c.key, c.before, c.after) for c in response.context["changes"]] == [
            ("sensitivityCeiling", "internal", "public")
        ]
        assert "Before (v1)" in text and "After (v2)" in text and "created" not in text

    def test_lifecycle_settings_show_their_changes_in_the_settings_words(self, viewer, workspace_a):
        maintenance.lifecycle_settings_patch(
            workspace=workspace_a,
            changes={"retentionDays": 60, "decayLongTerm": True},
            author="user:olga",
            comment="Keep stale memories longer",
        )
        event = latest(workspace_a, EventType.LIFECYCLE_SETTINGS_SET)
        response = page_of(viewer, event)
        changes = {c.key: (c.label, c.after) for c in response.context["changes"]}

        assert changes["retentionDays"] == ("Retention of stale memories", "60 days")
        assert changes["decayLongTerm"] == ("Long-term memories decay too", "on")
        assert "Lifecycle settings version" in text_of(response)
        assert summary(event).endswith("— “Keep stale memories longer”")


class AssembledEventTests:
    def test_it_shows_the_request_counts_in_words_and_tokens_before_the_hashes(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a, n=2)
        response = page_of(viewer, latest(workspace_a, EventType.ASSEMBLED))
        html, text = response.content.decode(), text_of(response)

        for words in ("Candidates", "After policy", "After ranking", "After budget"):
            assert words in text
        assert "620 of 3,200 tokens used" in text
        assert "Used by system policy 500" in text and "The query 4" in text
        assert "Actor user:ada" in text and "Called by token:agent" in text
        assert "Top K 5 · exact search" in text
        assert "not stored: the trail keeps a salted hash only" in text
        # the words come first, the envelope's hashes after, the chain links last and folded
        assert html.index("After policy") < html.index("c" * 64) < html.index(event_hash(html))
        assert '<details class="card" id="chain">' in html

    def test_it_explains_prefix_fingerprint_digest_and_reused(
        self, viewer, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a)
        html = page_of(viewer, latest(workspace_a, EventType.ASSEMBLED)).content.decode()
        for term in ("prefixFingerprint", "digest", "reused", "effectivePolicyHash"):
            assert labels.TERM_HINTS[term].replace("'", "&#x27;") in html

    def test_its_time_has_no_microseconds(self, viewer, workspace_a, workload_a):
        assembled(workspace_a, workload_a)
        event = latest(workspace_a, EventType.ASSEMBLED)
        text = text_of(page_of(viewer, event))
        assert f"{event.occurred_at:%Y-%m-%d %H:%M:%S} UTC" in text
        assert f"{event.occurred_at:%H:%M:%S}.{event.occurred_at:%f}" not in text

    def test_the_sandbox_link_prefills_the_same_request(self, editor, workload_a):
        factories.memories(editor.workspace, {"content": "release summary preferences"})
        recall(editor, workload_a)
        event = latest(editor.workspace, EventType.ASSEMBLED)
        url = page_of(editor, event).context["sandbox_url"]

        assert parse_qs(urlsplit(url).query) == {
            "workload": [str(workload_a.pk)],
            "environment": ["prod"],
            "actor": ["user:ada"],
            "top_k": [str(event.payload["topK"])],
        }
        client = Client()
        client.force_login(editor.user)
        form = client.get(url).context["form"]
        assert form["workload"].value() == str(workload_a.pk)
        assert form["environment"].value() == "prod"
        assert form["actor"].value() == "user:ada"
        assert form["top_k"].value() == str(event.payload["topK"])
        assert form["query"].value() == ""  # not stored, so not prefilled

    def test_a_stored_query_goes_to_the_sandbox_too(self, operator, editor, workload_a):
        workspace_store_queries_set(workspace=editor.workspace, enabled=True, author="user:olga")
        editor.workspace.refresh_from_db()
        factories.memories(editor.workspace, {"content": "release summary preferences"})
        recall(editor, workload_a)
        response = page_of(editor, latest(editor.workspace, EventType.ASSEMBLED))

        assert parse_qs(urlsplit(response.context["sandbox_url"]).query)["query"] == [QUERY]
        assert f"Query “{QUERY}”" in text_of(response)

    def test_there_is_no_sandbox_link_once_the_workload_is_archived(
        self, editor, workspace_a, workload_a
    ):
        assembled(workspace_a, workload_a)
        workload_archive(workload=workload_a, author="user:olga")
        response = page_of(editor, latest(workspace_a, EventType.ASSEMBLED))
        assert response.context["sandbox_url"] == ""
        assert "The workload is archived" in text_of(response)


def event_hash(html: str) -> str:
    """The event's own hash, as the Chain section shows it."""
    match = re.search(
        r'<dt>Hash</dt><dd><span class="token"><code class="token-value hash">'
        r"([0-9a-f]{64})</code>",
        html,
    )
    assert match, "the chain section names the event's hash"
    return match.group(1)


class OtherEventTests:
    def test_a_token_event_shows_name_role_and_prefix_never_the_token(self, viewer, workspace_a):
        event = AuditEvent.objects.get(
            workspace=workspace_a, type=EventType.TOKEN_ISSUED, payload__name="vera-token"
        )
        response = page_of(viewer, event)
        text = text_of(response)
        assert "API token issued" in text
        assert "Name vera-token" in text and "Role viewer" in text
        assert f"Token begins with {event.payload['prefix']}…" in text
        assert viewer.token not in response.content.decode()

    def test_a_revoked_token_says_so(self, viewer, workspace_a):
        from portal.models import ApiToken

        api_token_revoke(token=ApiToken.objects.get(name="vera-token"), author="user:olga")
        text = text_of(page_of(viewer, latest(workspace_a, EventType.TOKEN_REVOKED)))
        assert "API token revoked" in text and "Name vera-token" in text

    def test_workload_events_show_their_fields(self, viewer, workspace_a, workload_a):
        text = text_of(page_of(viewer, latest(workspace_a, EventType.WORKLOAD_CREATED)))
        assert "Workload created" in text and "Name support-bot" in text

        workload_update(workload=workload_a, author="user:olga", description="Answers tickets")
        event = latest(workspace_a, EventType.WORKLOAD_UPDATED)
        assert "Description (empty) → Answers tickets" in text_of(page_of(viewer, event))
        assert summary(event) == "description: (empty) → Answers tickets"

        workload_archive(workload=workload_a, author="user:olga")
        text = text_of(page_of(viewer, latest(workspace_a, EventType.WORKLOAD_ARCHIVED)))
        assert "Workload archived" in text and "Name support-bot" in text and "archived" in text

    def test_workspace_events_show_their_change(self, viewer, workspace_a):
        workspace_rename(workspace=workspace_a, name="Team Alpha", author="user:olga")
        event = latest(workspace_a, EventType.WORKSPACE_RENAMED)
        assert "Renamed from Team A Renamed to Team Alpha" in text_of(page_of(viewer, event))
        assert summary(event) == "Team A → Team Alpha"

        workspace_store_queries_set(workspace=workspace_a, enabled=True, author="user:olga")
        text = text_of(page_of(viewer, latest(workspace_a, EventType.WORKSPACE_SETTINGS_SET)))
        assert "Recall queries not stored (a salted hash only) → stored" in text

    def test_a_memory_change_links_the_memory_while_it_exists(self, viewer, workspace_a):
        memory = factories.memory(workspace_a, "prefers short answers")
        memory_update(memory=memory, changes={"content": "prefers bullet points"}, author="u:e")
        event = latest(workspace_a, EventType.MEMORY_CHANGED)
        response = page_of(viewer, event)
        text = text_of(response)
        assert (
            "Action updated" in text
            and "Actor user:ada" in text
            and "Fields changed content" in text
        )
        assert reverse("recall:memory", args=["team-a", memory.pk]) in response.content.decode()
        assert "prefers" not in text  # the trail names fields, never content
        assert summary(event) == "updated 1 memory: content"

        pk = memory.pk
        memory_delete(memory=memory, author="user:eddie")
        html = page_of(viewer, event).content.decode()
        assert reverse("recall:memory", args=["team-a", pk]) not in html
        assert f"#{pk}" in html

    def test_an_erasure_shows_the_count_and_ids(self, viewer, workspace_a):
        rows = factories.memories(workspace_a, {"content": "a"}, {"content": "b"})
        actor_erase(workspace=workspace_a, actor_id="user:ada", author="user:olga")
        text = text_of(page_of(viewer, latest(workspace_a, EventType.MEMORY_ERASED)))
        assert "Actor erased" in text and "Erased 2 memories" in text
        assert all(f"#{row.pk}" in text for row in rows)

    def test_a_maintenance_run_shows_its_sweep_mode_status_and_counts(self, viewer, workspace_a):
        factories.memory(
            workspace_a, "an old offer", expires_at=timezone.now() - timedelta(hours=1)
        )
        run = maintenance.maintenance_start(
            workspace=workspace_a, sweep="expiry", mode="preview", author="user:eddie"
        )
        event = latest(workspace_a, EventType.MAINTENANCE_PREVIEWED)
        response = page_of(viewer, event)
        text = text_of(response)
        assert f"Run #{run.pk}" in text and "Sweep Expiry" in text
        assert "Mode preview (changes no memory)" in text and "Status succeeded" in text
        assert "Memories 1 listed" in text and "Started by hand" in text
        assert reverse("maintenance:run", args=["team-a", run.pk]) in response.content.decode()
        assert summary(event) == "Expiry preview, succeeded: 1 listed"

    def test_a_layout_configuration_names_what_changed(self, viewer, workspace_a, workload_a):
        with transaction.atomic():
            audit_event_record(
                workspace=workspace_a,
                type=EventType.LAYOUT_CONFIG_SET,
                author="user:eddie",
                workload_id=workload_a.id,
                payload={
                    "version": 2,
                    "before": {},
                    "after": {},
                    "changed": ["window.total", "compaction.threshold"],
                    "comment": "Bigger window",
                },
            )
        event = latest(workspace_a, EventType.LAYOUT_CONFIG_SET)
        text = text_of(page_of(viewer, event))
        assert "Chat layout configuration saved" in text
        assert "Changed window.total, compaction.threshold" in text
        assert summary(event) == "v2: window.total, compaction.threshold — “Bigger window”"


class SummaryTests:
    def test_every_event_type_has_a_registered_presenter_and_title(self):
        # The apps are ready here: each app's events.py has registered its presenters.
        assert presented_types() == set(EventType.values)
        assert all(presenter_for(value).title not in ("", value) for value in EventType.values)

    def test_a_first_workload_policy_reads_as_created(self):
        event = AuditEvent(
            type=EventType.WORKLOAD_POLICY_SET,
            payload={"version": 1, "before": None, "diff": {"confidenceMin": {}}, "comment": ""},
        )
        assert summary(event) == "v1 created: Minimum confidence"

    def test_the_first_floor_does_not_list_every_axis(self):
        event = AuditEvent(
            type=EventType.WORKSPACE_POLICY_SET,
            payload={"version": 1, "before": None, "diff": {"confidenceMin": {}}, "comment": "x"},
        )
        assert summary(event) == "v1 created — “x”"

    def test_a_token_names_its_prefix_only(self):
        event = AuditEvent(
            type=EventType.TOKEN_ISSUED,
            payload={"name": "cli", "role": "editor", "prefix": "crp_AbCdEf"},
        )
        assert summary(event) == "cli (editor), crp_AbCdEf…"


class PayloadColumnsTests:
    def cells(self, payload: Any) -> dict[str, Any]:
        return dict(zip(PAYLOAD_COLUMNS, payload_cells(payload), strict=True))

    def test_an_assembled_payload_is_flattened(self):
        cells = self.cells(
            {
                "envelopeId": "e1",
                "topK": 5,
                "reused": False,
                "counts": {"candidates": 9, "afterPolicy": 7},
                "tokenCounts": {"used": 620, "budget": 3200},
                "memoryIds": ["1", "2", "3"],
                "truncatedIds": ["4"],
                "policyVersions": {"floor": 2, "workload": None, "override": True},
            }
        )
        assert cells["envelopeId"] == "e1" and cells["topK"] == 5 and cells["reused"] is False
        assert cells["counts.afterPolicy"] == 7 and cells["counts.afterRanking"] is None
        assert (cells["tokenCounts.used"], cells["tokenCounts.budget"]) == (620, 3200)
        assert (cells["memoryCount"], cells["truncatedCount"]) == (3, 1)
        assert cells["policyVersions.floor"] == 2 and cells["policyVersions.override"] is True
        assert cells["version"] is None and cells["changed"] is None

    def test_changed_names_axes_in_the_algebras_order_then_other_keys(self):
        cells = self.cells({"diff": {"relaxableAxes": {}, "totalTokenBudget": {}, "pinned": {}}})
        assert cells["changed"] == "totalTokenBudget pinned relaxableAxes"
        assert self.cells({"changed": ["a.b", "c"]})["changed"] == "a.b c"
        edit = self.cells({"action": "updated", "ids": ["7"], "fields": ["content"]})
        assert (edit["action"], edit["changed"], edit["memoryCount"]) == ("updated", "content", 1)

    def test_a_maintenance_run_and_a_strange_payload(self):
        cells = self.cells({"runId": 3, "counts": {"listed": 4, "applied": 2, "skipped": 1}})
        assert (cells["runId"], cells["counts.listed"], cells["counts.applied"]) == (3, 4, 2)
        assert cells["counts.candidates"] is None and cells["memoryCount"] is None
        assert payload_cells(["not", "a", "dict"]) == [None] * len(PAYLOAD_COLUMNS)
        assert self.cells({"counts": 5})["counts.listed"] is None


def test_the_reference_lists_every_csv_payload_column():
    from pathlib import Path

    reference = Path(__file__).resolve().parents[2] / "docs" / "reference"
    text = (reference / "context-recall-policy-and-budget.md").read_text(encoding="utf-8")
    exports = text[text.index("**Exports.**") : text.index("## 10. Errors")]
    assert [c for c in PAYLOAD_COLUMNS if f"`{c}`" not in exports] == []
