"""Schemathesis fuzzes every operation of the OpenAPI schema against the app, in process.

The schema is the one drf-spectacular generates; the requests go to Django's WSGI handler on
the test session's throw-away database (never ``make run``'s demo data), as an operator's API
token, over a seeded workspace (a workload, an actor with memories, a recall in the audit
trail). Each example runs in a savepoint that is rolled back, so every example starts from
the same data and a DELETE cannot starve the examples after it. The seed is fixed and
generation derandomized: a failure found once is found on every run.

Checked on every response: no 5xx, the status code and content type are documented, the body
matches its schema, valid input is accepted and invalid input rejected, and every 4xx body is
the one error shape ``{"error": {"code", "message", "details"}}``.

Schemathesis's coverage phase sends every boundary case the schema defines. The few request
bodies that hold a whole configuration (a layout, a policy, the lifecycle settings) or many
properties (a memory import, a recall, a memory's edit) give thousands of them, most of one
kind repeated over each property of each shape the body may take (a wrong type, a value past
a bound, a valid object). ``make test`` sends a fixed third of those repeated cases,
``make test-thorough`` every one (``tests/properties.py``); every other case of every
operation is always sent.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from typing import Any

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection, transaction
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.hypothesis import builder
from schemathesis.generation.meta import CoverageScenario, TestPhase
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from portal import throttling
from portal.api.versioning import IF_MATCH_PARAM
from portal.models import Membership
from team.services import api_token_create
from tests.module_personas import module_scoped
from tests.properties import THOROUGH

# The operator, its workspace and workload, and the data seeded in them are made once for the
# module: each operation's examples run in savepoints rolled back at their end.
workspace_a, operator, workload_a, made_first = module_scoped(
    "workspace_a", "operator", "workload_a"
)

SEED = 20261203
# The fuzzing phase's examples per operation. They are given to Hypothesis's settings below:
# the suite's Hypothesis profile (tests/properties.py) would otherwise override the config's.
MAX_EXAMPLES = 50 if THOROUGH else 10


def _openapi() -> dict[str, Any]:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))


CONFIG = schemathesis.Config.from_dict(
    {
        "seed": SEED,
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
        "checks": {
            # 422 is this API's answer to a well-formed request that breaks a domain rule no
            # schema can state (a workload policy wider than the floor, a budget the planner
            # cannot honour, promotion weights that do not add up to 1, a replayed query whose
            # hash differs from the recorded one), 409 to one the data's state refuses (a
            # memory restored under an id another holds); a 400 for valid data still fails.
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "422", "429"]
            },
        },
    }
)
# Schemathesis imports Flask before each request it sends, to catch a Flask app's errors.
# Flask is not installed here, and each failed import searched the whole path (~2 CPU-s a
# run): marked missing, it fails at once.
if importlib.util.find_spec("flask") is None:
    sys.modules["flask"] = None  # type: ignore[assignment]

schema = schemathesis.openapi.from_dict(_openapi(), config=CONFIG)
schema.app = get_wsgi_application()

# Schemathesis builds each operation's coverage cases when it collects the test: ~13 s of a
# start-up in every xdist worker, though each operation runs in one. The cases are Hypothesis
# explicit examples attached to the test function itself; they are attached instead when the
# operation's test is set up (``coverage_cases``), in the worker that runs it, the same cases
# in the same order.
_add_coverage = builder.add_coverage
_COVERAGE_LATER = "_coverage_cases_later"


def _add_coverage_later(test: Any, *args: Any, **kwargs: Any) -> Any:
    setattr(test, _COVERAGE_LATER, (args, kwargs))
    return test


builder.add_coverage = _add_coverage_later


@pytest.fixture(autouse=True)
def coverage_cases(request: pytest.FixtureRequest) -> None:
    later = request.function.__dict__.pop(_COVERAGE_LATER, None)
    if later is not None:
        args, kwargs = later
        # The cases are attached to the function it is given: any other would not be run.
        attached = _add_coverage(request.function, *args, **kwargs)
        assert attached is request.function, "Schemathesis no longer adds coverage in place"


def error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx is ``{"error": {"code": str, "message": str, "details": {...}}}``."""
    if not 400 <= response.status_code < 500:
        return None
    body = json.loads(response.content)
    error = body.get("error") if isinstance(body, dict) else None
    assert isinstance(error, dict), f"A {response.status_code} without the error shape: {body}"
    assert set(error) == {"code", "message", "details"}, error
    assert isinstance(error["code"], str) and isinstance(error["message"], str), error
    assert isinstance(error["details"], dict), error
    return True


