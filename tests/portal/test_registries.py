"""Every registry the apps fill at start-up follows one rule (``portal.registry``): a key
registered twice raises, unless with the same value, which changes nothing. Each registry is
tried once by the same helper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from audit import presenters
from audit.presenters import Presenter, presenter_register
from policies import impact
from policies.impact import impact_counter_register
from portal import errors, pages
from portal.errors import coded_error_register
from portal.pages import panel_register
from portal.registry import RegisteredTwice
from recall import erasure
from recall.erasure import erasure_actor_data_register, erasure_copies_register


def one_rule(
    register: Callable[[Any], Any],
    registered: Callable[[], int],
    first: Any,
    again: Any,
    other: Any,
) -> None:
    """``first`` registered, then ``again`` (the same value) changes nothing; ``other`` under
    the same key is refused, leaving ``first``."""
    register(first)
    register(again)
    assert registered() == 1
    with pytest.raises(RegisteredTwice):
        register(other)
    assert registered() == 1


def named_alike() -> Callable[..., Any]:
    """A new function each call, each with the same module and qualified name."""

    def source(*args: Any, **kwargs: Any) -> None:
        return None

    return source


class CodedError(Exception):
    pass


class RegistryTests:
    def test_a_presenter(self, monkeypatch):
        monkeypatch.setattr(presenters, "_PRESENTERS", {})

        class Shown(Presenter):
            pass

        class Other(Presenter):
            pass

        one_rule(
            lambda cls: presenter_register({"test.event": "Tested"})(cls),
            lambda: len(presenters._PRESENTERS),
            Shown,
            Shown,
            Other,
        )
        with pytest.raises(RegisteredTwice):  # the same class under another title
            presenter_register({"test.event": "Retitled"})(Shown)

    def test_a_panel(self, monkeypatch):
        monkeypatch.setattr(pages, "_PANELS", type(pages._PANELS)(dict))
        source = named_alike()

        one_rule(
            lambda f: panel_register("test-slot")(f),
            lambda: len(pages._PANELS["test-slot"]),
            source,
            source,
            named_alike(),
        )

    def test_a_coded_error(self, monkeypatch):
        monkeypatch.setattr(errors, "_CODED_ERRORS", {})

        one_rule(
            lambda statuses: coded_error_register(CodedError, statuses),
            lambda: len(errors._CODED_ERRORS),
            {"TAKEN": 409},
            {"TAKEN": 409},
            {"TAKEN": 400},
        )

    @pytest.mark.parametrize(
        ("name", "register"),
        [("_COPY_PURGES", erasure_copies_register), ("_ACTOR_DATA", erasure_actor_data_register)],
    )
    def test_an_erasure_of_copies_or_of_actor_data(self, monkeypatch, name, register):
        monkeypatch.setattr(erasure, name, {})
        purge = named_alike()

        one_rule(register, lambda: len(getattr(erasure, name)), purge, purge, named_alike())

    def test_the_impact_counter(self, monkeypatch):
        monkeypatch.setattr(impact, "_COUNTER", {})
        counter = named_alike()

        one_rule(
            impact_counter_register, lambda: len(impact._COUNTER), counter, counter, named_alike()
        )
