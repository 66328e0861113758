"""The workspace's API tokens and members, for its operators."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.access import workspace_for
from portal.api.errors import ErrorSerializer
from portal.api.views import ApiView, json_object, json_object_or_empty
from portal.models import Role, Workspace
from team import selectors, services
from team.api.serializers import (
    MemberAddSerializer,
    MemberRoleSerializer,
    MemberSerializer,
    TokenIssueSerializer,
    TokenRotateSerializer,
    TokenSecretSerializer,
    TokenSerializer,
)

NO_STORE = {"Cache-Control": "no-store"}  # an answer that carries a secret is kept nowhere


class _OperatorView(ApiView):
    def workspace(self, request: Request, slug: str) -> Workspace:
        return workspace_for(self.caller(request), slug, required=Role.OPERATOR)


class TokenListView(_OperatorView):
    @extend_schema(
        responses=TokenSerializer(many=True),
        summary="The workspace's API tokens (never their secrets); operators only",
        description="Live tokens first, newest first, then the revoked ones. `lastUsedAt` is "
        "written in batches, up to TOKEN_LAST_USED_SECONDS behind.",
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = self.workspace(request, slug)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.api_tokens(workspace=workspace), request, view=self
        )
        return paginator.get_paginated_response(TokenSerializer(page, many=True).data)

    @extend_schema(
        request=TokenIssueSerializer,
        responses={
            201: TokenSecretSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="TOKEN_NAME_TAKEN: a live token of the workspace has this name.",
            ),
            422: OpenApiResponse(
                ErrorSerializer,
                description="TOKEN_GRANT_INVALID: values that do not go together (scopes or "
                "a binding for a role other than agent, an expiry not in the future) or name "
                "what the workspace does not have (a workload not live in it, an environment "
                "it has not); `details.fields` names each.",
            ),
        },
        summary="Issue an API token (its secret in the answer, once); operators only",
        description="Records a token.issued event (name, role, scopes, binding, expiry, "
        "limits and the secret's first characters, never the secret).",
    )
    def post(self, request: Request, slug: str) -> Response:
        workspace = self.workspace(request, slug)
        serializer = TokenIssueSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        token, raw = services.api_token_create(
            workspace=workspace, author=self.caller(request).label, **serializer.grant()
        )
        body = TokenSecretSerializer(token, context={"secret": raw}).data
        return Response(body, status=status.HTTP_201_CREATED, headers=NO_STORE)


class TokenDetailView(_OperatorView):
    @extend_schema(responses=TokenSerializer, summary="One API token; operators only")
    def get(self, request: Request, slug: str, token_id: int) -> Response:
        workspace = self.workspace(request, slug)
        token = selectors.api_token_get(workspace=workspace, token_id=token_id)
        return Response(TokenSerializer(token).data)


class TokenRotateView(_OperatorView):
    @extend_schema(
        request=TokenRotateSerializer,
        responses={
            200: TokenSecretSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="TOKEN_NOT_ACTIVE: the token is revoked or expired.",
            ),
        },
        summary="Give a token a new secret (in the answer, once); operators only",
        description="The current secret keeps working for `graceSeconds` (default 0), then "
        "is refused with 401 TOKEN_EXPIRED. A secret still in an earlier rotation's grace "
        "stops at once. Records a token.rotated event.",
    )
    def post(self, request: Request, slug: str, token_id: int) -> Response:
        workspace = self.workspace(request, slug)
        token = selectors.api_token_get(workspace=workspace, token_id=token_id)
        serializer = TokenRotateSerializer(data=json_object_or_empty(request))
        serializer.is_valid(raise_exception=True)
        grace = timedelta(seconds=serializer.validated_data.get("graceSeconds", 0))
        token, raw = services.api_token_rotate(
            token=token, grace=grace, author=self.caller(request).label
        )
        body = TokenSecretSerializer(token, context={"secret": raw}).data
        return Response(body, headers=NO_STORE)


class TokenRevokeView(_OperatorView):
    @extend_schema(
        request=None,
        responses=TokenSerializer,
        summary="Revoke a token: refused from its next call on; operators only",
        description="Both its secrets, during a rotation's grace. Records a token.revoked "
        "event; revoking a revoked token changes nothing.",
    )
    def post(self, request: Request, slug: str, token_id: int) -> Response:
        workspace = self.workspace(request, slug)
        token = selectors.api_token_get(workspace=workspace, token_id=token_id)
        token = services.api_token_revoke(token=token, author=self.caller(request).label)
        return Response(TokenSerializer(token).data)


class MemberListView(_OperatorView):
    @extend_schema(
        responses=MemberSerializer(many=True),
        summary="The workspace's members and their roles; operators only",
    )
    def get(self, request: Request, slug: str) -> Response:
        workspace = self.workspace(request, slug)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.members(workspace=workspace), request, view=self
        )
        return paginator.get_paginated_response(MemberSerializer(page, many=True).data)

    @extend_schema(
        request=MemberAddSerializer,
        responses={
            201: MemberSerializer,
            409: OpenApiResponse(
                ErrorSerializer, description="MEMBER_EXISTS: the user is a member already."
            ),
        },
        summary="Add an existing user to the workspace with a role; operators only",
        description="404 NOT_FOUND when no user has that username. Records a member.added event.",
    )
    def post(self, request: Request, slug: str) -> Response:
        workspace = self.workspace(request, slug)
        serializer = MemberAddSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        membership = services.membership_add(
            workspace=workspace, author=self.caller(request).label, **serializer.validated_data
        )
        return Response(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


_LAST_OPERATOR = OpenApiResponse(
    ErrorSerializer,
    description="LAST_OPERATOR: the member is the workspace's last operator; make someone "
    "else an operator first.",
)


class MemberDetailView(_OperatorView):
    @extend_schema(
        request=MemberRoleSerializer,
        responses={200: MemberSerializer, 409: _LAST_OPERATOR},
        summary="Change a member's role; operators only",
        description="Records a member.role_changed event (none when the role is the same).",
    )
    def patch(self, request: Request, slug: str, username: str) -> Response:
        workspace = self.workspace(request, slug)
        membership = selectors.member_get(workspace=workspace, username=username)
        serializer = MemberRoleSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        membership = services.membership_role_change(
            membership=membership,
            role=serializer.validated_data["role"],
            author=self.caller(request).label,
        )
        return Response(MemberSerializer(membership).data)

    @extend_schema(
        responses={204: None, 409: _LAST_OPERATOR},
        summary="Remove a member from the workspace; operators only",
        description="Records a member.removed event. The user's account stays.",
    )
    def delete(self, request: Request, slug: str, username: str) -> Response:
        workspace = self.workspace(request, slug)
        membership = selectors.member_get(workspace=workspace, username=username)
        services.membership_remove(membership=membership, author=self.caller(request).label)
        return Response(status=status.HTTP_204_NO_CONTENT)
