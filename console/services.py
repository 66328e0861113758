"""Tokens are issued and revoked by ``team.services``; these names stay importable here, where
the command line's services were first written."""

from __future__ import annotations

from team.services import api_token_create, api_token_revoke

__all__ = ["api_token_create", "api_token_revoke"]
