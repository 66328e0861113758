"""Nothing personal in logs or caches: query strings are dropped from request lines, and
answers to signed-in callers are ``Cache-Control: no-store``."""

from __future__ import annotations

import io
import logging

import pytest
from django.test import Client

from portal.privacy import QueryStringFilter, strip_query

pytestmark = pytest.mark.django_db


def test_query_strings_are_dropped_from_request_lines():
    line = "GET /w/team-a/memories/?actor=user:ada&q=her+diagnosis HTTP/1.1"
    assert strip_query(line) == "GET /w/team-a/memories/?… HTTP/1.1"
    assert strip_query("no query here") == "no query here"


def test_a_record_formatted_by_name_keeps_its_mapping():
    """Celery's task lines format "%(name)s" from a dict: the filter must not break them."""
    record = logging.LogRecord(
        "celery", logging.INFO, __file__, 1, "Task %(name)s[%(id)s] received",
        ({"name": "maintenance.run", "id": "GET /x?q=CANARY"},), None,
    )  # fmt: skip

    assert QueryStringFilter().filter(record)
    assert record.getMessage() == "Task maintenance.run[GET /x?…] received"


def test_the_development_servers_access_log_goes_through_the_filter():
    logger = logging.getLogger("django.server")
    handlers = logger.handlers
    # (pytest adds its own capturing handlers beside the configured one)
    assert any(
        any(isinstance(f, QueryStringFilter) for f in handler.filters) for handler in handlers
    )
    stream = io.StringIO()
    probe = logging.StreamHandler(stream)
    probe.addFilter(QueryStringFilter())
    logger.addHandler(probe)
    try:
        logger.info('"%s" %s %s', "GET /w/a/memories/?q=CANARY-secret HTTP/1.1", "200", "512")
    finally:
        logger.removeHandler(probe)
    assert "CANARY" not in stream.getvalue() and "/w/a/memories/?…" in stream.getvalue()


def test_signed_in_answers_are_not_stored(operator, workspace_a):
    client = Client()
    client.force_login(operator.user)
    for path in ("/w/team-a/", "/w/team-a/memories/", "/w/team-a/audit/export.csv"):
        response = client.get(path)
        assert "no-store" in response["Cache-Control"], path
    api = operator.api().get("/v1/workspaces/")
    assert "no-store" in api["Cache-Control"]
    session_api = operator.session().get("/v1/workspaces/")
    assert "no-store" in session_api["Cache-Control"]


def test_anonymous_answers_may_be(db):
    response = Client().get("/healthz")
    assert "no-store" not in response.get("Cache-Control", "")
