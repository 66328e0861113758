from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.services import api_token_create
from portal.errors import DomainError
from portal.models import Role, Workspace


class Command(BaseCommand):
    help = "Issue an API token for a workspace. The token is printed alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", required=True, help="Workspace slug")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--name", default="cli", help="A label for the token (default: cli)")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Revoke earlier live tokens with the same name first",
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
            )
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.details}") from exc
        self.stderr.write(
            f"Token {token.name!r} ({token.role}) for workspace {workspace.slug}; "
            "it is shown only now:"
        )
        self.stdout.write(raw)
