"""Concurrent layout-config edits never silently undo each other; identical saves record nothing."""

from __future__ import annotations

from typing import Any

import pytest

from portal.errors import VersionConflict
from recall.layout.services import layout_config_save
from tests.helpers import error_of, run_in_threads
from tests.recall.test_layout_config import SEED_FRAGMENT, config_url, state

pytestmark = pytest.mark.django_db


def put(persona: Any, workload: Any, body: Any, **headers: Any) -> Any:
    return persona.api().put(config_url(workload), body, format="json", **headers)


def save(workload: Any, window: int, **kwargs: Any) -> Any:
    return layout_config_save(
        workload=workload, document={"context_window": window}, author="user:olga", **kwargs
    )


class LayoutConfigEtagTests:
    def test_the_defaults_carry_etag_0(self, viewer, workload_a):
        response = viewer.api().get(config_url(workload_a))

        assert response.status_code == 200
        assert response.json()["isDefault"] is True
        assert response["ETag"] == '"0"'

    def test_a_saved_config_carries_its_version(self, viewer, workload_a):
        save(workload_a, 8000)
        save(workload_a, 16000)

        response = viewer.api().get(config_url(workload_a))

        assert response["ETag"] == '"2"'
        assert response.json()["version"] == 2


class LayoutConfigConflictTests:
    @pytest.mark.parametrize("how", ["if-match", "base-version"])
    def test_the_second_of_two_saves_from_the_same_base_is_a_409_and_changes_nothing(
        self, editor, workload_a, how
    ):
        def put_from_defaults(window: int) -> Any:
            if how == "if-match":
                return put(editor, workload_a, {"context_window": window}, HTTP_IF_MATCH='"0"')
            return put(editor, workload_a, {"context_window": window, "baseVersion": 0})

        first = put_from_defaults(8000)
        assert first.status_code == 200, first.content
        assert first["ETag"] == '"1"'
        before = state(workload_a)

        error = error_of(put_from_defaults(16000), 409, "VERSION_CONFLICT")

        assert error["details"] == {"currentVersion": 1, "baseVersion": 0}
        assert "layout configuration" in error["message"]
        assert state(workload_a) == before

    def test_the_wrapped_form_takes_a_base_version_too(self, editor, workload_a):
        save(workload_a, 8000)

        response = put(editor, workload_a, {"config": SEED_FRAGMENT, "baseVersion": 1})

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 2

    def test_a_save_without_a_base_version_is_not_checked(self, editor, workload_a):
        save(workload_a, 8000)

        assert put(editor, workload_a, {"context_window": 9000}).json()["version"] == 2

    def test_an_identical_save_records_nothing(self, editor, workload_a):
        save(workload_a, 8000)
        before = state(workload_a)

        response = put(
            editor,
            workload_a,
            {"config": {"memory": {"context_window": 8000}}, "comment": "again"},
            HTTP_IF_MATCH='"1"',
        )

        assert response.status_code == 200, response.content
        assert response.json()["version"] == 1
        assert response["ETag"] == '"1"'
        assert state(workload_a) == before

    def test_saving_the_defaults_explicitly_is_a_first_version(self, editor, workload_a):
        # Nothing was stored: pinning today's defaults is a change (they may differ tomorrow).
        response = put(editor, workload_a, {}, HTTP_IF_MATCH='"0"')

        assert response.json()["version"] == 1

    @pytest.mark.parametrize(
        ("body", "headers", "field"),
        [
            ({"context_window": 8000, "baseVersion": "1"}, {}, "baseVersion"),
            ({"context_window": 8000, "baseVersion": -2}, {}, "baseVersion"),
            ({"context_window": 8000}, {"HTTP_IF_MATCH": "1"}, "If-Match"),
            ({"context_window": 8000}, {"HTTP_IF_MATCH": '"a"'}, "If-Match"),
        ],
    )
    def test_a_malformed_base_version_is_a_400(self, editor, workload_a, body, headers, field):
        before = state(workload_a)

        response = put(editor, workload_a, body, **headers)

        error = error_of(response, 400, "INVALID_REQUEST")
        assert field in error["details"]["fields"]
        assert state(workload_a) == before

    def test_an_outsider_cannot_probe_versions(self, outsider, workload_a):
        error_of(put(outsider, workload_a, {"context_window": 8000}, HTTP_IF_MATCH='"0"'), 404)


@pytest.mark.django_db(transaction=True)
class ConcurrentLayoutSaveTests:
    def test_of_two_concurrent_saves_from_the_same_base_exactly_one_wins(self, workload_a):
        def run(n: int) -> str:
            save(workload_a, 8000 + n * 1000, base_version=0)
            return "saved"

        outcomes = [
            (done.current, done.base) if isinstance(done, VersionConflict) else done
            for done in run_in_threads(run, 2, together=True)
        ]

        assert sorted(outcomes, key=str) == [(1, 0), "saved"]
        assert workload_a.layout_config_versions.count() == 1
