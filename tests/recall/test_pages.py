"""The recall pages: the sandbox and the memory browser, per persona."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent, EventType
from policies.algebra import default_floor
from policies.services import workload_policy_save, workspace_policy_save
from recall.models import MemoryRecord
from recall.services import actor_get_or_create, memory_create_many
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module (a workload is made per test:
# some tests need a workspace without one).
workspace_a, editor, viewer, made_first = module_scoped("workspace_a", "editor", "viewer")

HTMX = {"HTTP_HX_REQUEST": "true"}
PASSING: dict[str, Any] = {
    "memory_type": "fact",
    "source_kind": "user",
    "confirmation_status": "user_confirmed",
    "confidence": 0.9,
    "sensitivity": "internal",
    "consent_policy": "explicit",
    "segment_kind": "memory",
}
RELAXABLE = ["memoryTypeAllowed", "totalTokenBudget", "diagnosticsVerbosity"]


def seed(workspace, *items: dict[str, Any], actor_id: str = "user:ada") -> list[MemoryRecord]:
    actor = actor_get_or_create(workspace=workspace, actor_id=actor_id)
    return memory_create_many(
        workspace=workspace, actor=actor, items=[{**PASSING, **item} for item in items]
    )


def set_floor(workspace, **axes: Any) -> None:
    document = {**default_floor(), "relaxableAxes": RELAXABLE, **axes}
    workspace_policy_save(
        workspace=workspace, document=document, author="system:test", comment="Test floor"
    )


def client_for(persona, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(persona.user)
    return client


def assembled_count(workspace) -> int:
    return AuditEvent.objects.filter(workspace=workspace, type=EventType.ASSEMBLED).count()


@pytest.fixture
def ada(workspace_a):
    set_floor(workspace_a, diagnosticsVerbosity="full")
    return seed(
        workspace_a,
        {"content": "Ada prefers concise release summaries", "memory_type": "preference"},
        {"content": "Ada decided release notes go out on Fridays", "memory_type": "decision"},
        {"content": "Ada salary band and release bonus", "sensitivity": "restricted"},
        {"content": "Ada old release summary preference", "lifecycle_status": "suppressed"},
        {"content": "release pipeline tool output summary", "segment_kind": "tool_result"},
        {"content": "Ada attended the release retro", "memory_type": "episode"},
    )


def section(html: str, dom_id: str, *, tag: str = "section") -> str:
    """The element with ``dom_id``, up to its closing tag (sections here do not nest)."""
    start = html.index(f'id="{dom_id}"')
    return html[start : html.index(f"</{tag}>", start)]


def recall_form(workload, **extra: Any) -> dict[str, Any]:
    return {
        "actor": "user:ada",
        "workload": str(workload.pk),
        "environment": "prod",
        "query": "release summary preferences",
        "top_k": 5,
        **extra,
    }


class SandboxPageTests:
    def test_every_member_can_open_it_and_a_viewer_sees_it_disabled(
        self, operator, editor, viewer, workload_a
    ):
        for persona in (operator, editor):
            response = client_for(persona).get("/w/team-a/sandbox/")
            assert response.status_code == 200
            assert b"Run recall" in response.content
        response = client_for(viewer).get("/w/team-a/sandbox/")
        assert response.status_code == 200
        html = response.content.decode()
        assert "Run recall" not in html
        assert "needs the <strong>editor</strong> role" in html
        assert re.search(r'<fieldset class="plain" disabled>', html)

    def test_a_workspace_without_workloads_says_what_is_missing(self, editor):
        response = client_for(editor).post("/w/team-a/sandbox/", {"actor": "user:ada"})
        assert response.status_code == 200
        assert "has no workloads yet" in response.content.decode()
        assert assembled_count(editor.workspace) == 0

    def test_an_outsider_gets_404_and_an_anonymous_visitor_is_sent_to_log_in(
        self, outsider, editor, workload_a
    ):
        client = client_for(outsider)
        assert client.get("/w/team-a/sandbox/").status_code == 404
        assert client.post("/w/team-a/sandbox/", recall_form(workload_a)).status_code == 404
        assert client.get("/w/team-a/sandbox/actors?q=a").status_code == 404
        response = Client().get("/w/team-a/sandbox/")
        assert response.status_code == 302 and "/login/" in response["Location"]

    def test_a_viewer_cannot_run_a_recall(self, viewer, workload_a, ada):
        response = client_for(viewer).post("/w/team-a/sandbox/", recall_form(workload_a))
        assert response.status_code == 403
        assert assembled_count(viewer.workspace) == 0
        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()

    def test_running_needs_a_csrf_token(self, editor, workload_a, ada):
        client = client_for(editor, csrf=True)
        assert client.post("/w/team-a/sandbox/", recall_form(workload_a)).status_code == 403
        assert assembled_count(editor.workspace) == 0
        client.get("/w/team-a/sandbox/")
        token = client.cookies["csrftoken"].value
        response = client.post(
            "/w/team-a/sandbox/", recall_form(workload_a), HTTP_X_CSRFTOKEN=token
        )
        assert response.status_code == 200
        assert assembled_count(editor.workspace) == 1

    def test_a_run_shows_the_funnel_the_budget_bar_every_decision_and_its_audit_event(
        self, editor, workload_a, ada
    ):
        response = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a))
        assert response.status_code == 200
        html = response.content.decode()
        event = AuditEvent.objects.get(workspace=editor.workspace, type=EventType.ASSEMBLED)
        assert event.author == "user:eddie"
        assert f"/w/team-a/audit/{event.pk}/" in html
        assert event.payload["envelopeId"] in html
        # the funnel: 6 candidates, 1 fails closed, 1 fails sensitivity, 4 pass
        counts = event.payload["counts"]
        assert counts == {
            "candidates": 6,
            "afterPolicy": 4,
            "afterRanking": 4,
            "afterBudgetAllocation": counts["afterBudgetAllocation"],
        }
        assert re.search(r'<span class="n">6</span><span class="label">Candidates', html)
        assert '<svg class="budget-bar"' in html
        assert f"used {event.payload['tokenCounts']['used']:,} of 3,200 tokens" in html
        assert '<h4 id="decisions-included-h">Included in the context' in html
        group = section(html, "decisions-sensitivity_above_ceiling")
        assert "Filtered by policy: Sensitivity ceiling" in group
        assert f'id="decision-{ada[2].pk}"' in group
        assert "sensitivity restricted &gt; confidential" in group
        # one memory failed the fail-closed rules: counted, never listed
        assert "1 excluded by the fail-closed rules" in html
        assert f'id="decision-{ada[3].pk}"' not in html
        # content is shown for included entries, never for a memory that failed policy
        assert "Ada prefers concise release summaries" in html
        assert "Ada salary band" not in html
        assert event.payload["digest"] in html

    def test_budget_pressure_decisions_are_shown_in_words_with_the_allocation(
        self, editor, workspace_a, workload_a
    ):
        set_floor(
            workspace_a,
            diagnosticsVerbosity="full",
            totalTokenBudget=200,
            perSegmentReservation={"memory": 100, "tool_result": 50},
            perSegmentCeiling={},
        )
        text = "release summary " * 10  # 160 characters: 40 tokens each
        seed(
            workspace_a,
            *({"content": f"{text}{i}"} for i in range(6)),
            *({"content": f"{text}tool {i}", "segment_kind": "tool_result"} for i in range(3)),
        )
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a, top_k=10))
        html = html.content.decode()
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["tokenCounts"]["used"] <= 200
        budget = section(html, "decisions-budget")
        assert "its kind is held at its reserved floor" in budget  # tool_result, at 50
        assert "its kind is cut first under budget pressure (drop order)" in budget  # memory
        assert re.search(r'<td class="num">0\.\d{3}</td>', budget)  # scores where they exist
        truncated = section(html, "decisions-truncated")
        assert "A memory sent as its id and metadata only" in truncated
        assert "under pressure (demand above the budget)" in html
        assert "reserved 50" in html and "ceiling" in html

    def test_an_htmx_run_returns_its_result_and_clears_the_error_slots_not_the_form(
        self, editor, workload_a, ada
    ):
        # What is typed into the form while a recall runs stays: the form is not redrawn.
        response = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a), **HTMX)
        html = response.content.decode()
        assert response.status_code == 200
        assert html.lstrip().startswith('<section class="card result" id="sandbox-result"')
        assert "<html" not in html and "budget-bar" in html
        assert 'name="query"' not in html and 'id="sandbox-form"' not in html
        assert (
            '<p class="field-error" id="query-err" data-field="id_query" hx-swap-oob="true">'
            "</p>" in html
        )
        assert (
            '<div class="form-errors" id="sandbox-errors" role="alert" hx-swap-oob="true">'
            "</div>" in html
        )

    def test_an_htmx_run_with_an_error_fills_its_slot_and_clears_the_result(
        self, editor, workload_a, ada
    ):
        form = recall_form(workload_a, actor="ada")
        html = client_for(editor).post("/w/team-a/sandbox/", form, **HTMX).content.decode()
        assert "sandbox-result" not in html
        slot = section(html, "actor-err", tag="p")
        assert 'hx-swap-oob="true">' in slot and "kind:name" in slot
        assert assembled_count(editor.workspace) == 0

    def test_the_form_swaps_in_only_the_result_and_turns_run_off_while_it_runs(
        self, editor, workload_a, ada
    ):
        html = client_for(editor).get("/w/team-a/sandbox/").content.decode()
        form = html[html.index('id="sandbox-form"') :]
        form = form[: form.index(">")]
        assert 'hx-target="#sandbox-outcome"' in form and 'hx-swap="innerHTML"' in form
        assert 'hx-disabled-elt="find button[type=submit]"' in form
        assert '<div id="sandbox-outcome"></div>' in html

    def test_summary_verbosity_shows_the_reasons_and_says_how_to_get_decisions(
        self, editor, workspace_a, workload_a
    ):
        set_floor(workspace_a, diagnosticsVerbosity="summary")
        seed(workspace_a, {"content": "Ada prefers concise release summaries"})
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        html = html.decode()
        assert "Per-memory decisions are not in this response" in html
        assert "an operator raises it to <code>full</code> in the" in html
        assert "Included in the context" in html  # the reasons summary
        assert "Ada prefers concise release summaries" in html  # the entries table
        # One click shows them: the same request, sent again at full verbosity.
        rerun = html[html.index('class="actions rerun"') :]
        rerun = rerun[: rerun.index("</form>")]
        assert '<input type="hidden" name="verbosity" value="full">' in rerun
        assert '<input type="hidden" name="query" value="release summary preferences">' in rerun
        assert "Show every decision" in rerun

    def test_show_every_decision_runs_the_same_recall_at_full_verbosity(
        self, editor, workspace_a, workload_a
    ):
        set_floor(workspace_a, diagnosticsVerbosity="summary")
        seed(workspace_a, {"content": "Ada prefers concise release summaries"})
        form = recall_form(workload_a, verbosity="full")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        assert 'id="decisions-included"' in html  # the decisions, grouped by outcome
        note = section(html, "every-decision-note", tag="p")
        assert "this workload's agents get <strong>summary</strong>" in note
        assert "Per-memory decisions are not in this response" not in html
        # Recorded like any sandbox run; the policy itself is unchanged.
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["origin"] == "sandbox"
        assert "policyOverride" not in event.payload

    def test_only_relaxable_axes_have_inputs_and_one_line_names_the_rest(
        self, editor, workload_a, ada
    ):
        html = client_for(editor).get("/w/team-a/sandbox/").content.decode()
        assert html.count('<fieldset class="axis') == len(RELAXABLE)
        assert "3 of 15 axes relaxable in this workspace" in html
        assert re.search(r'<input type="checkbox" name="override_memoryTypeAllowed" id=', html)
        assert "axis_sensitivityCeiling" not in html and "axis-sensitivityCeiling" not in html
        block = section(html, "axis-memoryTypeAllowed", tag="fieldset")
        assert "<legend>Memory types allowed</legend>" in block
        assert '<code class="api-name">memoryTypeAllowed</code> · Memory types' in block
        note = section(html, "locked-axes", tag="p")
        assert "Not relaxable in this workspace's floor" in note
        assert "Sensitivity ceiling, Maximum age, " in note and "sensitivityCeiling" not in note
        assert "Memory types allowed" not in note

    def test_a_locked_axis_posted_anyway_is_ignored(self, editor, workload_a, ada):
        form = recall_form(
            workload_a, override_sensitivityCeiling="on", axis_sensitivityCeiling="restricted"
        )
        response = client_for(editor).post("/w/team-a/sandbox/", form)
        assert response.status_code == 200
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["counts"]["afterPolicy"] == 4  # the restricted row stays out

    def test_an_override_past_the_floor_is_shown_next_to_the_field_and_nothing_runs(
        self, editor, workload_a, ada
    ):
        form = recall_form(
            workload_a, override_totalTokenBudget="on", axis_totalTokenBudget="99999"
        )
        response = client_for(editor).post("/w/team-a/sandbox/", form)
        assert response.status_code == 200
        html = response.content.decode()
        block = html[html.index('id="axis-totalTokenBudget"') :]
        block = block[: block.index("</fieldset>")]
        assert "goes past the operator floor" in block
        assert "has-error" in html[html.index('id="axis-totalTokenBudget"') - 80 :][:120]
        assert assembled_count(editor.workspace) == 0

    def test_an_override_the_budget_cannot_honour_is_explained_at_the_top_and_the_axis(
        self, editor, workload_a, ada
    ):
        form = recall_form(workload_a, override_totalTokenBudget="on", axis_totalTokenBudget="1000")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        errors = html[html.index('class="form-errors"') :]
        errors = errors[: errors.index("</div>")]
        assert errors.count("The token budget cannot be honoured") == 1
        assert "The draft override cannot be applied: The token budget cannot be honoured" in errors
        # the reservations are locked (no fields): what they say is told at the top, in words
        assert "Tokens reserved per segment kind (not relaxable):" in errors
        assert "more than the totalTokenBudget of 1000" in errors
        assert assembled_count(editor.workspace) == 0

    def test_a_malformed_override_value_is_an_error_next_to_the_field(
        self, editor, workload_a, ada
    ):
        form = recall_form(workload_a, override_totalTokenBudget="on", axis_totalTokenBudget="")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        block = html[html.index('id="axis-totalTokenBudget"') :]
        assert "Enter a value to override this axis." in block[: block.index("</fieldset>")]
        assert assembled_count(editor.workspace) == 0

    @pytest.mark.parametrize(
        ("axis", "raw", "message"),
        [
            # The sandbox words its axis errors as the floor and workload forms do (one axis
            # input system, policies/axis_fields.py).
            ("totalTokenBudget", "lots", "Enter a whole number."),
            ("confidenceMin", "abc", "Enter a number between 0 and 1."),
            ("maxAgeSeconds", "1.5", "Enter a whole number of seconds."),
            ("maxAgeSeconds", "0", "Enter a duration above zero, or leave it empty for no limit."),
        ],
    )
    def test_a_malformed_override_is_worded_as_on_the_policy_forms(
        self, editor, workload_a, ada, axis, raw, message
    ):
        relaxable = ["totalTokenBudget", "confidenceMin", "maxAgeSeconds"]
        set_floor(editor.workspace, diagnosticsVerbosity="full", relaxableAxes=relaxable)
        form = recall_form(workload_a, **{f"override_{axis}": "on", f"axis_{axis}": raw})
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        block = html[html.index(f'id="axis-{axis}"') :]
        assert message in block[: block.index("</fieldset>")]
        assert assembled_count(editor.workspace) == 0

    def test_an_axis_left_unticked_is_not_read(self, editor, workload_a, ada):
        form = recall_form(workload_a, axis_totalTokenBudget="lots")  # typed, then not ticked
        response = client_for(editor).post("/w/team-a/sandbox/", form)
        assert response.status_code == 200
        assert assembled_count(editor.workspace) == 1

    @pytest.mark.parametrize("verbosity", ["none", "summary"])
    def test_an_unknown_actor_runs_and_its_empty_result_says_why(
        self, editor, workload_a, ada, verbosity
    ):
        set_floor(editor.workspace, diagnosticsVerbosity=verbosity)
        form = recall_form(workload_a, actor="user:nobody")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        warnings = html[html.index('<ul class="warnings"') :]
        warnings = warnings[: warnings.index("</ul>")]
        assert "No actor of this id in the workspace yet: nothing to recall." in warnings
        assert '<code class="api-name">actor_unknown</code>' in warnings
        assert '<p class="field-error" id="actor-err" data-field="id_actor"></p>' in html
        assert assembled_count(editor.workspace) == 1

    def test_a_malformed_actor_is_an_error_next_to_the_actor_field(self, editor, workload_a, ada):
        form = recall_form(workload_a, actor="ada")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        assert 'id="actor-err" data-field="id_actor">Use kind:name' in html
        form = recall_form(workload_a, actor="user:\u0430da")
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        assert 'id="actor-err" data-field="id_actor">The name mixes scripts' in html
        assert assembled_count(editor.workspace) == 0

    def test_an_allowed_override_changes_the_run(self, editor, workload_a, ada):
        form = recall_form(
            workload_a,
            override_memoryTypeAllowed="on",
            axis_memoryTypeAllowed=["preference", "decision"],
        )
        html = client_for(editor).post("/w/team-a/sandbox/", form).content.decode()
        assert (
            'Memory types allowed <code class="api-name">memoryTypeAllowed</code>'
            " = preference, decision" in html
        )
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["counts"]["afterPolicy"] == 2
        group = section(html, "decisions-memory_type_not_allowed")
        assert "memory type episode; allowed: preference, decision" in group

    def test_compare_lists_what_enters_and_leaves_and_writes_one_audit_event(
        self, editor, workload_a, ada
    ):
        form = recall_form(
            workload_a,
            compare="on",
            override_memoryTypeAllowed="on",
            axis_memoryTypeAllowed=["preference", "decision"],
        )
        response = client_for(editor).post("/w/team-a/sandbox/", form)
        html = response.content.decode()
        assert response.status_code == 200
        assert assembled_count(editor.workspace) == 1
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["counts"]["afterPolicy"] == 4  # the saved policy ran for real
        fact, episode = ada[4], ada[5]  # the tool_result fact and the episode leave
        found = re.findall(r'<tr class="change-(\w+)( differs)?" id="compare-(\d+)">', html)
        changes = {pk: (change, bool(differs)) for change, differs, pk in found}
        assert changes[str(episode.pk)] == ("leaves", True)
        assert changes[str(fact.pk)] == ("leaves", True)
        assert changes[str(ada[0].pk)] == ("stays", False)
        heading = " ".join(section(html, "compare-decisions-h", tag="h3").split())
        assert "3 decided differently: 0 enter, 2 leave" in heading, heading
        assert 'id="budget-draft"' in html and 'id="budget-saved"' in html
        assert "computed read-only" in html
        # Both sides' decisions, with the draft's reason and the value that failed.
        row = section(html, f"compare-{episode.pk}", tag="tr")
        saved, draft = row.split('<td class="side draft changed">')
        assert "Included in the context" in saved
        assert "Filtered: memory type not allowed" in draft
        assert "memory type episode; allowed: preference, decision" in draft
        # The restricted fact is out on both sides, for another reason under the draft.
        restricted = section(html, f"compare-{ada[2].pk}", tag="tr")
        assert changes[str(ada[2].pk)] == ("out", True) and "other reason" in restricted
        saved, draft = restricted.split('<td class="side draft changed">')
        assert "Filtered: more sensitive than the ceiling" in saved
        assert "Filtered: memory type not allowed" in draft
        assert "Ada salary band" not in html  # a filtered memory's content never shows
        # The two memories decided alike are folded below the differences.
        alike = html[html.index('class="group-rest compare-alike"') :]
        assert "2 memories decided alike on both sides" in alike
        assert f'id="compare-{ada[0].pk}"' in alike and f'id="compare-{ada[1].pk}"' in alike
        # Compare mode shows every decision itself: no note about the verbosity.
        assert "Per-memory decisions are not in this response" not in html

    def test_the_workload_policy_is_used_and_named(self, editor, workspace_a, workload_a, ada):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"memoryTypeAllowed": ["preference"]},
            author="system:test",
        )
        html = client_for(editor).get(f"/w/team-a/sandbox/?workload={workload_a.pk}")
        assert "narrowed by workload policy v1" in html.content.decode()
        client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a))
        event = AuditEvent.objects.get(type=EventType.ASSEMBLED)
        assert event.payload["counts"]["afterPolicy"] == 1

    def test_the_actor_suggestions_come_from_this_workspace_only(
        self, editor, workspace_a, workspace_b
    ):
        seed(workspace_a, {"content": "x"}, actor_id="user:ada")
        seed(workspace_a, {"content": "x"}, actor_id="agent:planner")
        seed(workspace_b, {"content": "x"}, actor_id="user:adam")
        response = client_for(editor).get("/w/team-a/sandbox/actors?q=ad", **HTMX)
        assert response.status_code == 200
        assert response.content.decode().strip() == '<option value="user:ada"></option>'
        html = client_for(editor).get("/w/team-a/sandbox/actors?actor=agent").content.decode()
        assert "agent:planner" in html
        # A control character never reaches the database (portal.input_guard).
        nul = client_for(editor).get("/w/team-a/sandbox/actors?q=a%00d", **HTMX)
        assert nul.status_code == 400 and "q parameter holds a control" in nul.content.decode()
        page = client_for(editor).get("/w/team-a/memories/?actor=user:a%00d")
        assert page.status_code == 400 and "actor parameter" in page.content.decode()


class SandboxQueryTests:
    @pytest.mark.parametrize("query", ["", "   \n  "])
    def test_an_empty_query_is_refused_next_to_the_field_and_nothing_runs(
        self, editor, workload_a, ada, query
    ):
        response = client_for(editor).post(
            "/w/team-a/sandbox/", recall_form(workload_a, query=query)
        )
        html = response.content.decode()
        assert response.status_code == 200
        assert 'id="query-err" data-field="id_query">Enter a query: recall ranks' in html
        assert 'id="sandbox-result"' not in html
        assert assembled_count(editor.workspace) == 0
        assert not MemoryRecord.objects.filter(hit_count__gt=0).exists()


class SandboxRedrawTests:
    """Another workload or environment redraws the policy parts only (htmx ``hx-select``)."""

    def test_the_page_asks_htmx_to_swap_only_the_policy_parts(self, editor, workload_a, ada):
        html = client_for(editor).get("/w/team-a/sandbox/").content.decode()
        trigger = re.search(r'<div class="row-group"[^>]*>', html)
        assert trigger
        assert 'hx-select="#saved-policy" hx-target="#saved-policy"' in trigger.group(0)
        assert 'hx-select-oob="#override-axes"' in trigger.group(0)
        # the typed fields are outside what is swapped, so they are never redrawn
        assert 'hx-include="#id_workload, #id_environment, #override-axes"' in trigger.group(0)
        policy_parts = section(html, "saved-policy", tag="div") + section(
            html, "override-axes", tag="details"
        )
        assert 'name="query"' not in policy_parts and 'name="actor"' not in policy_parts

    def test_a_ticked_axis_keeps_its_value_and_the_others_take_the_new_policys(
        self, editor, workspace_a, workload_a, ada
    ):
        workload_policy_save(
            workload=workload_a,
            environment="dev",
            document={"memoryTypeAllowed": ["preference", "decision"], "totalTokenBudget": 3000},
            author="system:test",
        )
        params = {
            "workload": str(workload_a.pk),
            "environment": "dev",
            "override_diagnosticsVerbosity": "on",
            "axis_diagnosticsVerbosity": "summary",
            "axis_memoryTypeAllowed": ["fact"],  # not ticked: redrawn from the dev policy
        }
        response = client_for(editor).get("/w/team-a/sandbox/", params, **HTMX)
        html = response.content.decode()
        assert "Saved policy for <strong>support-bot</strong> in <strong>dev</strong>" in html
        assert "narrowed by workload policy v1" in html
        verbosity = section(html, "axis-diagnosticsVerbosity", tag="fieldset")
        assert re.search(r'name="override_diagnosticsVerbosity" id="[^"]+" checked', verbosity)
        assert '<option value="summary" selected>' in verbosity
        types = section(html, "axis-memoryTypeAllowed", tag="fieldset")
        checked = re.findall(r'value="(\w+)"[^>]*checked', types)
        assert checked == ["preference", "decision"]
        assert "Saved: 3,000" in section(html, "axis-totalTokenBudget", tag="fieldset")


@pytest.fixture
def crowd(workspace_a):
    """Ada with a few good memories and many that fail one axis each."""
    set_floor(
        workspace_a,
        diagnosticsVerbosity="full",
        confidenceMin=0.5,
        maxAgeSeconds=30 * 86_400,
        consentPolicyAllowed=["explicit", "contractual"],
    )
    old = timezone.now() - timedelta(days=45)
    return seed(
        workspace_a,
        {"content": "Ada prefers concise release summaries", "memory_type": "preference"},
        {"content": "Ada decided release notes go out on Fridays", "memory_type": "decision"},
        *(
            {
                "content": f"Ada maybe likes release note {i}",
                "confidence": 0.38,
                "confirmation_status": "inferred",
            }
            for i in range(12)
        ),
        {"content": "Ada salary band and release bonus", "sensitivity": "restricted"},
        {"content": "Ada's release retro, long ago", "created_at": old},
        {"content": "Ada's release habit, unknown consent", "consent_policy": "unknown"},
        {"content": "Ada's old release preference", "lifecycle_status": "suppressed"},
    )


class SandboxDecisionGroupTests:
    def test_decisions_are_grouped_by_outcome_and_long_groups_collapse(
        self, editor, workload_a, crowd
    ):
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        html = html.decode()
        included = section(html, "decisions-included")
        assert '<span class="group-count">2</span>' in included and "<details" not in included
        assert "Ada prefers concise release summaries" in included
        assert re.search(r'<td class="num">0\.\d{3}</td>', included)  # similarity and score
        low = section(html, "decisions-confidence_below_min")
        assert "Filtered by policy: Minimum confidence" in low
        assert '<code class="api-name">confidenceMin</code>' in low
        assert '<span class="group-count">12</span>' in low
        assert low.count("inferred, confidence 0.38 &lt; 0.5") == 12
        shown, rest = low.split('<details class="group-rest">')
        assert shown.count('<tr id="decision-') == 5 and rest.count('<tr id="decision-') == 7
        assert "Show the other 7" in rest
        assert "maybe likes" not in low  # content never leaves the database
        assert "sensitivity restricted &gt; confidential" in section(
            html, "decisions-sensitivity_above_ceiling"
        )
        assert "age 45 days &gt; 30 days" in section(html, "decisions-older_than_max_age")
        assert "consent unknown; allowed: explicit, contractual" in section(
            html, "decisions-consent_not_allowed"
        )
        counted = section(html, "decisions-counted", tag="p")
        assert "1 excluded by the fail-closed rules" in counted
        # one word per outcome: no row repeats its label next to its code
        assert "Included in the context</span> <code" not in html
        assert html.count("Filtered: memory type not allowed") == 0

    def test_the_run_reads_the_filtered_rows_in_one_bounded_query(
        self, editor, workspace_a, workload_a, crowd, django_assert_num_queries
    ):
        client = client_for(editor)
        client.post("/w/team-a/sandbox/", recall_form(workload_a))  # warm the session
        with django_assert_num_queries(NUM_RUN_QUERIES):
            client.post("/w/team-a/sandbox/", recall_form(workload_a))
        weak = {"confidence": 0.1, "confirmation_status": "observed"}
        seed(workspace_a, *({"content": f"weak {i}", **weak} for i in range(40)))
        with django_assert_num_queries(NUM_RUN_QUERIES):
            html = client.post("/w/team-a/sandbox/", recall_form(workload_a)).content.decode()
        assert '<span class="group-count">52</span>' in section(
            html, "decisions-confidence_below_min"
        )

    def test_memories_below_the_similarity_floor_are_grouped_with_their_similarity(
        self, editor, workspace_a, workload_a
    ):
        set_floor(workspace_a, diagnosticsVerbosity="full", similarityMin=0.3)
        seed(
            workspace_a,
            {"content": "Ada prefers concise release summaries"},
            *({"content": f"Northwind invoices go out on Tuesdays, run {n}"} for n in range(3)),
        )
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        html = html.decode()
        below = section(html, "decisions-similarity_below_min")
        assert "Filtered by policy: Minimum similarity to the query" in below
        assert '<code class="api-name">similarityMin</code>' in below
        assert '<span class="group-count">3</span>' in below
        assert len(re.findall(r"similarity -?0\.\d\d &lt; 0\.3", below)) == 3
        assert "Tuesdays" not in html  # content never leaves the database

        set_floor(workspace_a, diagnosticsVerbosity="summary", similarityMin=0.3)
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        words = "Filtered: less similar to the query than the minimum similarity"
        assert f'{words} <code class="api-name">similarity_below_min</code>' in html.decode()

    def test_summary_verbosity_shows_reasons_instead_of_groups(
        self, editor, workspace_a, workload_a, crowd
    ):
        set_floor(workspace_a, diagnosticsVerbosity="summary", confidenceMin=0.5)
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        html = html.decode()
        assert "decisions-confidence_below_min" not in html
        words = "Filtered: inferred or observed, confidence below the minimum"
        assert f'{words} <code class="api-name">' in html


# One run of the sandbox page at full diagnostics, pinned: the page, the recall and its append
# (its policy context remembered from the warm-up run and checked by the recall's read), then
# one policy re-read and one read of the filtered rows' fields, however many there are; and the
# signed-in user's row-level security scope.
NUM_RUN_QUERIES = 13  # the event comes back with the recall: no look-up by envelope id;
# the actor is not looked up first (an unknown one runs too)


@pytest.fixture
def browse(workspace_a, workload_a):
    set_floor(workspace_a)
    return seed(
        workspace_a,
        {"content": "Ada prefers tea", "memory_type": "preference"},
        {"content": "Ada's medical note", "sensitivity": "restricted"},
        {"content": "Ada used to like coffee", "lifecycle_status": "suppressed"},
        {"content": "Ada withdrew this", "consent_policy": "withdrawn"},
    )


def row_of(html: str, memory: MemoryRecord) -> str:
    start = html.index(f'<tr id="memory-{memory.pk}"')
    return html[start : html.index("</tr>", start)]


class MemoryBrowserTests:
    def test_every_member_can_browse_and_only_editors_get_edit_controls(
        self, operator, editor, viewer, browse
    ):
        for persona in (operator, editor):
            html = client_for(persona).get("/w/team-a/memories/?actor=user:ada").content.decode()
            assert "Suppress memory" in html and "Import memories" in html
        response = client_for(viewer).get("/w/team-a/memories/?actor=user:ada")
        assert response.status_code == 200
        html = response.content.decode()
        assert "Ada prefers tea" in html
        assert "Suppress memory" not in html and "Edit memory" not in html
        assert "import-panel" not in html

    def test_each_filter_s_blank_choice_reads_any(self, viewer, browse):
        html = client_for(viewer).get("/w/team-a/memories/").content.decode()
        for name in ("type", "source", "status", "sensitivity", "segment"):
            select = html[html.index(f'name="{name}"') :]
            select = select[: select.index("</select>")]
            assert '<option value="" selected>Any</option>' in select, name
        assert "---------" not in html

    def test_an_outsider_gets_404_everywhere(self, outsider, browse):
        client = client_for(outsider)
        memory = browse[0]
        assert client.get("/w/team-a/memories/?actor=user:ada").status_code == 404
        assert client.get("/w/team-a/memories/import/").status_code == 404
        assert client.get(f"/w/team-a/memories/{memory.pk}/edit/").status_code == 404
        assert client.get(f"/w/team-a/memories/{memory.pk}/row/").status_code == 404
        response = client.post(f"/w/team-a/memories/{memory.pk}/status/", {"action": "suppress"})
        assert response.status_code == 404
        # their own workspace does not reach team-a's memory either
        response = client.post(f"/w/team-b/memories/{memory.pk}/status/", {"action": "suppress"})
        assert response.status_code == 404
        memory.refresh_from_db()
        assert memory.lifecycle_status == "active"

    def test_without_an_actor_it_lists_every_actor_s_memories_each_naming_its_actor(
        self, viewer, workspace_a, browse
    ):
        (bob,) = seed(workspace_a, {"content": "Bob prefers tea too"}, actor_id="user:bob")
        html = client_for(viewer).get("/w/team-a/memories/").content.decode()
        assert "All actors" in html and "5 memories" in html
        assert "?actor=user%3Aada" in row_of(html, browse[0])
        assert "?actor=user%3Abob" in row_of(html, bob)

    def test_a_search_finds_content_across_actors_and_the_actor_narrows_it(
        self, viewer, workspace_a, workspace_b, browse
    ):
        (bob,) = seed(workspace_a, {"content": "Bob prefers TEA too"}, actor_id="user:bob")
        seed(workspace_b, {"content": "Team B's tea"}, actor_id="user:ada")
        client = client_for(viewer)
        html = client.get("/w/team-a/memories/?q=tea").content.decode()
        assert html.count('<tr id="memory-') == 2  # never another workspace's
        assert "Ada prefers tea" in html and "Bob prefers TEA too" in html
        html = client.get("/w/team-a/memories/?q=tea&actor=user:bob").content.decode()
        assert html.count('<tr id="memory-') == 1 and "Bob prefers TEA too" in html

    def test_an_unknown_actor_is_an_error_next_to_the_actor_field(self, viewer, browse):
        html = client_for(viewer).get("/w/team-a/memories/?actor=user:zed").content.decode()
        assert 'id="browse-actor-err">No actor user:zed in this workspace.' in html

    def test_the_recallable_column_explains_each_row(self, viewer, workload_a, browse):
        tea, medical, coffee, withdrawn = browse
        html = client_for(viewer).get("/w/team-a/memories/?actor=user:ada").content.decode()
        assert f"judged for <strong>{workload_a.name}</strong> in <strong>prod</strong>" in html
        assert "Passes the fail-closed rules and every policy axis" in row_of(html, tea)
        assert "more sensitive than the ceiling (restricted)" in row_of(html, medical)
        assert "lifecycle status is not active (suppressed)" in row_of(html, coffee)
        assert "Fail closed: consent withdrawn" in row_of(html, withdrawn)

    def test_the_recallable_column_holds_only_inferred_and_observed_to_the_confidence_minimum(
        self, viewer, workspace_a, workload_a
    ):
        set_floor(workspace_a, confidenceMin=0.5)
        confirmed, inferred = seed(
            workspace_a,
            {"content": "Ada confirmed this", "confirmation_status": "operator_confirmed",
             "confidence": 0.3},
            {"content": "Ada might like this", "confirmation_status": "inferred",
             "confidence": 0.3},
        )  # fmt: skip
        html = client_for(viewer).get("/w/team-a/memories/?actor=user:ada").content.decode()
        assert "Passes the fail-closed rules and every policy axis" in row_of(html, confirmed)
        assert (
            "Filtered: inferred or observed, confidence below the minimum"
            " (inferred, confidence 0.3)"
        ) in row_of(html, inferred)

    def test_the_recallable_column_says_the_similarity_floor_depends_on_each_query(
        self, viewer, workspace_a, workload_a, browse
    ):
        set_floor(workspace_a, similarityMin=0.35)
        html = client_for(viewer).get("/w/team-a/memories/?actor=user:ada").content.decode()
        assert (
            "Passes the fail-closed rules and every other policy axis; depends on each query:"
            " similarity floor 0.35"
        ) in row_of(html, browse[0])
        assert "similarity" not in row_of(html, browse[1])  # it fails before the floor

    def test_the_recallable_column_follows_the_chosen_workload_policy(
        self, viewer, workload_a, browse
    ):
        workload_policy_save(
            workload=workload_a,
            environment="dev",
            document={"memoryTypeAllowed": ["preference"]},
            author="system:test",
        )
        url = f"/w/team-a/memories/?actor=user:ada&workload={workload_a.pk}&environment=dev"
        html = client_for(viewer).get(url).content.decode()
        assert "memory type not allowed (fact)" in row_of(html, browse[1])
        assert "Passes the fail-closed rules" in row_of(html, browse[0])

    def test_filters_narrow_the_list_and_bad_ones_are_shown_next_to_the_field(self, viewer, browse):
        client = client_for(viewer)
        html = client.get("/w/team-a/memories/?actor=user:ada&type=preference").content.decode()
        assert "Ada prefers tea" in html and "medical" not in html
        html = client.get("/w/team-a/memories/?actor=user:ada&status=bogus").content.decode()
        assert "&quot;bogus&quot; is not one of: active, inactive, stale," in html

    def test_an_htmx_request_returns_only_the_browser_fragment(self, viewer, browse):
        response = client_for(viewer).get("/w/team-a/memories/?actor=user:ada", **HTMX)
        html = response.content.decode()
        assert html.lstrip().startswith('<div id="memory-browser"') and "<html" not in html

    def test_the_list_is_paginated(self, viewer, workspace_a, browse):
        seed(workspace_a, *({"content": f"note {i}"} for i in range(30)))
        client = client_for(viewer)
        html = client.get("/w/team-a/memories/?actor=user:ada").content.decode()
        assert "Page 1 of 2" in html and html.count('<tr id="memory-') == 25
        assert "?actor=user%3Aada&amp;page=2" in html
        html = client.get("/w/team-a/memories/?actor=user:ada&page=2").content.decode()
        assert html.count('<tr id="memory-') == 9

    def test_the_list_query_count_does_not_grow_with_the_rows(
        self, editor, workspace_a, browse, django_assert_num_queries
    ):
        client = client_for(editor)
        url = "/w/team-a/memories/?actor=user:ada"
        client.get(url)  # warm the session and caches
        # 12 with the row-level security scope of the signed-in user's requests
        with django_assert_num_queries(12):
            assert client.get(url).status_code == 200
        seed(workspace_a, *({"content": f"note {i}", "memory_type": "episode"} for i in range(20)))
        with django_assert_num_queries(12):
            assert client.get(url).status_code == 200

    def test_the_search_across_actors_takes_as_many_queries_however_many_rows(
        self, editor, workspace_a, browse, django_assert_num_queries
    ):
        client = client_for(editor)
        url = "/w/team-a/memories/?q=a"
        client.get(url)  # warm the session and caches
        # One fewer than for one actor's list: no actor to look up.
        with django_assert_num_queries(11):
            assert client.get(url).status_code == 200
        for actor_id in ("user:bob", "user:cy", "team:ops"):
            seed(workspace_a, *({"content": f"a note {i}"} for i in range(8)), actor_id=actor_id)
        with django_assert_num_queries(11):
            assert client.get(url).status_code == 200

    def test_an_editor_suppresses_and_restores_a_row_in_place(self, editor, browse):
        tea = browse[0]
        client = client_for(editor)
        response = client.post(
            f"/w/team-a/memories/{tea.pk}/status/", {"action": "suppress"}, **HTMX
        )
        # The portal asks why: without a reason nothing changes and the row asks again.
        assert response.status_code == 422
        html = response.content.decode()
        assert html.lstrip().startswith(f'<tr id="memory-{tea.pk}" class="editing"')
        assert "Say why this memory must not be recalled." in html
        tea.refresh_from_db()
        assert tea.lifecycle_status == "active"
        response = client.post(
            f"/w/team-a/memories/{tea.pk}/status/",
            {"action": "suppress", "reason": "Ada switched to coffee."},
            **HTMX,
        )
        assert response.status_code == 200
        html = response.content.decode()
        assert html.lstrip().startswith(f'<tr id="memory-{tea.pk}"')
        assert "lifecycle status is not active (suppressed)" in html and "Restore" in html
        tea.refresh_from_db()
        assert tea.lifecycle_status == "suppressed"
        event = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).order_by("-id").first()
        assert event.payload["action"] == "suppressed" and event.author == "user:eddie"
        assert event.payload["reason"] == "Ada switched to coffee."
        response = client.post(f"/w/team-a/memories/{tea.pk}/status/", {"action": "restore"})
        assert response.status_code == 302
        tea.refresh_from_db()
        assert tea.lifecycle_status == "active"

    def test_suppress_asks_for_the_reason_in_the_row_or_on_the_memory_page(self, editor, browse):
        tea = browse[0]
        client = client_for(editor)
        url = f"/w/team-a/memories/{tea.pk}/status/"
        html = client.get(url, **HTMX).content.decode()
        assert f'<tr id="memory-{tea.pk}" class="editing">' in html
        assert '<textarea id="reason-' in html and "required" in html
        response = client.get(url)  # without JavaScript: the memory page asks
        assert response["Location"] == f"/w/team-a/memories/{tea.pk}/"

    def test_a_viewer_cannot_change_anything(self, viewer, browse):
        tea = browse[0]
        client = client_for(viewer)
        status = client.post(f"/w/team-a/memories/{tea.pk}/status/", {"action": "suppress"})
        edit = client.post(f"/w/team-a/memories/{tea.pk}/edit/", {"content": "changed"})
        upload = SimpleUploadedFile("m.jsonl", b'{"content": "x", "memoryType": "fact"}\n')
        imported = client.post("/w/team-a/memories/import/", {"actor": "user:ada", "file": upload})
        assert (status.status_code, edit.status_code, imported.status_code) == (403, 403, 403)
        assert client.get(f"/w/team-a/memories/{tea.pk}/edit/").status_code == 403
        tea.refresh_from_db()
        assert (tea.lifecycle_status, tea.content) == ("active", "Ada prefers tea")
        assert MemoryRecord.objects.count() == 4
        assert not AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).exists()

    def test_writes_need_a_csrf_token(self, editor, browse):
        tea = browse[0]
        client = client_for(editor, csrf=True)
        response = client.post(f"/w/team-a/memories/{tea.pk}/status/", {"action": "suppress"})
        assert response.status_code == 403
        tea.refresh_from_db()
        assert tea.lifecycle_status == "active"

    def test_an_unknown_status_action_is_a_bad_request(self, editor, browse):
        response = client_for(editor).post(
            f"/w/team-a/memories/{browse[0].pk}/status/", {"action": "delete"}
        )
        assert response.status_code == 400

    def test_an_editor_edits_content_in_place_and_it_is_re_embedded(self, editor, browse):
        tea = browse[0]
        tea.refresh_from_db()
        client = client_for(editor)
        response = client.get(f"/w/team-a/memories/{tea.pk}/edit/", **HTMX)
        assert 'class="editing"' in response.content.decode()
        form = {
            "content": "Ada prefers green tea in the morning, without sugar or milk please",
            "memory_type": "preference",
            "sensitivity": "internal",
            "segment_kind": "memory",
            "confidence": "0.9",
        }
        response = client.post(f"/w/team-a/memories/{tea.pk}/edit/", form, **HTMX)
        assert response.status_code == 200
        assert "green tea" in response.content.decode()
        before = (tea.token_count, list(tea.embedding))
        tea.refresh_from_db()
        assert tea.content.startswith("Ada prefers green tea")
        assert (tea.token_count, list(tea.embedding)) != before
        event = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).order_by("-id").first()
        assert event.payload["fields"] == ["content"]

    def test_an_empty_edit_is_an_error_next_to_the_field(self, editor, browse):
        tea = browse[0]
        form = {
            "content": "  ",
            "memory_type": "preference",
            "sensitivity": "internal",
            "segment_kind": "memory",
            "confidence": "2",
        }
        response = client_for(editor).post(f"/w/team-a/memories/{tea.pk}/edit/", form)
        html = response.content.decode()
        assert response.status_code == 200
        assert "This field is required." in html or "cannot be empty" in html
        assert "less than or equal to 1" in html
        tea.refresh_from_db()
        assert tea.content == "Ada prefers tea"

    def test_a_memory_row_can_be_fetched_back_for_cancel(self, viewer, browse):
        response = client_for(viewer).get(f"/w/team-a/memories/{browse[0].pk}/row/", **HTMX)
        assert response.content.decode().lstrip().startswith(f'<tr id="memory-{browse[0].pk}"')


def jsonl(*lines: str) -> SimpleUploadedFile:
    return SimpleUploadedFile("memories.jsonl", ("\n".join(lines) + "\n").encode())


class MemoryImportTests:
    def test_an_editor_imports_a_file_all_at_once(self, editor, workspace_a):
        upload = jsonl(
            '{"content": "Bob likes jazz", "memoryType": "preference", "sourceKind": "user"}',
            "",
            '{"content": "Bob is in Lisbon", "memoryType": "fact", "sourceKind": "import",'
            ' "createdAt": "2024-01-02T03:04:05Z", "hitCount": 3}',
        )
        response = client_for(editor).post(
            "/w/team-a/memories/import/", {"actor": "user:bob", "file": upload}, **HTMX
        )
        assert response.status_code == 200
        assert "Imported 2 memories for" in response.content.decode()
        assert response["HX-Trigger"] == "memoriesChanged"
        rows = MemoryRecord.objects.filter(actor__name="bob").order_by("id")
        assert [r.content for r in rows] == ["Bob likes jazz", "Bob is in Lisbon"]
        assert rows[1].hit_count == 3 and rows[1].created_at.year == 2024
        event = AuditEvent.objects.get(type=EventType.MEMORY_CHANGED)
        assert event.payload["count"] == 2

    def test_without_htmx_a_successful_import_redirects_to_the_actor(self, editor, workspace_a):
        upload = jsonl('{"content": "Bob likes jazz", "memoryType": "fact", "sourceKind": "user"}')
        response = client_for(editor).post(
            "/w/team-a/memories/import/", {"actor": "user:bob", "file": upload}
        )
        assert response.status_code == 302
        assert response["Location"] == "/w/team-a/memories/?actor=user%3Abob"

    def test_a_bad_line_is_reported_by_number_and_nothing_is_imported(self, editor, workspace_a):
        upload = jsonl(
            '{"content": "fine", "memoryType": "fact", "sourceKind": "user"}',
            '{"content": "typo", "memoryType": "factoid", "sourceKind": "user"}',
            "not json",
            '["a list"]',
            '{"content": "fine too", "memoryType": "fact", "sourceKind": "user", "colour": 1}',
        )
        response = client_for(editor).post(
            "/w/team-a/memories/import/", {"actor": "user:bob", "file": upload}
        )
        html = response.content.decode()
        assert response.status_code == 200
        assert "4 lines have errors; nothing was imported." in html
        assert re.search(r"Line 2</td><td><code>memoryType</code></td><td>.*factoid", html)
        assert "Line 3</td><td><code>line</code></td><td>Not valid JSON" in html
        assert "Line 4</td><td><code>line</code></td><td>Each line must be one JSON object." in html
        assert (
            "Line 5</td><td><code>colour</code></td><td>Unknown field; expected one of: content,"
            in html
        )
        assert not MemoryRecord.objects.exists()
        assert not AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).exists()

    def test_a_value_outside_a_vocabulary_lists_the_valid_choices(self, editor, workspace_a):
        upload = jsonl('{"content": "typo", "memoryType": "factoid", "sourceKind": "user"}')
        response = client_for(editor).post(
            "/w/team-a/memories/import/", {"actor": "user:bob", "file": upload}
        )
        html = response.content.decode()
        line = "Line 1</td><td><code>memoryType</code></td><td>&quot;factoid&quot; is not one"
        assert line in html
        assert "is not one of: fact, preference, decision," in html
        assert "not a valid choice" not in html

    def test_file_level_problems_are_shown_next_to_the_fields(self, editor, workspace_a):
        client = client_for(editor)
        html = client.post(
            "/w/team-a/memories/import/", {"actor": "user:bob", "file": jsonl("", " ")}
        ).content.decode()
        assert "The file has no memories in it." in html
        html = client.post(
            "/w/team-a/memories/import/",
            {"actor": "bob", "file": jsonl('{"content": "x", "memoryType": "fact"}')},
        ).content.decode()
        assert "Use kind:name" in html
        html = client.post(
            "/w/team-a/memories/import/",
            {"actor": "user:bob", "file": SimpleUploadedFile("m.jsonl", b"\xff\xfe\x00")},
        ).content.decode()
        assert "not UTF-8" in html
        assert not MemoryRecord.objects.exists()

    def test_the_import_page_works_without_javascript(self, editor, workspace_a):
        response = client_for(editor).get("/w/team-a/memories/import/?actor=user:bob")
        assert response.status_code == 200
        assert 'value="user:bob"' in response.content.decode()


class BudgetBarTests:
    def test_the_svg_keeps_the_width_it_was_drawn_for(self):
        import re

        from recall.svg import budget_bar

        budget = {
            "totalTokenBudget": 3200,
            "usedTokens": 40,
            "pressure": False,
            "perKind": {
                "memory": {
                    "reserved": 800,
                    "ceiling": 1200,
                    "demand": 40,
                    "allocated": 40,
                    "used": 40,
                }
            },
        }
        svg = str(budget_bar(budget, width=640))
        w, h = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
        assert w == 640
        assert h < 400

    def test_the_kinds_are_named_in_words_as_everywhere_else_on_the_page(self):
        from recall.svg import budget_bar

        alloc = {"reserved": 500, "ceiling": None, "demand": 0, "allocated": 0, "used": 0}
        budget = {
            "totalTokenBudget": 3200,
            "usedTokens": 0,
            "pressure": False,
            "perKind": {"system_policy": alloc, "tool_result": alloc},
        }
        svg = str(budget_bar(budget))
        assert ">system policy</text>" in svg and ">tool result</text>" in svg
        assert "system_policy" not in svg and "tool_result" not in svg

    def test_the_page_says_what_reserved_allocated_and_score_mean(self, editor, workload_a, ada):
        html = client_for(editor).post("/w/team-a/sandbox/", recall_form(workload_a)).content
        html = html.decode()
        words = html[html.index('class="hint budget-words"') :]
        assert (
            "<strong>Allocated</strong>: what the planner gave it in this recall (0 when" in words
        )
        score = section(html, "score-words", tag="p")
        assert "below 0 for one less similar than unrelated text" in score


class MemoryStatusPageTests:
    def test_restoring_a_stale_memory_is_refused_with_a_reason(self, editor, workspace_a):
        from tests.recall import factories

        memory = factories.memory(workspace_a, "old", lifecycle_status="stale")
        client = client_for(editor)
        back = "/w/team-a/memories/?actor=user:ada"

        response = client.post(
            f"/w/team-a/memories/{memory.pk}/status/", {"action": "restore", "next": back}
        )

        # Without JavaScript: back to the list, the reason shown there as a message.
        assert response.status_code == 302 and response["Location"] == back
        html = client.get(back).content.decode()
        assert (
            f"<li>Could not restore memory {memory.pk}: Only a suppressed memory can be"
            " restored; this one is stale.</li>" in html
        )
        memory.refresh_from_db()
        assert memory.lifecycle_status == "stale"
        assert not AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).exists()

    def test_restoring_a_memory_suppressed_while_stale_says_it_is_stale_again(
        self, editor, workspace_a
    ):
        from tests.recall import factories

        memory = factories.memory(workspace_a, "old", lifecycle_status="stale")
        client = client_for(editor)
        back = "/w/team-a/memories/?actor=user:ada"
        status = f"/w/team-a/memories/{memory.pk}/status/"
        client.post(status, {"action": "suppress", "reason": "checking", "next": back})
        page = client.get(f"/w/team-a/memories/{memory.pk}/").content.decode()
        assert (
            "It becomes stale again, as it was when it was suppressed: an operator may then"
            " reactivate it." in page
        )
        assert "stale when suppressed (stale since " in page
        client.post(status, {"action": "restore", "next": back})

        html = client.get(back).content.decode()
        assert (
            f"<li>Restored memory {memory.pk}: it is stale again, as it was when it was"
            " suppressed (an operator may reactivate it).</li>" in html
        )
        memory.refresh_from_db()
        assert memory.lifecycle_status == "stale"

    def test_htmx_gets_the_row_back_with_the_reason_next_to_it(self, editor, workspace_a):
        from tests.recall import factories

        memory = factories.memory(workspace_a, "old", lifecycle_status="stale")
        response = client_for(editor).post(
            f"/w/team-a/memories/{memory.pk}/status/", {"action": "restore"}, **HTMX
        )

        assert response.status_code == 409
        html = response.content.decode()
        assert html.lstrip().startswith(f'<tr id="memory-{memory.pk}"')
        assert (
            f'<p class="field-error" role="alert" id="memory-{memory.pk}-error">Could not restore'
            f" memory {memory.pk}: Only a suppressed memory can be restored; this one is stale.</p>"
            in html
        )
        assert '<span class="badge status-badge warn">stale</span>' in html
        memory.refresh_from_db()
        assert memory.lifecycle_status == "stale"

    def test_htmx_swaps_409_and_422_responses_but_no_other_error(self, viewer, workspace_a):
        html = client_for(viewer).get("/w/team-a/memories/").content.decode()
        match = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
        handling = json.loads(match.group(1))["responseHandling"]
        first = {
            code: next(h for h in handling if re.search(h["code"], code))
            for code in ("200", "204", "400", "409", "422", "500")
        }
        assert {code: h["swap"] for code, h in first.items()} == {
            "200": True,
            "204": False,
            "400": False,
            "409": True,
            "422": True,
            "500": False,
        }


def state_card(html: str) -> str:
    return section(html, "memory-state")


class MemoryPageTests:
    def test_it_says_whether_the_memory_is_recallable_and_for_which_workload(
        self, viewer, workload_a, browse
    ):
        tea, medical = browse[0], browse[1]
        client = client_for(viewer)
        card = state_card(client.get(f"/w/team-a/memories/{tea.pk}/").content.decode())
        assert '<span class="badge ok">yes</span> Passes the fail-closed rules' in card
        assert f"judged for <strong>{workload_a.name}</strong> in <strong>prod</strong>" in card
        assert "the first workload by name" in card
        card = state_card(client.get(f"/w/team-a/memories/{medical.pk}/").content.decode())
        assert "more sensitive than the ceiling (restricted)" in card

    def test_viewers_see_the_verdict_and_no_action(self, viewer, browse):
        card = state_card(
            client_for(viewer).get(f"/w/team-a/memories/{browse[0].pk}/").content.decode()
        )
        assert '<form method="post"' not in card and "Suppress" not in card
        response = client_for(viewer).post(
            f"/w/team-a/memories/{browse[0].pk}/state/",
            {"action": "suppress", "reason": "no"},
        )
        assert response.status_code == 403

    def test_an_outsider_gets_404(self, outsider, browse):
        client = client_for(outsider)
        response = client.post(
            f"/w/team-b/memories/{browse[0].pk}/state/", {"action": "suppress", "reason": "x"}
        )
        assert response.status_code == 404
        browse[0].refresh_from_db()
        assert browse[0].lifecycle_status == "active"

    def test_an_editor_suppresses_with_a_reason_and_restores_in_place(self, editor, browse):
        tea = browse[0]
        client = client_for(editor)
        url = f"/w/team-a/memories/{tea.pk}/state/"
        response = client.post(url, {"action": "suppress", "reason": " "}, **HTMX)
        assert response.status_code == 422
        assert "Say why this memory must not be recalled." in response.content.decode()
        response = client.post(url, {"action": "suppress", "reason": "Outdated."}, **HTMX)
        html = response.content.decode()
        assert response.status_code == 200
        assert f"Suppressed memory {tea.pk}." in state_card(html)
        assert "lifecycle status is not active (suppressed)" in html
        assert f"Restore memory #{tea.pk}" in html
        event = AuditEvent.objects.filter(type=EventType.MEMORY_CHANGED).latest("id")
        assert event.payload["reason"] == "Outdated."
        response = client.post(url, {"action": "restore"}, **HTMX)
        assert f"Restored memory {tea.pk}." in response.content.decode()
        tea.refresh_from_db()
        assert tea.lifecycle_status == "active"

    def test_each_card_shows_a_status_in_the_same_badge(self, viewer, workspace_a):
        from tests.recall import factories

        for status, badge in [("active", "ok"), ("suppressed", "bad"), ("stale", "warn")]:
            memory = factories.memory(workspace_a, status, lifecycle_status=status)
            page = client_for(viewer).get(f"/w/team-a/memories/{memory.pk}/").content.decode()
            row = client_for(viewer).get("/w/team-a/memories/?status=" + status).content.decode()
            for html in (state_card(page), section(page, "life-h"), row):
                found = re.findall(r'<span class="badge[^"]*">' + status + "</span>", html)
                assert found and all(f" {badge}" in one for one in found), (status, found)

    def test_reactivating_is_for_operators_and_shown_in_place(self, operator, editor, workspace_a):
        from tests.recall import factories

        stale = factories.memory(workspace_a, "old", lifecycle_status="stale")
        url = f"/w/team-a/memories/{stale.pk}/state/"
        page = client_for(editor).get(f"/w/team-a/memories/{stale.pk}/").content.decode()
        assert "an operator can reactivate it" in state_card(page)
        assert client_for(editor).post(url, {"action": "reactivate"}).status_code == 403
        response = client_for(operator).post(url, {"action": "reactivate"}, **HTMX)
        assert f"Reactivated memory {stale.pk}." in response.content.decode()
        stale.refresh_from_db()
        assert stale.lifecycle_status == "active"

    def test_the_workload_chosen_is_remembered_for_the_user(
        self, viewer, editor, workspace_a, workload_a, browse
    ):
        from policies.services import workload_create

        other = workload_create(workspace=workspace_a, name="zz-narrow", author="system:test")
        workload_policy_save(
            workload=other,
            environment="dev",
            document={"memoryTypeAllowed": ["fact"]},
            author="system:test",
        )
        tea = browse[0]
        client = client_for(viewer)
        client.get(f"/w/team-a/memories/?workload={other.pk}&environment=dev")
        html = client.get("/w/team-a/memories/").content.decode()
        assert "judged for <strong>zz-narrow</strong> in <strong>dev</strong>" in html
        assert "your last choice in this workspace" in html
        assert "memory type not allowed (preference)" in row_of(html, tea)
        card = state_card(client.get(f"/w/team-a/memories/{tea.pk}/").content.decode())
        assert "judged for <strong>zz-narrow</strong> in <strong>dev</strong>" in card
        # Another user still starts from the first workload.
        html = client_for(editor).get("/w/team-a/memories/").content.decode()
        assert f"judged for <strong>{workload_a.name}</strong> in <strong>prod</strong>" in html

    def test_hits_carried_in_by_an_import_are_told_apart_from_the_trail(self, editor, workspace_a):
        upload = jsonl(
            '{"content": "Bob is in Lisbon", "memoryType": "fact", "sourceKind": "import",'
            ' "hitCount": 3}'
        )
        client = client_for(editor)
        client.post("/w/team-a/memories/import/", {"actor": "user:bob", "file": upload})
        memory = MemoryRecord.objects.get(actor__name="bob")
        html = client.get(f"/w/team-a/memories/{memory.pk}/").content.decode()
        assert "3 times" in html
        assert "all counted before it was imported here" in html
        assert "in no context of this portal's audit trail yet" in html

    def test_a_sandbox_dry_run_is_a_context_that_counts_no_hit(
        self, editor, workspace_a, workload_a, ada
    ):
        client = client_for(editor)
        client.post("/w/team-a/sandbox/", recall_form(workload_a))
        carried = AuditEvent.objects.filter(type=EventType.ASSEMBLED).latest("id")
        memory = int(carried.payload["memoryIds"][0])
        html = client.get(f"/w/team-a/memories/{memory}/").content.decode()
        assert 'id="memory-hits">0 times' in html
        assert "in 1 context</a>" in html
        assert "0 as an entry (each one a hit); 1 in sandbox dry run, which count no hit" in html
