"""Query filters the database can always read: ids that fit, times handed over in UTC."""

from __future__ import annotations

import pytest

from tests.helpers import error_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/v1/audit/events/?until=9683-06-14T00:04:09-23:12", None),
        ("/v1/memory/actors/user:ada/memories?createdBefore=2026-06-14T00:04:09-23:59", None),
        ("/v1/audit/events/?since=9999-12-31T23:59:59-05:00", "since"),
        ("/v1/audit/events/?memory=1.5", "memory"),
        ("/v1/audit/events/?memory=1e308", "memory"),
        ("/v1/audit/events/?memory=9223372036854775808", "memory"),
    ],
)
def test_a_filter_the_database_could_not_read_is_never_a_500(operator, workload_a, url, field):
    from tests.recall import factories

    factories.memories(operator.workspace, {"content": "x"})

    response = operator.api().get(url)

    if field is None:
        assert response.status_code == 200, response.content
    else:
        assert field in error_of(response, 400)["details"]["fields"]
