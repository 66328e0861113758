"""The summarizers: the built-in extractive one (deterministic, offline, not a language model)
and the ``openai`` kind against a real HTTP server speaking chat-completions, started by the
test: a good answer, a timeout, a 500, a run's time budget running out; and
``COMPACTION_SERVICES`` checked at start-up, an unknown service refused at save."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings as django_settings

from chat.compaction.rules import TurnText
from chat.compaction.service_config import (
    DEFAULT_SERVICE,
    ServiceConfig,
    ServiceConfigError,
    parse_services,
)
from chat.compaction.summarizers import (
    SYSTEM_PROMPT,
    ExtractiveSummarizer,
    OpenAISummarizer,
    SummarizerError,
    service_config,
    summarizer_for,
)
from chat.models import Session, Turn
from recall.models import MemoryRecord
from tests.chat.compaction_support import compacting, start, talk_until_compacted
from tests.chat.completions_server import ERROR_BODY, KEY, KEY_ENV, completions_server
from tests.chat.helpers import roomy_floor

CHUNK = [
    TurnText(1, "user", "When does the release train leave? I need the notes.", 13),
    TurnText(2, "assistant", "It leaves on Friday. Ada owns the notes for the owners.", 14),
]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


class ExtractiveSummarizerTests:
    def test_it_is_the_default_service_and_says_it_is_no_language_model(self):
        config = service_config(DEFAULT_SERVICE)

        assert config.kind == "extractive"
        assert "not a language model" in config.label

    def test_the_same_turns_give_the_same_summary(self):
        summarizer = ExtractiveSummarizer(ServiceConfig(name="x", kind="extractive"))

        first = summarizer.summarize(CHUNK, remaining_seconds=1)

        assert first == summarizer.summarize(list(CHUNK), remaining_seconds=1)
        assert first == (
            "Earlier in this conversation (turns 1-2): user: When does the release train "
            "leave? assistant: Ada owns the notes for the owners."
        )


class OpenAISummarizerTests:
    def test_a_good_answer_is_the_summary_and_the_request_is_chat_completions(self, key):
        with completions_server("Ada owns the Friday release notes.") as server:
            summary = OpenAISummarizer(server.service(max_tokens=120)).summarize(
                CHUNK, remaining_seconds=10
            )

        assert summary == "Ada owns the Friday release notes."
        (request,) = server.received
        assert request.path == "/v1/chat/completions"
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        body = request.body
        assert (body["model"], body["max_tokens"], body["temperature"]) == (
            "summary-model", 120, 0,
        )  # fmt: skip
        assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert body["messages"][1]["role"] == "user"
        assert "assistant: It leaves on Friday." in body["messages"][1]["content"]

    def test_a_timeout_is_an_error_naming_the_service(self, key):
        with completions_server(("sleep", 2)) as server:
            with pytest.raises(SummarizerError) as caught:
                OpenAISummarizer(server.service(timeout_seconds=0.3)).summarize(
                    CHUNK, remaining_seconds=10
                )

        assert (caught.value.code, caught.value.budget) == ("SUMMARIZER_TIMEOUT", False)
        assert "'llm' did not answer within 0.3 s" in caught.value.message

    def test_the_time_budget_cuts_a_slower_answer_short(self, key):
        with completions_server(("sleep", 2)) as server:
            with pytest.raises(SummarizerError) as caught:
                OpenAISummarizer(server.service()).summarize(CHUNK, remaining_seconds=0.3)

        assert (caught.value.code, caught.value.budget) == ("TIME_BUDGET_EXHAUSTED", True)

    def test_a_500_is_an_error_that_does_not_quote_the_body(self, key):
        with completions_server(("status", 500)) as server:
            with pytest.raises(SummarizerError) as caught:
                OpenAISummarizer(server.service()).summarize(CHUNK, remaining_seconds=10)

        assert caught.value.code == "SUMMARIZER_HTTP_ERROR"
        assert "HTTP 500" in caught.value.message
        assert ERROR_BODY not in caught.value.message

    @pytest.mark.parametrize("body", [{"choices": []}, {"choices": [{"message": {}}]}, [1]])
    def test_an_answer_without_a_message_is_an_error(self, key, body):
        with completions_server(("json", body)) as server:
            with pytest.raises(SummarizerError) as caught:
                OpenAISummarizer(server.service()).summarize(CHUNK, remaining_seconds=10)

        assert caught.value.code == "SUMMARIZER_BAD_ANSWER"

    def test_a_key_missing_from_the_environment_is_named(self, monkeypatch):
        monkeypatch.delenv(KEY_ENV, raising=False)
        with completions_server() as server:
            with pytest.raises(SummarizerError) as caught:
                OpenAISummarizer(server.service()).summarize(CHUNK, remaining_seconds=10)

        assert caught.value.code == "SUMMARIZER_KEY_MISSING"
        assert KEY_ENV in caught.value.message
        assert server.received == []

    def test_an_unknown_service_is_an_error_naming_the_ones_that_exist(self):
        with pytest.raises(SummarizerError) as caught:
            summarizer_for("nope")

        assert caught.value.code == "UNKNOWN_SERVICE"
        assert "compaction" in caught.value.message


@pytest.mark.django_db
class OpenAICompactionRunTests:
    """Whole runs whose summarizer is the server."""

    def run_with(self, workload, settings, server, **options):
        settings.COMPACTION_SERVICES = {
            **django_settings.COMPACTION_SERVICES, "llm": server.entry(**options)
        }  # fmt: skip
        roomy_floor(workload.workspace)
        compacting(workload, llm_service="llm", max_duration_ms=1500)
        session = start(workload)
        return session, talk_until_compacted(session).run

    def unchanged(self, session: Session) -> None:
        assert not Turn.objects.filter(session=session, compacted_by__isnull=False).exists()
        assert not MemoryRecord.objects.filter(memory_type="summary").exists()
        assert Session.objects.get(pk=session.pk).compaction_run is None

    def test_a_good_answer_becomes_the_summary_memory(self, workload_a, settings, key):
        with completions_server("Ada owns the Friday release notes.") as server:
            session, run = self.run_with(workload_a, settings, server)

        assert (run.status, run.service_kind) == ("succeeded", "openai")
        summaries = MemoryRecord.objects.filter(pk__in=run.summary_ids)
        assert {m.content for m in summaries} == {"Ada owns the Friday release notes."}
        assert len(server.received) == len(run.summary_ids) == 2

    def test_a_timeout_on_the_second_summary_writes_nothing_at_all(self, workload_a, settings, key):
        with completions_server("The first summary.", ("sleep", 2)) as server:
            session, run = self.run_with(workload_a, settings, server, timeout_seconds=0.3)

        assert (run.status, run.error_code) == ("failed", "SUMMARIZER_TIMEOUT")
        assert len(server.received) == 2  # the first summary was made, then thrown away
        self.unchanged(session)

    def test_a_500_is_recorded_and_the_session_is_unchanged(self, workload_a, settings, key):
        with completions_server(("status", 500)) as server:
            session, run = self.run_with(workload_a, settings, server)

        assert (run.status, run.outcome, run.error_code) == (
            "failed", "failed", "SUMMARIZER_HTTP_ERROR",
        )  # fmt: skip
        assert ERROR_BODY not in run.error
        self.unchanged(session)

    def test_a_time_budget_that_runs_out_keeps_the_summaries_made_before(
        self, workload_a, settings, key
    ):
        with completions_server("The first summary.", ("sleep", 3)) as server:
            session, run = self.run_with(workload_a, settings, server)

        assert (run.status, run.outcome) == ("succeeded", "time_budget_exhausted")
        assert (run.time_budget_exhausted, run.target_met) == (True, False)
        assert run.turns_summarised == [1, 2, 3, 4]
        assert run.duration_ms < 2500  # cut at the 1,500 ms budget, not the 5 s timeout
        (summary,) = MemoryRecord.objects.filter(memory_type="summary")
        assert summary.content == "The first summary."


class ServiceConfigTests:
    def test_no_variable_gives_the_extractive_default(self):
        assert service_config("compaction") == ServiceConfig(name="compaction", kind="extractive")

    def test_an_openai_entry_is_read_with_its_defaults(self):
        services = parse_services(
            {"gpt": {"kind": "openai", "base_url": "https://llm.example/v1/", "model": "m",
                     "api_key_env": "LLM_KEY"}}
        )  # fmt: skip

        gpt = services["gpt"]
        assert (gpt.base_url, gpt.timeout_seconds, gpt.max_tokens) == (
            "https://llm.example/v1", 30.0, 300,
        )  # fmt: skip
        assert gpt.label == "m at llm.example (OpenAI-compatible language model)"

    @pytest.mark.parametrize(
        ("data", "words"),
        [
            ([], "must be a JSON object"),
            ({"x": {"kind": "llama"}}, "kind must be one of extractive, openai"),
            ({"x": {"kind": "extractive", "model": "m"}}, "unknown key 'model'"),
            ({"x": {"kind": "extractive", "max_tokens": 0}}, "max_tokens"),
            ({"x": {"kind": "openai", "base_url": "ftp://h", "model": "m",
                    "api_key_env": "K"}}, "base_url must be an http(s) URL"),
            ({"x": {"kind": "openai", "base_url": "http://h", "model": "m",
                    "api_key_env": "sk-live-123"}}, "api_key_env must be the name"),
            ({"x": {"kind": "openai", "base_url": "http://h", "model": "m",
                    "api_key_env": "K", "timeout_seconds": 0}}, "timeout_seconds"),
            ({"bad name": {"kind": "extractive"}}, "service name 'bad name'"),
        ],
    )  # fmt: skip
    def test_a_malformed_entry_is_refused_naming_it(self, data, words):
        with pytest.raises(ServiceConfigError) as caught:
            parse_services(data)

        assert words in str(caught.value)

    def test_a_malformed_variable_stops_the_start_up(self):
        env = {**os.environ, "COMPACTION_SERVICES": json.dumps({"x": {"kind": "llama"}})}
        done = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

        assert done.returncode != 0
        assert "COMPACTION_SERVICES: service 'x': kind must be one of" in done.stderr
