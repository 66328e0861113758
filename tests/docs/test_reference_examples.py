"""The worked examples of the documentation run against the real code.

Every ```python block with ``>>>`` lines in ``docs/`` is a doctest, run on its own (each block
imports what it uses); a Python client example, marked ``<!-- check: python-client -->``, must
parse and call only the client's methods. A ```json block preceded by ``<!-- check: NAME -->``
is fed to the checker of that name below, which compares it with what the code computes. Every
other ```json block must at least parse. So when the code changes, the page that describes it
fails here until it is brought up to date.

The documentation must also stand on its own: no link in the README or ``docs/`` may point
outside the repository, and every relative link must name a file that exists.
"""

from __future__ import annotations

import ast
import doctest
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference" / "context-recall-policy-and-budget.md"
USER_GUIDE = DOCS / "user-guide.md"

FENCE_LINE = re.compile(r"^```(?P<lang>[\w-]*)[ \t]*$")
CHECK = re.compile(r"<!--\s*check:\s*(?P<name>[\w-]+)\s*-->\s*$")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")
LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass(frozen=True)
class Block:
    path: Path
    lang: str
    body: str
    line: int  # 1-based line of the opening fence
    heading: str
    check: str | None  # the name of a <!-- check: NAME --> right above the fence

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line} ({self.heading})"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page. A fence is a line of three backticks and an optional tag;
    a block opens at one and closes at the next bare one."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    heading = "top"
    opening: tuple[int, str, str | None] | None = None  # line, tag, check marker
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        fence = FENCE_LINE.match(line)
        if opening is None:
            if fence:
                marker = CHECK.search(lines[number - 2]) if number > 1 else None
                opening, body = (number, fence["lang"], marker["name"] if marker else None), []
            elif title := HEADING.match(line):
                heading = title["title"]
        elif fence and not fence["lang"]:
            start, lang, check = opening
            text = "\n".join(body) + "\n"
            found.append(Block(path, lang, text, start, heading, check))
            opening = None
        else:
            body.append(line)
    assert opening is None, f"{path.name}:{opening[0]}: a fenced block is never closed"
    return found


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def doctest_blocks() -> list[Block]:
    return [b for p in doc_pages() for b in blocks(p) if b.lang == "python" and ">>>" in b.body]


def json_blocks() -> list[Block]:
    return [b for p in doc_pages() for b in blocks(p) if b.lang == "json"]


def checked(name: str) -> Block:
    found = [b for b in json_blocks() if b.check == name]
    assert len(found) == 1, f"expected one ```json block marked <!-- check: {name} -->"
    return found[0]


# --- doctests ---------------------------------------------------------------------------------


def run_doctest(block: Block) -> tuple[doctest.TestResults, str]:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.body, {}, block.label, str(block.path), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(test, out=report.append)
    return result, "".join(report)


@pytest.mark.parametrize("block", doctest_blocks(), ids=lambda b: b.label)
def test_a_python_example_gives_the_output_the_page_shows(block: Block) -> None:
    result, report = run_doctest(block)
    assert result.attempted > 0, f"{block.label}: a python block with no example"
    assert result.failed == 0, f"{block.label}: the page no longer matches the code\n{report}"


