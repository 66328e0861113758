"""The Sessions pages: the list with its filters, a session's page (the utilisation chart with
its severity bands, each turn's stages, its recall's audit event, no content), and the
formatted prompt for operators only."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from chat.svg import Reading, utilisation_chart
from tests.chat.helpers import layout, started, turn
from tests.recall import factories

pytestmark = pytest.mark.django_db

CANARY = "CANARY-page-9Wd"


def client_for(persona: Any) -> Client:
    client = Client()
    client.force_login(persona.user)
    return client


@pytest.fixture
def session(editor, workload_a) -> dict[str, Any]:
    """A session whose first turn fits a small window and whose second does not even after
    the cascade (an emergency overage), with a canary in it."""
    factories.memories(editor.workspace, {"content": "release notes are short"})
    layout(workload_a, {"context_window": 200, "output_buffer": 0})
    found = started(editor, workload_a, externalId="conv-7")
    turn(editor, found["id"], ("user", "release " + "words " * 60))
    turn(editor, found["id"], ("assistant", "noted " * 100), ("user", f"release {CANARY}"))
    return found


class SessionListPageTests:
    def test_a_viewer_lists_and_filters_the_sessions(self, viewer, editor, workload_a, session):
        other = started(editor, workload_a, actorId="user:bob")
        client = client_for(viewer)

        page = client.get("/w/team-a/sessions/").content.decode()
        assert f"#{session['id']}" in page and f"#{other['id']}" in page and "conv-7" in page

        filtered = client.get("/w/team-a/sessions/", {"actor": "user:bob"}).content.decode()
        assert f"#{other['id']}" in filtered and f"#{session['id']}<" not in filtered
        assert client.get("/w/team-a/sessions/", {"status": "paused"}).status_code == 400

    def test_an_outsider_gets_404(self, outsider, session):
        assert client_for(outsider).get("/w/team-a/sessions/").status_code == 404


class SessionPageTests:
    def test_it_shows_the_chart_the_stages_and_the_audit_event_without_content(
        self, viewer, session
    ):
        response = client_for(viewer).get(f"/w/team-a/sessions/{session['id']}/")

        assert response.status_code == 200
        page = response.content.decode()
        assert 'class="utilisation-chart"' in page
        for boundary in ("70%", "85%", "95%", "100%"):
            assert f">{boundary}</text>" in page
        assert "Turn 3" in page and "It fitted without pruning." in page
        assert "<td>Known facts section</td>" in page  # a section by its title in the prompt
        assert "<code>drop_prior_session_history</code>" in page
        assert "<code>emergency_minimum</code>" in page and "emergency overage" in page
        assert "/w/team-a/audit/" in page
        assert CANARY not in page and "release notes are short" not in page
        assert "Show the formatted prompt" not in page

    def test_an_editor_gets_no_prompt_button_and_no_prompt(self, editor, session):
        client = client_for(editor)

        assert (
            "Show the formatted prompt"
            not in client.get(f"/w/team-a/sessions/{session['id']}/").content.decode()
        )
        assert client.get(f"/w/team-a/sessions/{session['id']}/turns/3/prompt/").status_code == 403

    def test_an_operator_opens_the_prompt_with_its_warning(self, operator, session):
        client = client_for(operator)
        page = client.get(f"/w/team-a/sessions/{session['id']}/").content.decode()
        assert "Show the formatted prompt" in page

        full = client.get(f"/w/team-a/sessions/{session['id']}/turns/3/prompt/")
        fragment = client.get(
            f"/w/team-a/sessions/{session['id']}/turns/3/prompt/", HTTP_HX_REQUEST="true"
        )

        assert full.status_code == 200 and CANARY in full.content.decode()
        assert "Private content" in full.content.decode()
        assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
        assert CANARY in fragment.content.decode()

    @pytest.mark.parametrize(
        "path", ["/sessions/999999/", "/sessions/abc/", "/sessions/{id}/turns/2/prompt/"]
    )
    def test_unknown_sessions_and_turns_without_a_prompt_are_404(self, operator, session, path):
        url = "/w/team-a" + path.format(id=session["id"])

        assert client_for(operator).get(url).status_code == 404

    def test_another_workspaces_session_is_404(self, outsider, session):
        client = client_for(outsider)

        assert client.get(f"/w/team-b/sessions/{session['id']}/").status_code == 404
        assert client.get(f"/w/team-a/sessions/{session['id']}/").status_code == 404


class UtilisationChartTests:
    def test_each_reading_is_a_point_and_an_off_chart_one_says_so(self):
        svg = str(
            utilisation_chart(
                [
                    Reading(1, 40.0, "normal"),
                    Reading(3, 96.5, "critical"),
                    Reading(5, None, "overage"),
                ]
            )
        )

        assert svg.count("<circle") == 3 and "<polyline" in svg
        assert "Turn 5: no budget left, overage (off the chart)" in svg
        assert "turn 3: 96.5% (critical)" in svg

    def test_an_empty_session_draws_the_bands_only(self):
        svg = str(utilisation_chart([]))

        assert "<circle" not in svg and "No turn has been assembled yet." in svg
