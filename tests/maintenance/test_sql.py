"""Maintenance's SQL has one home (``maintenance.sql``): the sweeps and the reverts call its
functions and write no SQL of their own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from maintenance import sql

ROOT = Path(__file__).resolve().parents[2]


class MaintenanceSqlTests:
    @pytest.mark.parametrize("module", ["maintenance/sweeps.py", "maintenance/reverts.py"])
    def test_the_sweeps_and_the_reverts_write_no_sql_of_their_own(self, module):
        text = (ROOT / module).read_text()

        assert "cursor" not in text
        assert not re.search(r"\b(SELECT|UPDATE|DELETE FROM|INSERT INTO)\b", text)

    def test_every_listing_has_a_prefilter_and_every_change_its_assignments(self):
        assert set(sql.PREFILTERS) == {
            "expiry", "decay", "retention", "promotion", "promotion_of_actor", "reembed"
        }  # fmt: skip
        assert set(sql.CHANGES) == {"expire", "stale", "promote"}
        assert all("%(now)s" in change for change in sql.CHANGES.values())