class ReferenceExampleTests:
    def test_the_reference_has_its_worked_examples(self) -> None:
        # Guards the extraction itself: a block the parser stops seeing must not pass quietly.
        text = REFERENCE.read_text(encoding="utf-8")
        examples = [b for b in doctest_blocks() if b.path == REFERENCE]
        assert len(examples) == len(re.findall(r"^```python[ \t]*$", text, re.M)) >= 12
        assert {b.check for b in json_blocks() if b.path == REFERENCE} >= {
            "budget-axes",
            "recall-request",
            "envelope-input",
            "envelope-output",
        }

    def test_a_wrong_example_fails(self) -> None:
        block = next(b for b in doctest_blocks() if b.path == REFERENCE)
        lines = block.body.splitlines()
        # Change the first expected output line: the doctest must notice.
        prompts = (">>>", "...")
        index = next(i for i, line in enumerate(lines) if line and line[:3] not in prompts)
        lines[index] = lines[index] + " (not what the code says)"
        broken = Block(block.path, block.lang, "\n".join(lines) + "\n", block.line, "x", None)
        result, _ = run_doctest(broken)
        assert result.failed > 0

    def test_every_python_block_is_a_doctest_or_a_client_example(self) -> None:
        # A client example (<!-- check: python-client -->) needs a server to run: it must
        # parse, and each client.NAME( it calls must be a method of the Python client.
        from context_recall import Client

        for page in doc_pages():
            for block in blocks(page):
                if block.lang != "python":
                    continue
                if block.check != "python-client":
                    assert ">>>" in block.body, f"{block.label}: an example nothing runs"
                    continue
                ast.parse(block.body)
                called = set(re.findall(r"\bclient\.(\w+)\(", block.body))
                assert called, f"{block.label}: a client example that calls no client method"
                unknown = {name for name in called if not hasattr(Client, name)}
                assert not unknown, f"{block.label}: the client has no {sorted(unknown)}"

    def test_every_json_block_parses(self) -> None:
        for block in json_blocks():
            try:
                json.loads(block.body)
            except json.JSONDecodeError as exc:
                pytest.fail(f"{block.label}: not JSON ({exc})")

    def test_every_check_marker_names_a_checker(self) -> None:
        for block in json_blocks():
            if block.check is not None:
                assert block.check in CHECKERS or block.check == "envelope-input", block.label


# --- JSON examples checked against the code -------------------------------------------------


def check_budget_axes(document: dict[str, Any]) -> None:
    """The budget shape shown is exactly the default floor's budget axes, and a valid policy."""
    from policies.algebra import default_floor, normalize_document, validate_budget
    from policies.axes import BUDGET_AXES

    normalized = normalize_document(document, partial=True)
    floor = default_floor()
    assert normalized == {name: floor[name] for name in BUDGET_AXES}
    validate_budget(normalized)


def check_recall_request(document: dict[str, Any]) -> None:
    """The request shown is accepted by the recall endpoint's serializer, override included."""
    from policies.algebra import normalize_document
    from recall.api.serializers import RecallRequestSerializer

    serializer = RecallRequestSerializer(data=document)
    assert serializer.is_valid(), serializer.errors
    normalize_document(serializer.validated_data["policyOverride"], partial=True)


def check_rows_are_eligible(policy: dict[str, Any], example: dict[str, Any]) -> None:
    """The example's story holds together: its rows pass the policy, its funnel adds up."""
    from policies.algebra import SENSITIVITY_ORDER
    from policies.vocabulary import CONFIDENCE_GATED

    ceiling = SENSITIVITY_ORDER.index(policy["sensitivityCeiling"])
    for row in example["rows"]:
        assert row["memoryType"] in policy["memoryTypeAllowed"], row["id"]
        assert row["sourceKind"] in policy["sourceKindAllowed"], row["id"]
        assert row["confirmationStatus"] in policy["confirmationStatusAllowed"], row["id"]
        held = row["confirmationStatus"] in CONFIDENCE_GATED
        assert not held or row["confidence"] >= policy["confidenceMin"], row["id"]
        assert SENSITIVITY_ORDER.index(row["sensitivity"]) <= ceiling, row["id"]
    funnel = example["funnel"]
    assert funnel["afterPolicy"] == len(example["rows"])
    assert funnel["candidates"] == (
        funnel["lifecycleExcluded"]
        + funnel["embeddingPending"]
        + funnel["afterPolicy"]
        + sum(funnel["reasons"].values())
    )


