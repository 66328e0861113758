"""Publish benchmark results: copy them from ``bench/results/latest/`` (where every run writes,
git-ignored) to ``bench/results/`` (tracked, cited by the docs), then rewrite from the
published ``recall-*.json`` and ``turns-*.json`` the targets table of ``docs/performance.md``
(each figure beside its target, with a verdict) and its case tables.

    python bench/update_docs.py                          # everything in bench/results/latest/
    python bench/update_docs.py recall-100k.json 'provenance-*.json'   # names or patterns

``make bench-docs`` runs it alone; ``make bench UPDATE_DOCS=1`` (and ``bench-maintenance``,
``bench-provenance``) run it on what they just measured.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import PUBLISHED, RESULTS  # noqa: E402
from bench.recall_bench import markdown  # noqa: E402
from bench.turns_bench import markdown as turns_markdown  # noqa: E402

PAGE = ROOT / "docs" / "performance.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
TARGETS_START, TARGETS_END = "<!-- targets:start -->", "<!-- targets:end -->"


def main() -> None:
    patterns = sys.argv[1:] or ["*.json"]
    latest = sorted({path for pattern in patterns for path in RESULTS.glob(pattern)})
    if not latest:
        raise SystemExit(
            f"Nothing matches {' '.join(patterns)} in {RESULTS.relative_to(ROOT)}/: "
            "run the benchmark first."
        )
    for path in latest:
        shutil.copyfile(path, PUBLISHED / path.name)
        print(f"published {(PUBLISHED / path.name).relative_to(ROOT)}")
    recall_tables_rewritten()


def published(prefix: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """The published results of one benchmark by dataset label, smallest dataset first."""
    found = {}
    for path in PUBLISHED.glob(f"{prefix}-*.json"):
        data = json.loads(path.read_text())
        found[data["label"]] = (path, data)
    return dict(sorted(found.items(), key=lambda item: item[1][1]["dataset"]["memories"]))


def recall_tables_rewritten() -> None:
    recalls, turns = published("recall"), published("turns")
    sections = [
        f"Measured {data['when']} (`{path.relative_to(ROOT)}`).\n\n{markdown(data, page=True)}"
        for path, data in recalls.values()
    ] + [
        f"Turns, measured {data['when']} (`{path.relative_to(ROOT)}`).\n\n{turns_markdown(data)}"
        for path, data in turns.values()
    ]
    text = PAGE.read_text()
    body = "\n\n".join(sections) if sections else "(not yet measured)"
    text = between(text, START, END, body)
    text = between(text, TARGETS_START, TARGETS_END, targets_table(recalls, turns))
    PAGE.write_text(text)
    print(f"rewrote the targets and case tables of {PAGE.relative_to(ROOT)}")


def between(text: str, start: str, end: str, body: str) -> str:
    if start not in text or end not in text:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has lost its {start} ... {end} markers.")
    return re.sub(
        re.escape(start) + ".*?" + re.escape(end),
        lambda _: f"{start}\n{body}\n{end}",
        text,
        flags=re.S,
    )


Cell = tuple[str, bool | None]  # the figure as written, and whether it meets its target


def targets_table(
    recalls: dict[str, tuple[Path, dict[str, Any]]], turns: dict[str, tuple[Path, dict[str, Any]]]
) -> str:
    """One row per target, one column per dataset, the verdict over the columns measured."""
    labels = list(dict.fromkeys([*recalls, *turns]))
    rows: list[tuple[str, dict[str, Cell], str | None]] = []

    def row(target: str, cell: Any, *, only: str | None = None, words: str | None = None) -> None:
        cells: dict[str, Cell] = {}
        for label in labels:
            if only is not None and label != only:
                continue
            found = cell(label)
            if found is not None:
                cells[label] = found
        rows.append((target, cells, words))

    def recall(label: str) -> dict[str, Any] | None:
        return recalls[label][1] if label in recalls else None

    def typical(label: str) -> Cell | None:
        r = recall(label)
        if r is None:
            return None
        ra, t = r["ratios"], r["typical"]
        rounds = ra.get("typicalP50VsReadRounds")
        words = f"{ra['typicalP50VsRead']}× ({t['endpointC1']['p50Ms']} / {t['bareSqlRecallRead']['p50Ms']} ms)"
        if rounds is not None:
            words += f"; {rounds}× in the rounds"
        return words, min(ra["typicalP50VsRead"], rounds or 99) <= 2

    def c8(label: str) -> Cell | None:
        r = recall(label)
        if r is None:
            return None
        x = r["ratios"]["typicalC8ThroughputVsRead"]
        return f"{x}× ({r['typical']['endpointC8']['throughputPerS']}/s)", x >= 0.6

    def figure(path: tuple[str, ...], unit: str, ok: Any) -> Any:
        def cell(label: str) -> Cell | None:
            value: Any = recall(label)
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    return None
                value = value[key]
            return f"{value}{unit}", ok(value)

        return cell

    def large(label: str) -> Cell | None:
        r = recall(label)
        if r is None or "largeAfterEditVsCached" not in r["ratios"]:
            return None
        p50 = r["large"]["rounds"]["p50Ms"]
        x = r["ratios"]["largeAfterEditVsCached"]
        return f"{x}× ({p50['afterChange']} / {p50['cached']} ms)", x <= 1.5

    def part(label: str, key: str) -> Any:
        """The ``key`` section of the recall results of ``label``, or None."""
        r = recall(label)
        return None if r is None else r.get(key)

    def rls(label: str) -> Cell | None:
        s = part(label, "rowLevelSecurity")
        if s is None:
            return None
        return f"endpoint {s['endpointRatio']}×, read {s['readRatio']}×", None

    def new_query(label: str) -> Cell | None:
        r = recall(label)
        if r is None or "embedding" not in r:
            return None
        p50 = r["embedding"]["p50Ms"]
        x = r["ratios"]["newQueryP50VsReadPlusEmbedding"]
        return (
            f"{x}× ({p50['endpointNewQuery']} / ({p50['read']} + {p50['embedding']}) ms)",
            x <= 1.5,
        )

    def imports(label: str) -> Cell | None:
        ing = part(label, "ingestion")
        if ing is None:
            return None
        two = ing.get("concurrency2", {}).get("memoriesPerS")
        embedder = "ONNX" if "minilm" in ing["embedder"] else ing["embedder"]
        return f"{ing['memoriesPerS']:,}/s; {two:,}/s from two clients ({embedder})", None

    def hit_rate(label: str) -> Cell | None:
        qc = part(label, "queryCache")
        if qc is None:
            return None
        return f"{qc['hitRate']:.0%} of {qc['hits'] + qc['misses']} recalls", None

    def turn(turns_count: int) -> Any:
        def cell(label: str) -> Cell | None:
            if label not in turns:
                return None
            for s in turns[label][1]["sessions"]:
                if s["turns"] == turns_count:
                    x = s["turnP50OverRecallP50"]
                    words = f"{x}× ({s['turn']['p50Ms']} / {s['recall']['p50Ms']} ms; p99 {s['turn']['p99Ms']})"
                    return words, x <= s["target"]
            return None

        return cell

    single_missed = any(data["ratios"]["typicalP50VsRead"] > 2 for _, data in recalls.values())
    row(
        "typical actor: endpoint p50 ≤ 2× its read's p50",
        typical,
        words="met in the rounds; a single pass missed" if single_missed else None,
    )
    row("typical actor: c=8 throughput ≥ 0.6× the read's on one connection", c8)
    row(
        "1M typical actor: p50 ≤ 5 ms at c=1",
        figure(("typical", "endpointC1", "p50Ms"), " ms", lambda v: v <= 5),
        only="1m",
    )
    row(
        "1M typical actor: p99 ≤ 15 ms at c=1",
        figure(("typical", "endpointC1", "p99Ms"), " ms", lambda v: v <= 15),
        only="1m",
    )
    row(
        "1M: ≥ 400 recalls/s at c=8",
        figure(("typical", "endpointC8", "throughputPerS"), "/s", lambda v: v >= 400),
        only="1m",
    )
    row("large actor: p50 right after an edit, suppression or delete ≤ 1.5× cached", large)
    row(
        "large actor: recall@10 ≥ 0.95",
        figure(("ratios", "largeRecallAt10"), "", lambda v: v >= 0.95),
    )
    row("row-level security: ≤ 5% of the recall", rls, words="see below")
    row(
        "ONNX: a query's embedding p50 ≤ 5 ms on one thread",
        figure(("ratios", "queryEmbeddingP50Ms"), " ms", lambda v: v <= 5),
    )
    row("ONNX: recall of a new query p50 ≤ 1.5× (its read + the embedding)", new_query)
    row(
        "ONNX: install size added ≤ 150 MB",
        figure(("ratios", "installAddedMb"), " MB", lambda v: v <= 150),
    )
    row(
        "query-vector cache hit rate, the demo's week (no target)",
        hit_rate,
        words="measured",
    )
    row("imports over HTTP (no target)", imports, words="measured")
    row("turn of a 20-turn session: p50 ≤ 1.5× the recall's", turn(20))
    row("turn of a 200-turn session: p50 ≤ 2× the recall's", turn(200))

    def when(kind: str, data: dict[str, Any]) -> str:
        load = data["machine"].get("loadavg", {}).get("before")
        return f"{kind} {data['when'][:10]}" + (f", load {load[0]:.1f}" if load else "")

    dates = "; ".join(
        f"{label}: "
        + ", ".join(
            when(kind, found[label][1])
            for kind, found in (("recall", recalls), ("turns", turns))
            if label in found
        )
        for label in labels
    )
    lines = [
        f"The latest published runs ({dates}; `bench/results/recall-*.json`, `turns-*.json`):",
        "",
        "| target | " + " | ".join(labels) + " | verdict |",
        "|---|" + "---|" * len(labels) + "---|",
    ]
    for target, cells, words in rows:
        if not cells:
            continue
        verdicts = [ok for _, ok in cells.values() if ok is not None]
        verdict = words if words and all(verdicts) else ("met" if all(verdicts) else "**missed**")
        if words is None and len(cells) < len(labels):
            verdict += " (" + ", ".join(cells) + ")"
        figures = [cells[label][0] if label in cells else "—" for label in labels]
        lines.append(f"| {target} | " + " | ".join(figures) + f" | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
