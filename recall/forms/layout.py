"""The layout sandbox's form: the numbers, the YAML config and the lines of a chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django import forms

from policies.models import Workload
from recall.api.layout_serializers import CHAT_ROLES, LayoutRequestSerializer
from recall.layout.config import (
    SEED_CHAT_FRAGMENT,
    YAML_MAX_CHARS,
    LayoutConfig,
    layout_config_yaml,
)
from recall.layout.request import LayoutRequest, SupportingItem
from recall.layout.vocabulary import KNOWN_SECTIONS, MAX_COUNT

# --- the layout sandbox ------------------------------------------------------------------------


# The seed's illustrative numbers: 32000 / 1500 / 500 / 2500 / 0.30 -> 27500 and 8250.
SEED_EXAMPLE: dict[str, Any] = {
    "context_window": 32000,
    "system_prompt_tokens": 1500,
    "tool_schema_tokens": 500,
    "output_buffer": 2500,
    "budget_ratio": 0.30,
    "workload": "",
    "config": SEED_CHAT_FRAGMENT,
    "history": """\
user: Our nightly export job has failed three nights in a row. Can you help me work out why?
assistant: The job logs show a timeout while writing to the reports bucket. Did anything change in its permissions last week?
user: We rotated the service account keys on Monday.
assistant: That lines up: the failures started on Monday night, so the job is probably still using the old key.""",  # noqa: E501 - one item per line, as typed
    "prior_history": """\
user: Please move the export to 02:00 UTC instead of midnight.
assistant: Done: the schedule now says 02:00 UTC, and I noted the change in the runbook.""",
    "supporting": """\
known_facts | 0.9 | | The export job runs as the service account reports-writer.
passages | 0.82 | short | Monday's change log: rotated the keys of reports-writer and two other service accounts.
passages | 0.64 | long | Runbook: when an export times out, first check the bucket's IAM bindings and the key in the secret store.
passages | 0.21 | long | Team offsite agenda: planning for the next quarter.
insights | 0.7 | | Most export failures in the past year came from expired or rotated credentials.
summaries | 0.5 | | Previous session: moved the export schedule to 02:00 UTC.""",  # noqa: E501 - one item per line, as typed
    "query": "Which key is the export job using now, and how do I switch it to the new one?",
}

# A small local model (4,096 tokens) with a large system prompt and tool schemas: the
# supporting budget is half of a 596-token dynamic budget and the chat is long, so the
# cascade runs stages 1 to 5, each removing something, before the payload fits.
PRESSURE_FRAGMENT = """\
memory:
  context_window: 4096
  output_buffer: 1000
  max_history_turns: 15
  supporting_context:
    budget_ratio: 0.50
    section_priority: [known_facts, passages, insights, summaries, tools, state]
    max_items:
      passages: 8
      known_facts: 15
      insights: 10
      summaries: 5
      tools: 5
  compaction:
    enabled: true
    compaction_threshold: 0.85
    cooldown_turns: 3
"""

PRESSURE_EXAMPLE: dict[str, Any] = {
    "context_window": 4096,
    "system_prompt_tokens": 1500,
    "tool_schema_tokens": 1000,
    "output_buffer": 1000,
    "budget_ratio": 0.50,
    "workload": "",
    "config": PRESSURE_FRAGMENT,
    "history": """\
user: The checkout service started returning 502s at 14:05 UTC and the error rate is now around eight percent of all requests in eu-west.
assistant: Understood. The load balancer logs show the 502s come from two of the six checkout pods; both restarted at 14:03 after an out-of-memory kill.
user: We deployed version 4.12 of checkout at 13:50. Could the new build use more memory than the old one?
assistant: Possibly. 4.12 added the in-process price cache; its default size is 512 MB, which is half of the pod's 1 GiB memory limit.
user: Can you check whether the cache size is configurable without a new build? I would rather not roll back the whole release.
assistant: It is: PRICE_CACHE_MAX_MB is read at start-up. Setting it to 128 and restarting the pods would keep the feature and free about 380 MB per pod.
user: What about the other four pods? They have not restarted, but their memory graphs look close to the limit as well.
assistant: They sit at 900 to 960 MiB. They will hit the limit as the cache fills, so they need the same change; a rolling restart avoids a gap in capacity.
user: Draft the change for the deployment manifest and tell me which team has to approve it during the freeze.
assistant: The manifest change sets PRICE_CACHE_MAX_MB=128 in the checkout container env. During the freeze, changes to payment paths need the on-call SRE lead's approval.
user: The SRE lead is Priya this week. She asked whether we also need to raise the memory limit as a safety margin.
assistant: Raising the limit to 1.5 GiB is reasonable as a margin, but the cluster has room for it only in two of the three zones; I would change the cache first.
user: Agreed. Priya approved the cache change. The rolling restart is in progress and two pods are already back.
assistant: Good. The error rate has dropped to two percent; the remaining 502s come from the pods that are still restarting.""",  # noqa: E501 - one item per line, as typed
    "prior_history": """\