def build_envelope(example: dict[str, Any]) -> dict[str, Any]:
    """The envelope recall builds from these rows: recall_plan's steps after its one read."""
    from policies.algebra import default_floor, effective_policy, normalize_floor, policy_hashes
    from policies.selectors import EffectivePolicy
    from recall.assembly import RecallRequest, _envelope, _rescore
    from recall.engine.read import Funnel, RankedRow
    from recall.planner import BudgetPolicy, Candidate, plan_budget

    now = datetime.fromisoformat(example["now"])
    floor, relaxable = normalize_floor({**default_floor(), **example["floorChanges"]})
    policy = effective_policy(floor, None, None, relaxable)
    policy_hash, budget_hash = policy_hashes(policy)
    effective = EffectivePolicy(
        policy=policy,
        policy_hash=policy_hash,
        budget_hash=budget_hash,
        compliant=True,
        relaxing_axes=[],
        floor_version=1,
        workload_version=None,
        relaxable_axes=relaxable,
    )
    rows = [
        RankedRow(
            id=row["id"],
            content=row["content"],
            memory_type=row["memoryType"],
            source_kind=row["sourceKind"],
            confirmation_status=row["confirmationStatus"],
            confidence=row["confidence"],
            sensitivity=row["sensitivity"],
            segment_kind=row["segmentKind"],
            token_count=row["tokens"],
            created_at=datetime.fromisoformat(row["createdAt"]),
            hit_count=row["hitCount"],
            tier="short_term",
            similarity=row["similarity"],
        )
        for row in example["rows"]
    ]
    check_rows_are_eligible(policy, example)
    funnel = Funnel(
        candidates=example["funnel"]["candidates"],
        lifecycle_excluded=example["funnel"]["lifecycleExcluded"],
        after_policy=example["funnel"]["afterPolicy"],
        reasons=example["funnel"]["reasons"],
        embedding_pending=example["funnel"]["embeddingPending"],
    )
    ranked = _rescore(rows, now)[: example["topK"]]
    plan = plan_budget(
        [Candidate(str(row.id), row.segment_kind, row.token_count, s) for row, s in ranked],
        BudgetPolicy.from_policy(policy),
    )
    request = RecallRequest(
        workspace=None,  # type: ignore[arg-type]
        workload=None,  # type: ignore[arg-type]
        environment="prod",
        actor_id="user:ada",
        query=example["query"],
        top_k=example["topK"],
        override=None,
        author="user:operator",
    )
    return _envelope(request, effective, ranked, funnel, plan, example["accessPath"], now)


# Per envelope, these differ on every call; the page shows placeholders.
PER_CALL = ("envelopeId", "generatedAt")


def check_envelope_output(document: dict[str, Any]) -> None:
    """The envelope shown is the one recall builds from the input block above it."""
    example = json.loads(checked("envelope-input").body)
    envelope = build_envelope(example)
    for key in PER_CALL:
        assert key in envelope
        envelope.pop(key)
        document = {k: v for k, v in document.items() if k != key}
    assert document == json.loads(json.dumps(envelope))


CHECKERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "budget-axes": check_budget_axes,
    "recall-request": check_recall_request,
    "envelope-output": check_envelope_output,
}


def checked_blocks() -> Iterator[Block]:
    for block in json_blocks():
        if block.check in CHECKERS:
            yield block


@pytest.mark.parametrize("block", list(checked_blocks()), ids=lambda b: b.check or "")
def test_a_json_example_matches_the_code(block: Block) -> None:
    assert block.check is not None
    CHECKERS[block.check](json.loads(block.body))


# --- links ------------------------------------------------------------------------------------


def prose(path: Path) -> str:
    """A page without its fenced blocks (a URL in a shell example is not a link)."""
    kept, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE_LINE.match(line):
            inside = not inside  # blocks() checks that every fence is closed
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def link_targets(path: Path) -> Iterator[tuple[str, Path | None]]:
    for match in LINK.finditer(prose(path)):
        target = match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            yield target, None
            continue
        file_part = target.split("#", 1)[0]
        yield target, (path.parent / file_part).resolve()


@pytest.mark.parametrize(
    "page", [REPO / "README.md", *doc_pages()], ids=lambda p: str(p.relative_to(REPO))
)
def test_documentation_links_stay_inside_the_repository(page: Path) -> None:
    for target, resolved in link_targets(page):
        assert "shared/" not in target, f"{page.name}: {target} points outside the project"
        if resolved is None:
            continue
        assert resolved.is_relative_to(REPO), f"{page.name}: {target} leaves the repository"
        assert resolved.exists(), f"{page.name}: {target} does not exist"


def test_the_readme_links_the_reference_and_the_user_guide() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/reference/context-recall-policy-and-budget.md" in readme
    assert "docs/user-guide.md" in readme
    assert REFERENCE.exists() and USER_GUIDE.exists()
