"""The load scenario for locust; the mix and the payloads are in ``scenario.py``.

``make load`` (``run_load.py``) starts the server and runs this file headless, passing:

- ``LOAD_TOKEN``: an editor token of the demo workspace (Bearer);
- ``LOAD_TARGETS``: the workloads and policies it found (JSON), so no user spends the run
  looking for them;
- ``LOAD_STATS_JSON``: where to write each operation's figures when locust quits.

Against a server already running (the demo loaded), by hand:
``LOAD_TOKEN=crp_... locust -f bench/load/locustfile.py --host http://127.0.0.1:8000``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, events, task
from locust.env import Environment
from locust.exception import StopUser

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.load import scenario  # noqa: E402

# Seconds a user thinks between two calls: about 40 calls a second from 50 users.
WAIT_MIN_S, WAIT_MAX_S = 0.5, 2.0
TOKEN = os.environ.get("LOAD_TOKEN", "")

# 409s answered to a save, handled (re-read, one more try) rather than failed.
conflicts: Counter[str] = Counter()
_targets: scenario.Targets | None = None


def targets(host: str) -> scenario.Targets:
    global _targets
    if _targets is None:
        given = os.environ.get("LOAD_TARGETS")
        if given:
            _targets = scenario.Targets.from_json(given)
        else:
            _targets = scenario.discover(host, TOKEN)
    return _targets


class PortalUser(FastHttpUser):
    wait_time = between(WAIT_MIN_S, WAIT_MAX_S)

    def on_start(self) -> None:
        if not TOKEN:
            logging.error("Set LOAD_TOKEN to an editor token of the demo workspace.")
            raise StopUser()
        self.targets = targets(self.host or "")
        self.rng = random.Random()
        self.auth = {"Authorization": f"Bearer {TOKEN}"}

    @task(scenario.weight("recall"))
    def recall(self) -> None:
        caller = scenario.pick_caller(self.rng)
        actor = scenario.pick_actor(caller, self.rng)
        workload_id = self.targets.workload_ids[caller.workload]
        body = scenario.recall_body(caller, actor, workload_id, self.rng)
        with self.client.post(
            scenario.recall_path(actor),
            json=body,
            headers=self.auth,
            name="recall",
            catch_response=True,
        ) as response:
            _expect(response, 200)

    @task(scenario.weight("policy read"))
    def policy_read(self) -> None:
        self._read_policy(*self.rng.choice(self.targets.policies))

    @task(scenario.weight("policy save"))
    def policy_save(self) -> None:
        workload_id, environment = self.rng.choice(self.targets.savable)
        for _attempt in range(2):
            read = self._read_policy(workload_id, environment)
            if read is None:
                return
            etag, policy = read
            with self.client.put(
                scenario.policy_path(workload_id, environment),
                json={"policy": scenario.changed_policy(policy), "comment": "load run"},
                headers={**self.auth, "If-Match": etag},
                name="policy save",
                catch_response=True,
            ) as response:
                if response.status_code == 409:  # someone saved since our read: read again
                    conflicts["policy save"] += 1
                    response.success()
                    continue
                _expect(response, 200)
                return

    @task(scenario.weight("memory write"))
    def memory_write(self) -> None:
        actor = self.rng.choice(scenario.ACTORS)
        with self.client.post(
            scenario.memories_path(actor),
            json=scenario.memory_body(actor, self.rng),
            headers=self.auth,
            name="memory write",
            catch_response=True,
        ) as response:
            _expect(response, 201)

    @task(scenario.weight("audit list"))
    def audit_list(self) -> None:
        with self.client.get(
            scenario.AUDIT_EVENTS_PATH, headers=self.auth, name="audit list", catch_response=True
        ) as response:
            _expect(response, 200)

    def _read_policy(self, workload_id: str, environment: str) -> tuple[str, dict] | None:
        """The policy and its ETag, or None (counted as a failure)."""
        with self.client.get(
            scenario.policy_path(workload_id, environment),
            headers=self.auth,
            name="policy read",
            catch_response=True,
        ) as response:
            if not _expect(response, 200):
                return None
            etag = response.headers.get("ETag") if response.headers else None
            if not etag:
                response.failure("no ETag")
                return None
            return etag, response.json()["policy"]


def _expect(response: Any, status: int) -> bool:
    """Fail the request unless it answered ``status``; the failure names the error code, so
    that locust groups failures by cause."""
    if response.status_code == status:
        response.success()
        return True
    code = ""
    try:
        code = response.json()["error"]["code"]
    except Exception:  # not the JSON error shape: a connection error, a proxy page
        pass
    response.failure(f"{response.status_code} {code}".strip())
    return False


@events.quitting.add_listener
def _write_stats(environment: Environment, **kwargs: Any) -> None:
    path = os.environ.get("LOAD_STATS_JSON")
    if not path or environment.stats is None:
        return
    stats = environment.stats
    document = {
        "operations": {name: _figures(entry) for (name, _method), entry in stats.entries.items()},
        "total": _figures(stats.total),
        "conflicts": dict(conflicts),
        "errors": [
            {"operation": e.name, "error": str(e.error), "occurrences": e.occurrences}
            for e in stats.errors.values()
        ],
    }
    Path(path).write_text(json.dumps(document, indent=2) + "\n")


def _figures(entry: Any) -> dict[str, Any]:
    # locust keeps response times rounded: to the ms below 100 ms, to 10 ms below 1 s.
    return {
        "requests": entry.num_requests,
        "failures": entry.num_failures,
        "p50Ms": entry.get_response_time_percentile(0.5),
        "p95Ms": entry.get_response_time_percentile(0.95),
        "p99Ms": entry.get_response_time_percentile(0.99),
        "avgMs": round(entry.avg_response_time, 1),
        "maxMs": round(entry.max_response_time or 0),
        "requestsPerSecond": round(entry.total_rps, 2),
    }