def only_the_yaml_text_is_refused(case: Any, response: Any) -> bool:
    """A layout configuration sent as YAML text is a string to JSON Schema: what the text
    holds is checked once parsed, and a 400 names it under ``config``."""
    body = case.body if isinstance(case.body, dict) else {}
    if not isinstance(body.get("config"), str):
        return False
    fields = json.loads(response.content)["error"]["details"].get("fields", {})
    return bool(fields) and all(name.startswith("config") for name in fields)


def only_a_repeated_id_is_refused(case: Any, response: Any) -> bool:
    """A memory import batch that restores two memories under one ``id``: that the ids of
    the items differ is a rule across them no JSON Schema states (a 400 naming ``id``)."""
    if not case.operation.path.endswith("/memories"):
        return False
    fields = json.loads(response.content)["error"]["details"].get("fields", {})
    return set(fields) == {"id"} and "more than once" in fields["id"]


def valid_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's positive_data_acceptance, except for the 400s above."""
    if response.status_code == 400 and (
        only_the_yaml_text_is_refused(case, response)
        or only_a_repeated_id_is_refused(case, response)
    ):
        return None
    return positive_data_acceptance(ctx, response, case)


# The operations whose request body is a whole configuration, in several shapes (JSON and
# YAML text, flat and nested): 6,600 of the coverage phase's ~9,900 cases. Then the three
# bodies with many properties: a memory import (~340 repeated cases), a recall (~320) and a
# memory's edit (~110).
LARGE_BODIES = {
    ("PUT", "/v1/workloads/{workload_id}/layout-config"),
    ("POST", "/v1/context/layout"),
    ("PUT", "/v1/workloads/{workload_id}/policy"),
    ("PUT", "/v1/workspaces/{slug}/policy"),
    ("PUT", "/v1/workspaces/{slug}/lifecycle"),
    ("PATCH", "/v1/workspaces/{slug}/lifecycle"),
    ("POST", "/v1/memory/actors/{actor_id}/memories"),
    ("POST", "/v1/memory/actors/{actor_id}/recall"),
    ("PATCH", "/v1/memory/memories/{memory_id}"),
}
# The kinds of case repeated once per property: the bulk of those operations' cases.
REPEATED = {
    CoverageScenario.INCORRECT_TYPE,
    CoverageScenario.VALID_OBJECT,
    CoverageScenario.VALUE_BELOW_MINIMUM,
    CoverageScenario.VALUE_ABOVE_MAXIMUM,
}


def sent(case: Any) -> bool:
    """Whether this run sends the case: all but two thirds of the large bodies' repeated
    coverage cases, chosen by a hash of the case itself (the same third on every run)."""
    meta = case.meta
    if THOROUGH or meta is None or meta.phase.name != TestPhase.COVERAGE:
        return True
    if (case.method.upper(), case.operation.path) not in LARGE_BODIES:
        return True
    if meta.phase.data.scenario not in REPEATED:
        return True
    key = json.dumps([meta.phase.data.description, case.body], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).digest()[0] % 3 == 0


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    valid_data_accepted,
    error_shape,
]