user: Yesterday we planned the 4.12 rollout for Tuesday afternoon, after the payment-provider maintenance window closes.
assistant: Noted: the rollout starts after 13:30 UTC on Tuesday, canary first, then the remaining pods in two waves.
user: Please also remind me to check the price cache hit rate on the dashboard after the rollout.
assistant: I will: the hit rate panel is on the checkout dashboard under Caching; the target is above 85 percent.
user: And the staging run of 4.12 looked fine, right?
assistant: Yes, staging ran for six hours without errors, although staging pods have a 2 GiB memory limit, not 1 GiB.""",  # noqa: E501 - one item per line, as typed
    "supporting": """\
known_facts | 0.95 | | Checkout pods in production have a 1 GiB memory limit and run six replicas in eu-west.
known_facts | 0.9 | | Priya is the on-call SRE lead this week and approves payment-path changes during the freeze.
known_facts | 0.7 | | The change freeze lasts until Friday 18:00 UTC.
known_facts | 0.6 | | Checkout 4.12 was deployed at 13:50 UTC today.
known_facts | 0.55 | | Staging checkout pods have a 2 GiB memory limit.
known_facts | 0.5 | | The price cache hit rate target is 85 percent.
passages | 0.91 | short | Release notes 4.12: adds an in-process price cache; PRICE_CACHE_MAX_MB defaults to 512 and is read at start-up.
passages | 0.74 | long | Capacity plan Q3: eu-west zones a and b have spare memory; zone c is at 92 percent allocation.
passages | 0.84 | short | Incident 2291 (March): checkout OOM kills after a cache change; fixed by lowering the cache size and a rolling restart.
passages | 0.22 | long | Team handbook: on-call handover happens on Mondays at 09:00 local time.
passages | 0.62 | short | Runbook: a rolling restart of checkout keeps at least four pods serving; never restart more than two at a time.
passages | 0.38 | long | Architecture overview: checkout calls pricing, inventory and the payment gateway synchronously.
passages | 0.45 | short | Dashboard guide: the Caching row shows hit rate, evictions and memory used by the price cache.
passages | 0.12 | long | Office notice: the third-floor kitchen is closed for cleaning on Thursday.
insights | 0.8 | | Memory-related incidents in checkout usually follow cache or buffer size changes rather than traffic spikes.
insights | 0.66 | | The team prefers configuration changes over rollbacks during a freeze when the fix is low risk.
insights | 0.41 | | Staging memory limits differ from production and have hidden memory regressions before.
insights | 0.3 | | Rolling restarts during peak hours have not caused customer-visible errors in the last year.
summaries | 0.7 | | Earlier today: agreed the 4.12 rollout plan and the post-rollout cache checks.
summaries | 0.5 | | Last week: reviewed the price cache design; the open question was the default cache size.
summaries | 0.35 | | Last month: moved checkout to six replicas in eu-west.
summaries | 0.2 | | Quarter planning: checkout latency goals for the holiday season.""",  # noqa: E501 - one item per line, as typed
    "query": "Is it safe to finish the rolling restart now, or should we raise the memory limit?",
}
LAYOUT_EXAMPLES = {"seed": SEED_EXAMPLE, "pressure": PRESSURE_EXAMPLE}

LINES_MAX = 2_000
LINES_TEXT_MAX = 200_000
# More problems than this in one textarea are summarised: the first ones show the pattern.
LINE_ERRORS_SHOWN = 12
NONE_WORDS = ("", "-")


def _drf_messages(errors: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` pairs from a DRF serializer's ``errors``."""
    pairs: list[tuple[str, str]] = []
    for name, messages in errors.items():
        listed = messages if isinstance(messages, list) else [messages]
        pairs.extend((name, str(message)) for message in listed)
    return pairs


