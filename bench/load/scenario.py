"""The load scenario as plain data: what a simulated user does, how often, and with what.

No locust and no Django here: ``locustfile.py`` turns each operation into a task, and
``run_load.py`` checks every path against the URL conf before the run starts, so a renamed
route fails the run at once instead of showing up as a column of 404s.

The mix, per simulated user (weights are relative):

- ``recall`` (the hot path): an agent asks for an actor's context, as the demo's callers do
  (their workloads, environments, actors, ``topK`` and overrides, and the demo's queries);
- ``policy read``: a workload policy for one environment (``GET``, carries an ``ETag``);
- ``policy save``: read a policy that relaxes no axis of the floor, change its
  ``totalTokenBudget`` (3000 <-> 2900, both within the demo's floor), save it with
  ``If-Match``. Another user may have saved first: that is a 409
  ``VERSION_CONFLICT``, counted as handled (not an error); the save then re-reads and tries
  once more;
- ``memory write``: a new memory for one of the demo's actors;
- ``audit list``: the first page of the workspace's audit trail.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from console.demo.history import CALLERS, SLUG, Caller
from console.demo.memories import demo_data

WORKSPACE = SLUG
ENVIRONMENTS = ("prod", "staging", "dev")
# Both within the demo floor's budget (3200) and above its reservations (2500).
BUDGETS = (3000, 2900)


@dataclass(frozen=True)
class Operation:
    name: str  # as reported
    weight: int
    method: str
    url_name: str  # the route its path must resolve to (checked by run_load.py)


OPERATIONS: tuple[Operation, ...] = (
    Operation("recall", 12, "POST", "api-recall"),
    Operation("policy read", 3, "GET", "api-workload-policy"),
    Operation("policy save", 1, "PUT", "api-workload-policy"),
    Operation("memory write", 2, "POST", "api-actor-memories"),
    Operation("audit list", 2, "GET", "api-audit-events"),
)


def weight(name: str) -> int:
    return next(op.weight for op in OPERATIONS if op.name == name)


# --- paths ------------------------------------------------------------------------------------


def workloads_path() -> str:
    return f"/v1/workspaces/{WORKSPACE}/workloads/"


def recall_path(actor_id: str) -> str:
    return f"/v1/memory/actors/{quote(actor_id, safe=':')}/recall"


def memories_path(actor_id: str) -> str:
    return f"/v1/memory/actors/{quote(actor_id, safe=':')}/memories"


def policy_path(workload_id: str, environment: str) -> str:
    return f"/v1/workloads/{workload_id}/policy?environment={environment}"


def effective_policy_path(workload_id: str, environment: str) -> str:
    return f"/v1/workloads/{workload_id}/effective-policy?environment={environment}"


AUDIT_EVENTS_PATH = "/v1/audit/events/"


def sample_paths() -> dict[str, str]:
    """One path per operation (ids made up), for checking against the URL conf."""
    workload = str(uuid.uuid4())
    return {
        "recall": recall_path("user:ada"),
        "policy read": policy_path(workload, "prod"),
        "policy save": policy_path(workload, "prod"),
        "memory write": memories_path("user:ada"),
        "audit list": AUDIT_EVENTS_PATH,
    }


# --- what the requests carry ------------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """What the run found in the workspace before it started."""

    workload_ids: dict[str, str]  # name -> id
    policies: list[tuple[str, str]]  # (workload id, environment) with a saved policy
    # Those of them that relax no axis of the floor, so that a save is accepted (the demo
    # leaves one that does, for the compliance pages to show: saving it is a 422).
    savable: list[tuple[str, str]]

    def to_json(self) -> str:
        return json.dumps(
            {"workloadIds": self.workload_ids, "policies": self.policies, "savable": self.savable}
        )

    @classmethod
    def from_json(cls, text: str) -> Targets:
        data = json.loads(text)
        pairs = {key: [(w, e) for w, e in data[key]] for key in ("policies", "savable")}
        return cls(data["workloadIds"], pairs["policies"], pairs["savable"])


def discover(base_url: str, token: str) -> Targets:
    """The workspace's workloads, and which (workload, environment) have a saved policy."""

    def get(path: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            base_url + path, headers={"Authorization": f"Bearer {token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, None

    status, body = get(workloads_path() + "?pageSize=500")
    if status != 200:
        raise RuntimeError(f"GET {workloads_path()} answered {status}: is the token right?")
    workload_ids = {w["name"]: w["id"] for w in body["results"]}
    policies = [
        (workload_id, environment)
        for workload_id in workload_ids.values()
        for environment in ENVIRONMENTS
        if get(policy_path(workload_id, environment))[0] == 200
    ]
    savable = [
        (workload_id, environment)
        for workload_id, environment in policies
        if not get(effective_policy_path(workload_id, environment))[1]["relaxingAxes"]
    ]
    if not savable:
        raise RuntimeError("No workload policy to read and save: load the demo first.")
    return Targets(workload_ids, policies, savable)


_queries = demo_data().queries
_caller_weights = [c.weight for c in CALLERS]
ACTORS = sorted({actor for c in CALLERS for actor in c.actors})


def pick_caller(rng: random.Random) -> Caller:
    return rng.choices(CALLERS, weights=_caller_weights)[0]


def recall_body(caller: Caller, actor_id: str, workload_id: str, rng: random.Random) -> dict:
    queries = _queries.get(caller.workload, {}).get(actor_id) or ("what matters for this turn",)
    body: dict[str, Any] = {
        "workloadId": workload_id,
        "environment": caller.environment,
        "query": rng.choice(queries),
        "topK": caller.top_k,
    }
    if caller.override:
        body["policyOverride"] = caller.override
    return body


def pick_actor(caller: Caller, rng: random.Random) -> str:
    return rng.choices(list(caller.actors), weights=list(caller.actors.values()))[0]


def memory_body(actor_id: str, rng: random.Random) -> dict[str, Any]:
    topic = rng.choice(
        [q for by_actor in _queries.values() for qs in by_actor.values() for q in qs]
    )
    return {
        "content": f"Noted during a load run ({uuid.uuid4().hex[:8]}): {actor_id} asked about {topic}.",
        "memoryType": "fact",
        "sourceKind": "user",
        "confidence": 0.8,
        "consentPolicy": "explicit",
        "sensitivity": "internal",
    }


def changed_policy(policy: dict[str, Any]) -> dict[str, Any]:
    """The same policy with another ``totalTokenBudget``: a save that records a new version
    (a save identical to the current version records nothing)."""
    budget = BUDGETS[1] if policy.get("totalTokenBudget") == BUDGETS[0] else BUDGETS[0]
    return {**policy, "totalTokenBudget": budget}
