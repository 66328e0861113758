"""The recall funnel's order, written once (``recall.envelope.FUNNEL``, the envelope's
``counts`` as ``Counts`` declares them) and followed by everything that shows the counts."""

from __future__ import annotations

from audit.exports import PAYLOAD_COLUMNS
from policies.labels import COUNT_LABELS
from recall import events
from recall.envelope import FUNNEL
from recall.views import sandbox

SHUFFLED = {"afterRanking": 3, "extra": 9, "afterBudgetAllocation": 2, "candidates": 8}


class FunnelOrderTests:
    def test_it_is_the_order_rows_pass_through(self):
        assert FUNNEL == ("candidates", "afterPolicy", "afterRanking", "afterBudgetAllocation")

    def test_the_sandbox_shows_every_step_in_it(self):
        steps = sandbox._funnel({**SHUFFLED, "afterPolicy": 5})  # type: ignore[typeddict-item]

        assert [s["key"] for s in steps] == list(FUNNEL)
        assert all(s["hint"] for s in steps)

    def test_the_event_page_shows_the_counts_in_it_then_any_other(self):
        steps = events._funnel(SHUFFLED)

        assert [s["key"] for s in steps] == [
            "candidates",
            "afterRanking",
            "afterBudgetAllocation",
            "extra",
        ]

    def test_the_export_has_a_column_per_step_in_it(self):
        # audit sits below recall and imports nothing from it: its columns are held here.
        counted = [c for c in PAYLOAD_COLUMNS if c.removeprefix("counts.") in FUNNEL]

        assert counted == [f"counts.{name}" for name in FUNNEL]

    def test_each_step_has_its_label(self):
        assert tuple(COUNT_LABELS) == FUNNEL
