"""The summarizers a compaction run calls: the built-in extractive one and any OpenAI-compatible
chat-completions service, as ``COMPACTION_SERVICES`` names them (``service_config``).

A summarizer turns a chunk of turns into one summary's text, or raises ``SummarizerError``
(a code, a message that quotes no content, and whether the run's time budget cut it short).
Turn content is personal data: the ``openai`` kind sends it to the service configured (the
operator's choice, documented); nothing here logs it or puts it in an error.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chat.compaction.rules import TurnText, extractive_summary, summary_heading
from chat.compaction.service_config import ServiceConfig, ServiceConfigError, parse_services
from recall.runtime import token_estimator

# The instructions an ``openai`` service is given, before the turns (``transcript``).
SYSTEM_PROMPT = (
    "You compact a conversation between a user and an assistant so that it fits a smaller "
    "context window. Summarise the turns you are given in a few plain sentences: keep facts, "
    "decisions, names, numbers, open questions and what the user asked for; drop greetings "
    "and repetition. Do not invent anything that the turns do not say. Answer with the "
    "summary only."
)


class SummarizerError(Exception):
    """A summary that could not be made: ``code``, ``message`` (no content), and
    ``budget`` when the run's time budget, not the service's own timeout, cut it short."""

    def __init__(self, code: str, message: str, *, budget: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.budget = budget


class Summarizer(Protocol):
    config: ServiceConfig

    def summarize(self, chunk: Sequence[TurnText], *, remaining_seconds: float) -> str:
        """The chunk's summary; within ``remaining_seconds`` of the run's time budget."""
        ...


class ExtractiveSummarizer:
    """Sentences of the turns, selected and shortened (``rules.extractive_summary``)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config

    def summarize(self, chunk: Sequence[TurnText], *, remaining_seconds: float) -> str:
        return extractive_summary(
            chunk, max_tokens=self.config.max_tokens, estimator=token_estimator()
        )


def transcript(chunk: Sequence[TurnText]) -> str:
    """The turns as the ``openai`` kind sends them: a heading naming them, one ``role:
    content`` block per turn."""
    lines = [summary_heading(chunk)]
    lines += [f"{turn.role}: {turn.content}" for turn in chunk]
    return "\n\n".join(lines)


class OpenAISummarizer:
    """``POST {base_url}/chat/completions`` with the system prompt above and the transcript;
    the summary is the first choice's message. Deterministic where the service allows
    (temperature 0)."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config

    def request_body(self, chunk: Sequence[TurnText]) -> dict[str, Any]:
        return {
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": transcript(chunk)},
            ],
            "max_tokens": self.config.max_tokens,
            "temperature": 0,
        }

    def summarize(self, chunk: Sequence[TurnText], *, remaining_seconds: float) -> str:
        config = self.config
        key = os.environ.get(config.api_key_env, "")
        if not key:
            raise SummarizerError(
                "SUMMARIZER_KEY_MISSING",
                f"The environment variable {config.api_key_env}, which holds the key of the "
                f"compaction service {config.name!r}, is not set in this process.",
            )
        by_budget = remaining_seconds < config.timeout_seconds
        timeout = max(0.001, min(config.timeout_seconds, remaining_seconds))
        try:
            response = httpx.post(
                f"{config.base_url}/chat/completions",
                json=self.request_body(chunk),
                headers={"Authorization": f"Bearer {key}"},
                timeout=timeout,
            )
        except httpx.TimeoutException:
            if by_budget:
                raise SummarizerError(
                    "TIME_BUDGET_EXHAUSTED",
                    f"The compaction service {config.name!r} had not answered when the run's "
                    "time budget ran out.",
                    budget=True,
                ) from None
            raise SummarizerError(
                "SUMMARIZER_TIMEOUT",
                f"The compaction service {config.name!r} did not answer within "
                f"{config.timeout_seconds:g} s.",
            ) from None
        except httpx.HTTPError as exc:
            raise SummarizerError(
                "SUMMARIZER_UNREACHABLE",
                f"The compaction service {config.name!r} could not be reached "
                f"({type(exc).__name__}).",
            ) from None
        if response.status_code >= 400:
            # The body is not quoted: a service may echo the turns back.
            raise SummarizerError(
                "SUMMARIZER_HTTP_ERROR",
                f"The compaction service {config.name!r} answered HTTP {response.status_code}.",
            )
        return _summary_of(response, config.name)


def _summary_of(response: httpx.Response, name: str) -> str:
    try:
        text = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = None
    if not isinstance(text, str) or not text.strip():
        raise SummarizerError(
            "SUMMARIZER_BAD_ANSWER",
            f"The compaction service {name!r} answered without a chat-completions message.",
        )
    return text.strip()


KIND_CLASSES: dict[str, type[ExtractiveSummarizer] | type[OpenAISummarizer]] = {
    "extractive": ExtractiveSummarizer,
    "openai": OpenAISummarizer,
}


def services_check() -> dict[str, ServiceConfig]:
    """``COMPACTION_SERVICES``, parsed; a malformed entry is ``ImproperlyConfigured`` (at
    start-up: ``ChatConfig.ready``)."""
    try:
        return parse_services(settings.COMPACTION_SERVICES)
    except ServiceConfigError as exc:
        raise ImproperlyConfigured(f"COMPACTION_SERVICES: {exc}.") from None


def service_names() -> list[str]:
    return sorted(settings.COMPACTION_SERVICES)


def service_config(name: str) -> ServiceConfig | None:
    """The service ``name`` of the settings, or None (checked at start-up: an entry parses)."""
    entry = settings.COMPACTION_SERVICES.get(name)
    if entry is None:
        return None
    return parse_services({name: entry})[name]


def summarizer_for(name: str) -> Summarizer:
    """The summarizer of service ``name``; one the settings no longer name is an error the
    run records."""
    config = service_config(name)
    if config is None:
        raise SummarizerError(
            "UNKNOWN_SERVICE",
            f"No compaction service {name!r} in COMPACTION_SERVICES; it has "
            f"{', '.join(service_names())}.",
        )
    return KIND_CLASSES[config.kind](config)
