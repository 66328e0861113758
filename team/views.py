"""Settings → Tokens and members: the workspace's API tokens (issue, rotate, revoke) and its
members (add, change a role, remove), for its operators only (others: 403).

One page; every form posts to its own URL and, with htmx, gets the page's body back in
place. A token's secret is shown in the answer to the post that made it (an issue, a
rotation) and never again: that answer is not a redirect (the secret would travel through
the session's messages) and is marked ``no-store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from policies.models import Workload
from portal.errors import DomainError
from portal.form_errors import add_domain_error
from portal.http import HtmxHttpRequest
from portal.models import ApiToken, Membership, Role
from portal.pages import PageAccess, workspace_page
from portal.tokens import token_last_used
from team import selectors, services
from team.forms import (
    SCOPE_WORDS,
    TOKEN_ALIASES,
    MemberAddForm,
    MemberRoleForm,
    TokenIssueForm,
    TokenRotateForm,
)

UNPROCESSABLE = 422
# The sections of the page an answer is about (their ids): where its notice goes.
TOKENS, ISSUE, MEMBERS, ADD_MEMBER = "tokens", "issue", "members", "add-member"


@dataclass(frozen=True)
class Made:
    """A secret just made, to show once."""

    token: ApiToken
    secret: str
    action: str  # "issued" or "rotated"


@login_required
@require_http_methods(["GET", "POST"])
def access(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The page; a post issues a token."""
    page = workspace_page(request, slug, required=Role.OPERATOR)
    form = TokenIssueForm(
        request.POST if request.method == "POST" else None, workspace=page.workspace
    )
    if request.method != "POST":
        return _page(request, page, issue_form=form)
    if form.is_valid():
        try:
            token, raw = services.api_token_create(
                workspace=page.workspace, author=page.caller.label, **form.grant()
            )
        except DomainError as exc:
            add_domain_error(form, exc, aliases=TOKEN_ALIASES)
        else:
            made = Made(token, raw, "issued")
            return _page(request, page, made=made)
    return _page(request, page, issue_form=form, at=ISSUE, status=UNPROCESSABLE)


@login_required
@require_POST
def token_rotate(request: HtmxHttpRequest, slug: str, token_id: int) -> HttpResponse:
    page = workspace_page(request, slug, required=Role.OPERATOR)
    token = _token(page, token_id)
    form = TokenRotateForm(request.POST)
    if not form.is_valid():
        return _page(request, page, problem=_first_error(form), at=TOKENS, status=UNPROCESSABLE)
    try:
        token, raw = services.api_token_rotate(
            token=token,
            grace=timedelta(seconds=form.cleaned_data["grace"]),
            author=page.caller.label,
        )
    except DomainError as exc:
        return _page(request, page, problem=exc.message, at=TOKENS, status=exc.status)
    return _page(request, page, made=Made(token, raw, "rotated"))


@login_required
@require_POST
def token_revoke(request: HtmxHttpRequest, slug: str, token_id: int) -> HttpResponse:
    page = workspace_page(request, slug, required=Role.OPERATOR)
    token = _token(page, token_id)
    services.api_token_revoke(token=token, author=page.caller.label)
    return _done(request, page, f"Revoked token {token.name!r}: its next call is refused.", TOKENS)


