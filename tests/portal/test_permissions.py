"""The table of what each role may do (portal/permissions.py): a pure module."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from portal.permissions import (
    AGENT,
    AGENT_SCOPES,
    EDITOR,
    HOLDERS,
    OPERATOR,
    RANK,
    VIEWER,
    Permission,
    allows,
    binding_outside,
    holders,
    scopes_invalid,
)

ROLES = [AGENT, VIEWER, EDITOR, OPERATOR]
REQUIRED = [*RANK, *(p.value for p in Permission)]


class RoleTableTests:
    def test_an_agent_passes_no_rank_check(self):
        assert not any(allows(AGENT, rank) for rank in RANK)

    def test_an_agent_may_recall_write_memories_and_use_sessions_only(self):
        assert [p for p in Permission if allows(AGENT, p)] == [
            Permission.RECALL,
            Permission.MEMORY_CREATE,
            Permission.SESSION_USE,
            Permission.SESSION_READ,
        ]
        assert AGENT_SCOPES == ("recall", "memory.create", "session.use", "session.read")

    def test_a_viewer_may_not_recall_or_write_memories(self):
        assert not allows(VIEWER, Permission.RECALL)
        assert not allows(VIEWER, Permission.MEMORY_CREATE)
        assert allows(VIEWER, Permission.SESSION_READ)

    def test_an_agent_tokens_scopes_narrow_what_it_holds(self):
        assert allows(AGENT, Permission.RECALL, ["recall"])
        assert not allows(AGENT, Permission.MEMORY_CREATE, ["recall"])
        # scopes never add what the role does not hold
        assert not allows(VIEWER, Permission.RECALL, ["recall"])

    def test_holders_are_listed_agent_first_then_by_rank(self):
        assert holders("recall") == [AGENT, EDITOR, OPERATOR]

    def test_no_permission_is_spelled_like_a_role(self):
        assert not {p.value for p in Permission} & set(RANK)

    def test_unknown_scopes_and_people_s_roles_are_not_an_agents(self):
        assert scopes_invalid(["recall", "viewer", "policy.write"]) == ["viewer", "policy.write"]

    @given(st.sampled_from(ROLES), st.sampled_from(REQUIRED))
    def test_an_operator_may_do_whatever_any_role_may(self, role, required):
        if allows(role, required):
            assert allows(OPERATOR, required)

    @given(st.sampled_from([VIEWER, EDITOR, OPERATOR]), st.sampled_from(REQUIRED))
    def test_a_higher_rank_may_do_whatever_a_lower_one_may(self, role, required):
        higher = [r for r in RANK if RANK[r] >= RANK[role]]
        if allows(role, required):
            assert all(allows(r, required) for r in higher)

    def test_every_permission_an_agent_holds_an_editor_holds(self):
        assert all(EDITOR in HOLDERS[p] for p in Permission if AGENT in HOLDERS[p])


class BindingTests:
    def test_an_empty_binding_binds_nothing(self):
        assert (
            binding_outside(workloads=[], environments=[], workload_id="w", environment="e") == []
        )

    def test_a_call_outside_names_what_is_outside(self):
        outside = binding_outside(
            workloads=["a"], environments=["prod"], workload_id="b", environment="staging"
        )
        assert outside == ["workload", "environment"]

    def test_a_call_that_names_no_workload_is_within_any_binding(self):
        assert (
            binding_outside(
                workloads=["a"], environments=["prod"], workload_id=None, environment=None
            )
            == []
        )

    @given(
        st.lists(st.sampled_from("abc"), unique=True),
        st.lists(st.sampled_from(["dev", "prod"]), unique=True),
        st.sampled_from("abcd"),
        st.sampled_from(["dev", "prod", "staging"]),
    )
    def test_a_call_is_within_exactly_when_each_bound_axis_lists_it(
        self, workloads, environments, workload, environment
    ):
        within = (not workloads or workload in workloads) and (
            not environments or environment in environments
        )
        outside = binding_outside(
            workloads=workloads,
            environments=environments,
            workload_id=workload,
            environment=environment,
        )
        assert (outside == []) == within
