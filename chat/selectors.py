"""Reads of sessions, their turns and their assembled contexts, for the API and the pages."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from chat.filtersets import SessionFilterSet
from chat.models import Session, Turn, TurnContext
from portal.errors import NotFoundError, ValidationFailed
from portal.models import Workspace


def session_list(*, workspace: Workspace, filters: Any) -> QuerySet[Session]:
    """The workspace's sessions narrowed by ``filters`` (a QueryDict), newest first; bad
    filters are a 400."""
    filterset = SessionFilterSet(
        filters,
        queryset=Session.objects.filter(workspace=workspace).select_related("actor", "workload"),
    )
    if not filterset.is_valid():
        raise ValidationFailed(
            {field: " ".join(errors) for field, errors in filterset.errors.items()},
            "The session filters are not valid.",
        )
    return filterset.qs.order_by("-id")


def session_turn(*, session: Session, index: Any) -> tuple[Turn, TurnContext | None]:
    """Turn ``index`` of the session and the context assembled for it (None for a turn that
    was not the user's last of its call), or 404."""
    # A turn index is a PostgreSQL integer: a larger number names no turn.
    number = index if isinstance(index, int) and 0 < index < 2**31 else None
    turn = session.turns.filter(index=number).first() if number is not None else None
    if turn is None:
        raise NotFoundError(
            f"Session {session.pk} has no turn {index}; it has {session.turn_count}.",
            {"turnCount": session.turn_count},
        )
    return turn, session.contexts.filter(turn=turn.index).first()


def session_contexts(*, session: Session) -> QuerySet[TurnContext]:
    """The session's assembled contexts, in turn order, without their prompts."""
    return session.contexts.defer("prompt").order_by("turn")
