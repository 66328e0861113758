from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_date, parse_datetime

from policies.models import Workload
from portal.errors import DomainError
from portal.models import Role, Workspace
from portal.permissions import AGENT_SCOPES
from team.services import api_token_create


class Command(BaseCommand):
    help = (
        "Issue an API token for a workspace. The token is printed alone on the last line. "
        "An agent token (--role agent) may be given scopes and bound to workloads and "
        "environments; any token may expire."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace slug")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--name", default="cli", help="A label for the token (default: cli)")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Revoke earlier live tokens with the same name first",
        )
        parser.add_argument(
            "--scope",
            action="append",
            choices=AGENT_SCOPES,
            help="An agent token's scope (repeat for several; default: all of them)",
        )
        parser.add_argument(
            "--workload",
            action="append",
            default=[],
            help="Bind an agent token to this workload, by name or id (repeat for several)",
        )
        parser.add_argument(
            "--environment",
            action="append",
            default=[],
            help="Bind an agent token to this environment (repeat for several)",
        )
        parser.add_argument(
            "--expires",
            help="When the token stops working: an ISO 8601 date (its start, UTC) or time",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {options['workspace']!r}.")
        try:
            token, raw = api_token_create(
                workspace=workspace,
                name=options["name"],
                role=options["role"],
                replace=options["replace"],
                scopes=options["scope"],
                workloads=[_workload(workspace, w) for w in options["workload"]],
                environments=options["environment"],
                expires_at=_expiry(options["expires"]),
            )
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.details}") from exc
        self.stderr.write(
            f"Token {token.name!r} ({token.role}) for workspace {workspace.slug}; "
            "it is shown only now:"
        )
        self.stdout.write(raw)


def _workload(workspace: Workspace, given: str) -> Any:
    """A workload's id, from its name (a live workload's) or its id as given."""
    found = Workload.objects.filter(workspace=workspace, name=given, archived_at__isnull=True)
    workload = found.first()
    return workload.pk if workload is not None else given


def _expiry(given: str | None) -> datetime | None:
    if not given:
        return None
    try:
        moment = parse_datetime(given)
        day = parse_date(given) if moment is None else None
    except ValueError:
        moment = day = None
    if moment is None:
        if day is None:
            raise CommandError(f"--expires {given!r}: write a date (2027-01-31) or a time.")
        moment = datetime.combine(day, time(0), tzinfo=UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