@login_required
@require_POST
def member_add(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    page = workspace_page(request, slug, required=Role.OPERATOR)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            membership = services.membership_add(
                workspace=page.workspace, author=page.caller.label, **form.cleaned_data
            )
        except DomainError as exc:
            add_domain_error(form, exc)
        else:
            added = f"Added {membership.user.get_username()} as {membership.role}."
            return _done(request, page, added, MEMBERS)
    return _page(request, page, member_form=form, at=ADD_MEMBER, status=UNPROCESSABLE)


@login_required
@require_POST
def member_role(request: HtmxHttpRequest, slug: str, member_id: int) -> HttpResponse:
    page = workspace_page(request, slug, required=Role.OPERATOR)
    membership = _membership(page, member_id)
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        return _page(request, page, problem=_first_error(form), at=MEMBERS, status=UNPROCESSABLE)
    try:
        membership = services.membership_role_change(
            membership=membership, role=form.cleaned_data["role"], author=page.caller.label
        )
    except DomainError as exc:
        return _page(request, page, problem=exc.message, at=MEMBERS, status=exc.status)
    changed = f"{membership.user.get_username()} is {membership.role} now."
    return _done(request, page, changed, MEMBERS)


@login_required
@require_POST
def member_remove(request: HtmxHttpRequest, slug: str, member_id: int) -> HttpResponse:
    page = workspace_page(request, slug, required=Role.OPERATOR)
    membership = _membership(page, member_id)
    try:
        services.membership_remove(membership=membership, author=page.caller.label)
    except DomainError as exc:
        return _page(request, page, problem=exc.message, at=MEMBERS, status=exc.status)
    removed = f"Removed {membership.user.get_username()} from the workspace."
    return _done(request, page, removed, MEMBERS)


def _token(page: PageAccess, token_id: int) -> ApiToken:
    token = selectors.api_tokens(workspace=page.workspace).filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    return token


def _membership(page: PageAccess, member_id: int) -> Membership:
    membership = selectors.members(workspace=page.workspace).filter(pk=member_id).first()
    if membership is None:
        raise Http404("No such member.")
    return membership


def _first_error(form: Any) -> str:
    return next(iter(error for errors in form.errors.values() for error in errors), "")


def _done(request: HtmxHttpRequest, page: PageAccess, message: str, at: str) -> HttpResponse:
    """A change made (no secret in it): the body again in place (htmx), saying what was done
    in the section ``at``, else the page after a redirect, saying it at the top."""
    if request.htmx:
        return _page(request, page, done=message, at=at)
    messages.success(request, message)
    return redirect("team:access", slug=page.workspace.slug)


def _page(
    request: HtmxHttpRequest,
    page: PageAccess,
    *,
    issue_form: TokenIssueForm | None = None,
    member_form: MemberAddForm | None = None,
    made: Made | None = None,
    problem: str = "",
    done: str = "",
    at: str = TOKENS,
    status: int = 200,
) -> HttpResponse:
    """The page (or its body, for htmx) as it is now. ``problem`` or ``done`` is said in the
    section ``at`` (with htmx; at the top otherwise), and htmx scrolls to what the answer is
    about: a secret just made, else that section."""
    workspace = page.workspace
    tokens = list(selectors.api_tokens(workspace=workspace))
    names = dict(
        Workload.objects.filter(workspace=workspace).values_list("pk", "name")
    )  # archived ones too: a binding may name one
    rows = [_token_row(token, names) for token in tokens]
    context = {
        **page.context(),
        "tokens": rows,
        "live_count": sum(1 for row in rows if row["status"] != selectors.REVOKED),
        "members": list(selectors.members(workspace=workspace)),
        "issue_form": issue_form or TokenIssueForm(workspace=workspace),
        "member_form": member_form or MemberAddForm(),
        "rotate_form": TokenRotateForm(),
        "role_choices": services.MEMBER_ROLE_VALUES,
        "made": made,
        "problem": problem,
        "done": done,
        "notice_at": at if request.htmx else "top",
        "me": request.user.get_username(),
    }
    template = "team/_access_body.html" if request.htmx else "team/access.html"
    response = render(request, template, context, status=status)
    if made is not None:
        response["Cache-Control"] = "no-store"
    if request.htmx:
        # The body is swapped whole: show what the answer is about, where the click was.
        response["HX-Reswap"] = f"outerHTML show:#{'access-body' if made else at}:top"
    return response


def _token_row(token: ApiToken, names: dict[Any, str]) -> dict[str, Any]:
    return {
        "token": token,
        "status": selectors.token_status(token),
        "last_used": token_last_used(token),
        "previous_live": selectors.token_previous_live(token),
        "scopes": [SCOPE_WORDS.get(scope, scope) for scope in token.scopes],
        "workloads": [names.get(pk, str(pk)) for pk in token.bound_workloads],
        "environments": list(token.bound_environments),
    }
