"""What a policy change would take out of recall: memories counted under pairs of policies.

The floor page's impact preview (``policies.impact.floor_change_impact``) asks, per workload
and environment, how many memories its current effective policy lets through and how many of
those the proposed one would stop. Counting memories is recall's (the filter is compiled here,
``policy_filter``); ``recall.apps`` registers :func:`memory_policy_impact` with
``policies.impact`` at start-up, since policies sits below recall and imports nothing from it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from policies import algebra
from policies.axes import PolicyDocument
from policies.impact import Pairs
from portal.canonical import canonical_json
from portal.models import Workspace
from recall.engine.funnel_cache import TABLE
from recall.engine.policy_filter import compile_policy_filter, policy_filter_sql, policy_params

_ADMITTED = policy_filter_sql("admitted")


def memory_policy_impact(
    *, workspace: Workspace, pairs: Pairs, now: datetime
) -> list[tuple[int, int]]:
    """Per (current, proposed) effective policy: rows recallable now, and rows it would drop.

    One query over the workspace's memories, whatever the number of pairs, with a select list
    of fixed width (PostgreSQL caps a target list at 1664 entries): each distinct policy is one
    boolean, evaluated once per memory into an array; memories are grouped by that array (a
    handful of distinct patterns), and the pairs, a list of (before, after) array positions,
    are joined to the groups and summed with ``GROUP BY``. Only the policy's axes differ
    between policies: the rules no policy changes filter the rows once.
    """
    if not pairs:
        return []
    index: dict[str, int] = {}
    clauses: list[str] = []
    # the rules no policy changes bind ``now`` and ``model`` alone: any policy's values do
    params: dict[str, Any] = {"workspace": workspace.pk, **policy_params(pairs[0][0], now)}

    def position(policy: PolicyDocument) -> int:
        """The policy's 1-based position in the ``ok`` array (SQL arrays start at 1)."""
        key = canonical_json(algebra.canonical_policy(policy))
        if key not in index:
            sql, more = compile_policy_filter(policy, now, part="axes", suffix=f"_p{len(clauses)}")
            clauses.append(sql)
            params.update(more)
            index[key] = len(clauses)
        return index[key]

    params["before"] = [position(current) for current, _ in pairs]
    params["after"] = [position(proposed) for _, proposed in pairs]
    sql = f"""
WITH patterns AS (
    SELECT ARRAY[{", ".join(clauses)}] AS ok, count(*) AS n
    FROM {TABLE} m
    WHERE m.workspace_id = %(workspace)s AND {_ADMITTED}
    GROUP BY 1
)
SELECT
    coalesce(sum(s.n) FILTER (WHERE s.ok[p.b]), 0)::bigint,
    coalesce(sum(s.n) FILTER (WHERE s.ok[p.b] AND NOT s.ok[p.a]), 0)::bigint
FROM unnest(%(before)s::int[], %(after)s::int[]) WITH ORDINALITY AS p(b, a, i)
LEFT JOIN patterns s ON true
GROUP BY p.i
ORDER BY p.i
"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(int(now_count), int(stop)) for now_count, stop in cursor.fetchall()]