@pytest.fixture
def app_in_test_transaction() -> Any:
    """Keep the test's connection across requests, as Django's test client does.

    The WSGI handler closes a connection whose autocommit differs from the settings' at the
    start and end of each request; inside the test's transaction that is every connection.
    """
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture(scope="module")
def seeded(operator, workload_a) -> dict[str, str]:
    # A fuzzer run deletes and rewrites what it finds: never anything but a test database.
    assert connection.settings_dict["NAME"].startswith("test_"), connection.settings_dict["NAME"]
    client = operator.api()
    # The workspace keeps recall queries, so a replay needs none pasted.
    stored = client.patch("/v1/workspaces/team-a/", {"storeQueries": True}, format="json")
    assert stored.status_code == 200, stored.content
    memories = client.post(
        "/v1/memory/actors/user:ada/memories",
        {
            "memories": [
                {
                    "content": "Ada prefers short answers.",
                    "memoryType": "preference",
                    "sourceKind": "user",
                },
                {
                    "content": "The release ships on Friday.",
                    "memoryType": "decision",
                    "sourceKind": "user",
                },
                {
                    "content": "Ada asked for a summary of the incident.",
                    "memoryType": "summary",
                    "sourceKind": "user",
                },
            ]
        },
        format="json",
    )
    assert memories.status_code == 201, memories.content
    recall = client.post(
        "/v1/memory/actors/user:ada/recall",
        {"workloadId": str(workload_a.id), "environment": "prod", "query": "release", "topK": 3},
        format="json",
    )
    assert recall.status_code == 200, recall.content
    spare, _ = api_token_create(workspace=operator.workspace, name="spare", role="agent")
    member = get_user_model().objects.create_user(username="nina", password="pw-nina")
    Membership.objects.create(user=member, workspace=operator.workspace, role="viewer")
    return {
        "slug": operator.workspace.slug,
        "workspace": operator.workspace.slug,
        "workload_id": str(workload_a.id),
        "workloadId": str(workload_a.id),
        "actor_id": "user:ada",
        "memory_id": str(memories.json()["memories"][0]["id"]),
        "environment": "prod",
        "event_id": str(operator.workspace.audit_events.order_by("-pk").first().pk),
        "token_id": str(spare.pk),
        "username": "nina",
    }


def aim_at_the_seeded_data(case: Any, seeded: dict[str, str]) -> None:
    """Point the valid parts of a request at the seeded workspace, workload, actor, memory
    and event.

    Random ids and slugs are valid but name nothing (a 404 every time), so the operation
    itself would never run, nor check an invalid body sent to it. A part generated invalid
    is left as it is: it is the point of the case.
    """
    meta = case.meta

    def valid(location: ParameterLocation) -> bool:
        return meta is None or not meta.is_negative_at(location)

    if valid(ParameterLocation.PATH):
        for name in list(case.path_parameters or {}):
            if name in seeded:
                case.path_parameters[name] = seeded[name]
    query = case.query if isinstance(case.query, dict) else {}
    if valid(ParameterLocation.QUERY):
        for name in ("workspace", "environment"):
            if query.get(name):
                query[name] = seeded[name]
        if case.operation.path.endswith("/maintenance/{sweep}") and query.get("mode") != "execute":
            # Documented as "execute only": a preview naming a preview run is refused.
            query.pop("preview", None)
            query.pop("confirm", None)
    if valid(ParameterLocation.BODY) and isinstance(case.body, dict):
        for name in ("workloadId", "environment"):
            if name in case.body:
                case.body[name] = seeded[name]
        # A memory may name its actor (as archive lines do): it must be the URL's.
        for item in [case.body, *case.body.get("memories", [])]:
            if isinstance(item, dict) and "actorId" in item:
                item["actorId"] = seeded["actor_id"]
    if_match = (case.headers or {}).get("If-Match")
    claims_valid = meta is None or meta.generation.mode.is_positive
    if claims_valid and if_match is not None:
        if not re.fullmatch(IF_MATCH_PARAM.pattern or "", if_match):
            # Schemathesis's coverage phase sends "0" as a valid If-Match, though the
            # schema's pattern asks for an entity tag ("0" in quotes).
            del case.headers["If-Match"]


# Every operation is fuzzed, none excluded: the destructive ones (DELETE, erase, archive,
# restore, a token revoked or rotated, a member removed) act inside a rolled-back savepoint,
# and the token operations are aimed at a spare token, never at the persona's own.
@pytest.mark.django_db
@schema.parametrize()
# The seeded data is made once for the module: each example runs in a savepoint rolled back
# at its end, so every example sees the same data. Generation may be slow on a loaded
# machine (a large request schema): that says nothing of the API's answers.
@settings(
    max_examples=MAX_EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_answers_as_its_schema_says(
    case: Any, operator: Any, seeded: dict[str, str], app_in_test_transaction: Any
) -> None:
    if not sent(case):
        return
    aim_at_the_seeded_data(case, seeded)
    throttling.reset()
    with transaction.atomic():
        case.call_and_validate(headers={"Authorization": f"Bearer {operator.token}"}, checks=CHECKS)
        transaction.set_rollback(True)
