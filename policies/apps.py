from __future__ import annotations

from django.apps import AppConfig

# HTTP status per policy-algebra error code (the algebra itself knows nothing of HTTP): a
# malformed policy is a 400; a well-formed one that breaks a rule across its axes (a budget
# the planner cannot honour, a workload wider than the floor) is a 422.
POLICY_ERROR_STATUS = {
    "INVALID_POLICY": 400,
    "BUDGET_NOT_HONOURABLE": 422,
    "WORKLOAD_RELAXES_OPERATOR_FLOOR": 422,
    "USER_OVERRIDE_NOT_PERMITTED": 403,
}


class PoliciesConfig(AppConfig):
    name = "policies"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from policies.algebra import PolicyError
        from portal.errors import coded_error_register

        coded_error_register(PolicyError, POLICY_ERROR_STATUS)
        # The audit pages show policies' events through policies' presenters.
        from policies import events  # noqa: F401