# A problem of one line of a textarea: (line number, message), shown in line order.
LineError = tuple[int, str]


@dataclass
class MessageLines:
    """``role: content`` lines as the API's chat messages, each with the line it came from;
    ``errors`` are the lines that are not a message at all."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)

    @property
    def wire(self) -> list[dict[str, Any]]:
        """What the API takes: ``history`` or ``priorSessionHistory``."""
        return self.messages

    def serializer_errors(self, errors: Any) -> list[LineError]:
        """The serializer's errors of these messages (a list by index), by line."""
        found: list[LineError] = []
        for number, problems in zip(self.numbers, errors, strict=False):
            found += [
                (number, f"Line {number}: {name}: {message}")
                for name, message in _drf_messages(problems or {})
            ]
        return found


def message_lines(text: str) -> MessageLines:
    """``role: content`` lines (blank lines skipped) as ``{role, content}``, as the API takes
    them; the serializer checks them."""
    lines = MessageLines()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        role, colon, content = line.partition(":")
        if not colon:
            lines.errors.append(
                (number, f"Line {number}: write it as role: content, for example user: hello.")
            )
            continue
        lines.messages.append({"role": role.strip().lower(), "content": content.strip()})
        lines.numbers.append(number)
    return lines


@dataclass
class SupportingLines:
    """``section | relevancy | term | content`` lines as the API's sections of items, each
    item with the line it came from; ``errors`` are the lines that are not an item at all."""

    sections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    numbers: dict[str, list[int]] = field(default_factory=dict)
    errors: list[LineError] = field(default_factory=list)

    @property
    def wire(self) -> dict[str, list[dict[str, Any]]]:
        """What the API takes: ``supporting``."""
        return self.sections

    def serializer_errors(self, errors: Any) -> list[LineError]:
        """The serializer's errors of these sections (section -> a list by index, or the
        section's own problem, such as an unknown name), by line."""
        found: list[LineError] = []
        for section, problems in errors.items():
            numbers = self.numbers.get(section, [])
            if section not in KNOWN_SECTIONS:  # the name itself: every line of it says so
                found += [
                    (number, f"Line {number}: {section!r}: {message}")
                    for number in numbers
                    for message in problems
                ]
                continue
            items = self.sections[section]
            for number, item, item_problems in zip(numbers, items, problems, strict=False):
                for name, message in _drf_messages(item_problems or {}):
                    if name == "term" and "term" not in item:
                        message = "passages need a term: short or long."
                    found.append((number, f"Line {number}: {name}: {message}"))
        return found


def _relevancy(text: str) -> float | None | str:
    """The relevancy as a number, None when blank or ``-``, or the text back when not a number."""
    if text in NONE_WORDS:
        return None
    try:
        return float(text)
    except ValueError:
        return text


def supporting_lines(text: str) -> SupportingLines:
    """``section | relevancy | term | content`` lines as items per section, in line order.

    Relevancy and term may be blank (or ``-``); the serializer checks the rest (passages need
    a term), so the page and ``POST /v1/context/layout`` accept the same things.
    """
    lines = SupportingLines()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|", 3)]
        if len(parts) < 4:
            lines.errors.append(
                (
                    number,
                    f"Line {number}: expected four parts separated by |: "
                    "section | relevancy | term | content.",
                )
            )
            continue
        section, relevancy_text, term, content = parts
        relevancy = _relevancy(relevancy_text)
        # A line of an unknown section is told only that (by the serializer), whatever else
        # is wrong with it: the section is the first thing to fix.
        if isinstance(relevancy, str) and section in KNOWN_SECTIONS:
            lines.errors.append(
                (
                    number,
                    f"Line {number}: relevancy: {relevancy!r} is not a number; "
                    "use 0 to 1, or leave it blank.",
                )
            )
            continue
        item: dict[str, Any] = {"content": content, "relevancy": relevancy}
        if term not in NONE_WORDS:
            item["term"] = term
        lines.sections.setdefault(section, []).append(item)
        lines.numbers.setdefault(section, []).append(number)
    return lines


# Each textarea is as tall as its content (up to a cap); these are the fewest rows it shows.
TEXTAREA_ROWS_LEAST = {"config": 4, "history": 3, "prior_history": 3, "supporting": 3, "query": 2}
TEXTAREA_ROWS_MOST = 30


