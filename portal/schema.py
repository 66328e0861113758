"""Teach drf-spectacular about our bearer-token authentication and our error responses."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers

from portal.api.errors import ErrorSerializer


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A workspace API token: `Authorization: Bearer crp_...`.",
        }


# The error responses an operation can answer besides its own, each in the one error shape.
# 400, 401, 403, 429 and 503 come from layers every operation passes through (the input
# guard and the parser, authentication, roles and CSRF, throttling, the database); the others
# depend on what the operation takes.
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer"},
        "description": "Seconds to wait before trying again.",
    }
}
ERROR_RESPONSES: dict[str, str] = {
    "400": "INVALID_REQUEST (`details.fields` names each offending field or parameter) or "
    "MALFORMED_REQUEST (the body is not JSON); nothing was done.",
    "401": "NOT_AUTHENTICATED or AUTHENTICATION_FAILED: send `Authorization: Bearer crp_...` "
    "with a live token; TOKEN_EXPIRED: the token expired, or this is a rotated token's "
    "previous secret after its grace (`details.expiredAt`).",
    "403": "PERMISSION_DENIED: the caller's role in the workspace may not do this "
    "(`details.requiredRole`, or `details.requiredPermission` and `details.allowedRoles`; an "
    "agent token without the scope: `details.requiredScope`), or a session call lacks its "
    "CSRF token; OUTSIDE_TOKEN_BINDING: the token is bound to other workloads or "
    "environments (`details.boundWorkloads`, `details.boundEnvironments`).",
    "404": "NOT_FOUND: no such resource in a workspace the caller can see (another "
    "workspace's are not revealed), or a page past the last.",
    "409": "The resource's current state does not allow this (`code` says why, e.g. "
    "WORKLOAD_ARCHIVED or VERSION_CONFLICT); nothing was changed.",
    "413": "REQUEST_TOO_LARGE: the body is over the upload limit.",
    "415": "UNSUPPORTED_MEDIA_TYPE: send the body as `application/json`.",
    "429": "THROTTLED: too many calls; try again after `Retry-After` seconds.",
    "503": "DATABASE_UNAVAILABLE: nothing was read or saved; try again after `Retry-After` "
    "seconds.",
}
_ALWAYS = ("400", "401", "403", "429", "503")
_WITH_RETRY_AFTER = ("429", "503")


# portal.input_guard refuses control characters (Unicode category Cc) in the path and in
# query parameters, where a value may hold a tab or a line break (a textarea's text).
NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f-\x9f]*$"
NO_CONTROL_CHARACTERS_BUT_TEXT = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]*$"
# Text in a body: DRF refuses NUL, and (unless blank is allowed) text that is only spaces.
NO_NUL = r"^[^\x00]*$"
NO_NUL_NOT_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, stating what the API checks:

    - the error responses each operation can answer: an operation's own
      ``extend_schema(responses=...)`` for a code wins (a 409 that names VERSION_CONFLICT,
      say); the rest are added here, so no view lists them by hand;
    - request bodies take no unknown fields (``additionalProperties: false``): every
      serializer and view refuses them, so a typo cannot drop data;
    - free-text path and query parameters hold no control characters (the input guard);
      text in a body holds no NUL, and is not only spaces unless it may be blank;
    - a body is required where a missing one is refused.
    """

    def _map_serializer(self, serializer: Any, direction: Any, bypass_extensions: bool = False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and schema.get("type") == "object":
            schema["additionalProperties"] = False
            # A serializer whose fields are all optional but that needs one (a PATCH).
            if getattr(serializer, "min_fields", None):
                schema["minProperties"] = serializer.min_fields
        return schema

    def _get_request_for_media_type(self, serializer: Any, direction: Any = "request"):
        schema, required = super()._get_request_for_media_type(serializer, direction)
        if isinstance(serializer, dict):
            # A raw schema: a body is needed when every form of it has required keys.
            required = required or all(
                "required" in form for form in serializer.get("oneOf", [serializer])
            )
        elif isinstance(serializer, PolymorphicProxySerializer):
            # One of several serializers: a body is needed when each has a required field.
            forms = [force_instance(form) for form in serializer.serializers]
            required = all(any(f.required for f in form.fields.values()) for form in forms)
        elif getattr(serializer, "min_fields", None):
            required = True
        return schema, required

    def _map_serializer_field(self, field: Any, direction: Any, bypass_extensions: bool = False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        # A RegexField states its own pattern (its validator's, added after this).
        regex = isinstance(field, serializers.RegexField)
        if direction == "request" and isinstance(field, serializers.CharField) and not regex:
            if schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(schema):
                # DRF refuses NUL in text, and strips it before checking it is not blank.
                blank_allowed = field.allow_blank or not field.trim_whitespace
                schema["pattern"] = NO_NUL if blank_allowed else NO_NUL_NOT_BLANK
        if schema.get("type") == "array":
            # A nested many=True serializer's bounds (drf-spectacular states a ListField's).
            for bound, keyword in (("min_length", "minItems"), ("max_length", "maxItems")):
                if getattr(field, bound, None) is not None:
                    schema.setdefault(keyword, getattr(field, bound))
        return schema

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        super()._insert_field_validators(field, schema)
        # drf-spectacular offers a blank text as a second form ({"maxLength": 0}) beside a
        # pattern; where the pattern takes a blank text too (NO_NUL), "" matched both forms
        # and so neither of oneOf's: one form states it.
        forms = schema.get("oneOf")
        if forms and len(forms) == 2 and forms[1] == {"type": "string", "maxLength": 0}:
            inner = forms[0]
            blank_too = not {"format", "enum"} & set(inner) and not inner.get("minLength")
            if blank_too and re.fullmatch(inner.get("pattern", ""), ""):
                del schema["oneOf"]
                schema.update(inner)

    def _get_parameters(self) -> list[dict[str, Any]]:
        parameters = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            free_text = schema.get("type") == "string" and not {"enum", "format", "pattern"} & set(
                schema
            )
            if free_text and parameter["in"] in ("path", "query"):
                schema["pattern"] = (
                    NO_CONTROL_CHARACTERS
                    if parameter["in"] == "path"
                    else NO_CONTROL_CHARACTERS_BUT_TEXT
                )
        return parameters

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self.error_codes():
            if code in responses:
                continue
            response = self._get_response_for_code(
                OpenApiResponse(ErrorSerializer, description=ERROR_RESPONSES[code]),
                code,
                direction=direction,
            )
            if code in _WITH_RETRY_AFTER:
                response["headers"] = {**response.get("headers", {}), **_RETRY_AFTER}
            responses[code] = response
        return responses

    def error_codes(self) -> list[str]:
        codes = list(_ALWAYS)
        parameters = {getattr(p, "name", None) for p in self.get_override_parameters()}
        if "{" in self.path or "workspace" in parameters or self._is_list_view():
            codes.append("404")
        if self.method != "GET":
            codes.append("409")
            # drf-spectacular reads request bodies of these methods alone (no guessing else).
            takes_body = self.method in ("POST", "PUT", "PATCH")
            if takes_body and self.get_request_serializer() is not None:
                codes += ["413", "415"]
        return sorted(codes)
