"""Every named route resolves to itself: no pattern listed earlier takes another's paths, so
the order of the URL patterns (the recall route first, console/urls.py) changes nothing."""

from __future__ import annotations

import uuid

from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

SAMPLES = {
    "int": 7,
    "id": 7,
    "string": "user:ada",
    "slug": "acme",
    "uuid": uuid.UUID(int=5),
    "path": "a/b",
}


def _routes(patterns, namespace=""):
    """(name, converters by keyword) of every named pattern, with those of its includes."""
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            outer = dict(entry.pattern.converters)
            for name, converters in _routes(entry.url_patterns, inner):
                yield name, {**outer, **converters}
        elif isinstance(entry, URLPattern) and entry.name:
            yield f"{namespace}{entry.name}", dict(entry.pattern.converters)


def _converter_name(converter) -> str:
    return type(converter).__name__.removesuffix("Converter").lower()


def test_every_named_route_resolves_back_to_itself():
    checked = 0
    for name, converters in _routes(get_resolver().url_patterns):
        if name.startswith("admin:"):
            continue  # Django's own site
        kwargs = {key: SAMPLES[_converter_name(c)] for key, c in converters.items()}
        url = reverse(name, kwargs=kwargs)
        match = resolve(url)
        assert match.view_name == name, f"{url} is taken by {match.view_name}, not {name}"
        checked += 1
    assert checked > 60


def test_the_recall_route_is_the_first_the_resolver_tries():
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "v1/")
    first = api.url_patterns[0].url_patterns[0]
    assert first.name == "api-recall"
