from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from console import agent_tools, mcp_server


class Command(BaseCommand):
    help = (
        "Serve the MCP server (tools recall, remember, assemble_context) for an agent's API "
        "token: over stdio, or over streamable HTTP at http://HOST:PORT/mcp with --http PORT "
        "(where each request may send its own token as Authorization: Bearer)."
    )
    # stdout is the protocol's channel over stdio: the checks' output must not reach it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--token",
            default=None,
            help="The API token the tools act with (default: the CRP_TOKEN variable); "
            "an agent token, bound to its workloads and environments, is the one to give",
        )
        parser.add_argument(
            "--http", type=int, metavar="PORT", help="Serve streamable HTTP on this port"
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="The address to serve HTTP on (127.0.0.1)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = options["token"] or os.environ.get("CRP_TOKEN") or None
        http = options["http"]
        if token is None and http is None:
            raise CommandError(agent_tools.NO_TOKEN)
        who = ""
        if token is not None:
            # Refused at start, as the API would refuse its first call (revoked, expired...).
            try:
                who = agent_tools.token_label(token)
            except agent_tools.ToolRefused as refused:
                raise CommandError(refused.body["error"]["message"]) from None
            finally:
                connections.close_all()  # the tools' thread opens its own
        server = mcp_server.build(token=token, host=options["host"], port=http or 8765)
        if http is None:
            self.stderr.write(f"MCP server on stdio, acting as {who}.")
            server.run("stdio")
            return
        acting = (
            f"acting as {who} unless a request sends its own token"
            if token
            else ("each request acting with the token it sends")
        )
        self.stderr.write(f"MCP server at http://{options['host']}:{http}/mcp, {acting}.")
        server.run("streamable-http")