def fit_rows(text: str, *, least: int) -> int:
    """Rows that show ``text`` whole, one line each (the cap keeps a pasted log in bounds)."""
    return max(least, min(len(text.splitlines()) + 1, TEXTAREA_ROWS_MOST))


def _lines_field(label: str, help_text: str, rows: int, placeholder: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        max_length=LINES_TEXT_MAX,
        help_text=help_text,
        widget=forms.Textarea(
            attrs={"rows": rows, "spellcheck": "false", "placeholder": placeholder, "wrap": "off"}
        ),
    )


# The number fields only read text as numbers; their bounds are checked by the serializer
# (the widgets still show them to the browser).
def _token_field(label: str, *, required: bool, help_text: str = "") -> forms.IntegerField:
    return forms.IntegerField(
        label=label,
        required=required,
        help_text=help_text,
        widget=forms.NumberInput(attrs={"min": 0, "step": 1, "max": MAX_COUNT}),
    )


class LayoutForm(forms.Form):
    """A chat prompt to lay out, as text: numbers, the ``memory:`` YAML and one line per item.

    The form turns its text into the data ``POST /v1/context/layout`` takes and validates it
    with the API's ``LayoutRequestSerializer``, naming each problem's line. The configuration
    is the chosen workload's stored one, else the YAML; the window, output buffer and ratio
    given here override it, and blank ones come from it.
    """

    context_window = _token_field(
        "Context window", required=False, help_text="Tokens; blank: the config's."
    )
    system_prompt_tokens = _token_field("System prompt", required=True, help_text="Tokens.")
    tool_schema_tokens = _token_field("Tool schemas", required=True, help_text="Tokens.")
    output_buffer = _token_field(
        "Output buffer", required=False, help_text="Tokens; blank: the config's."
    )
    budget_ratio = forms.FloatField(
        label="Budget ratio",
        required=False,
        help_text="Supporting share, 0 to 1; blank: the config's.",
        widget=forms.NumberInput(attrs={"min": 0.0, "max": 1.0, "step": "0.01"}),
    )
    workload = forms.ChoiceField(label="Configuration", required=False)
    config = forms.CharField(
        label="memory: configuration (YAML)",
        required=False,
        strip=False,
        max_length=YAML_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "wrap": "off"}),
    )
    history = _lines_field(
        "Current-session history",
        "One message per line, oldest first, as role: content. Roles: "
        + ", ".join(CHAT_ROLES)
        + ".",
        6,
        "user: hello",
    )
    prior_history = _lines_field(
        "Prior-session history",
        "Earlier sessions' turns, same format. They are the first history dropped under pressure.",
        4,
        "assistant: last time we…",
    )
    supporting = _lines_field(
        "Supporting items",
        "One item per line: section | relevancy | term | content.",
        8,
        "passages | 0.8 | short | …",
    )
    query = forms.CharField(
        label="Query",
        required=False,
        strip=False,
        max_length=LINES_TEXT_MAX,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(self, data: Any = None, *, workloads: Sequence[Workload], **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.workloads = {str(w.pk): w for w in workloads}
        workload_field = self.fields["workload"]
        assert isinstance(workload_field, forms.ChoiceField)
        workload_field.choices = [
            ("", "The YAML below"),
            *[(key, f"{w.name}'s stored configuration") for key, w in self.workloads.items()],
        ]
        # Not ``self.config``: that name is the YAML field (``form.config`` in templates).
        self.parsed_config: LayoutConfig | None = None
        self.config_errors: list[tuple[str, str]] = []
        self.request_serializer: LayoutRequestSerializer | None = None
        for name, least in TEXTAREA_ROWS_LEAST.items():
            value = self.data.get(name) if self.is_bound else self.initial.get(name)
            self.fields[name].widget.attrs["rows"] = fit_rows(str(value or ""), least=least)

    def _lines(self, name: str, parse: Any) -> Any:
        text = self.cleaned_data.get(name) or ""
        lines = sum(1 for line in text.splitlines() if line.strip())
        if lines > LINES_MAX:
            raise forms.ValidationError(f"At most {LINES_MAX:,} lines; this has {lines:,}.")
        return parse(text)

    def clean_history(self) -> MessageLines:
        return self._lines("history", message_lines)

    def clean_prior_history(self) -> MessageLines:
        return self._lines("prior_history", message_lines)

    def clean_supporting(self) -> SupportingLines:
        return self._lines("supporting", supporting_lines)

    def clean(self) -> dict[str, Any]:
        """Validate the request as the API does, every problem next to its field or line."""
        data = super().clean() or {}
        # What the API would be sent; a field the form could not read is left out (it
        # already has its error), so the rest are still checked.
        body = {
            wire: data[name] for wire, name in WIRE_FIELDS.items() if data.get(name) is not None
        }
        lines: dict[str, MessageLines | SupportingLines] = {
            name: data[name] for name in LINE_FIELDS if name in data
        }
        body.update({LINE_FIELDS[name]: parsed.wire for name, parsed in lines.items()})
        # A workload's stored config was validated when it was saved; the YAML is not read.
        if not data.get("workload") and "config" in data:
            body["config"] = data["config"]
        serializer = LayoutRequestSerializer(data=body)
        problems: dict[str, Any] = {} if serializer.is_valid() else dict(serializer.errors)
        for wire, name in WIRE_FIELDS.items():
            for message in problems.get(wire, []):
                self.add_error(name, str(message))
        for path, message in problems.get("config", {}).items():
            text = message if isinstance(message, str) else " ".join(message)
            self.config_errors.append((path, text))
            self.add_error("config", f"{path}: {text}")
        for name, parsed in lines.items():
            found = parsed.errors + parsed.serializer_errors(problems.get(LINE_FIELDS[name], {}))
            if found:
                in_line_order = sorted(found, key=lambda error: error[0])
                self.add_error(name, _summarised([message for _, message in in_line_order]))
        if not problems:
            self.request_serializer = serializer
            self.parsed_config = serializer.validated_data.get("config")
        return data

    def layout_request(self, config: LayoutConfig) -> LayoutRequest:
        """The validated request, planned with ``config``; only once the form is valid."""
        assert self.request_serializer is not None
        return self.request_serializer.layout_request(config)


def _summarised(messages: list[str]) -> list[str]:
    """The first ``LINE_ERRORS_SHOWN`` messages, then how many more there are."""
    shown = messages[:LINE_ERRORS_SHOWN]
    if len(messages) > len(shown):
        shown.append(f"…and {len(messages) - len(shown)} more problems.")
    return shown


# The API's names -> this form's fields that show their errors: plain values ...
WIRE_FIELDS = {
    "contextWindow": "context_window",
    "systemPromptTokens": "system_prompt_tokens",
    "toolSchemaTokens": "tool_schema_tokens",
    "outputBuffer": "output_buffer",
    "budgetRatio": "budget_ratio",
    "query": "query",
}
# ... and textareas of lines.
LINE_FIELDS = {
    "history": "history",
    "prior_history": "priorSessionHistory",
    "supporting": "supporting",
}


# --- a recorded prompt as the form's starting point -----------------------------------------


@dataclass(frozen=True)
class LayoutStart:
    """A prompt recorded elsewhere (a session's turn) to open in the sandbox: its
    configuration, fixed costs, messages ``(role, content)`` oldest first, supporting items
    by section, and query."""

    config: LayoutConfig
    system_prompt_tokens: int
    tool_schema_tokens: int
    history: Sequence[tuple[str, str]]
    prior_history: Sequence[tuple[str, str]]
    supporting: Mapping[str, Sequence[SupportingItem]]
    query: str


def one_line(text: str) -> str:
    """A message or an item on one line of its textarea: its line breaks become spaces."""
    return " ".join(text.splitlines())


def layout_initial(start: LayoutStart) -> dict[str, Any]:
    """The form's initial values for ``start``: its numbers, its configuration as YAML (to
    edit: no workload is chosen), and one line per message and item, as ``message_lines``
    and ``supporting_lines`` read them."""
    config = start.config
    items = [
        f"{section} | {'' if item.relevancy is None else item.relevancy} | {item.term or ''}"
        f" | {one_line(item.content)}"
        for section, listed in start.supporting.items()
        for item in listed
    ]
    return {
        "context_window": config.context_window,
        "system_prompt_tokens": start.system_prompt_tokens,
        "tool_schema_tokens": start.tool_schema_tokens,
        "output_buffer": config.output_buffer,
        "budget_ratio": config.supporting_context.budget_ratio,
        "workload": "",
        "config": layout_config_yaml(config),
        "history": "\n".join(f"{role}: {one_line(text)}" for role, text in start.history),
        "prior_history": "\n".join(
            f"{role}: {one_line(text)}" for role, text in start.prior_history
        ),
        "supporting": "\n".join(items),
        "query": start.query,
    }
