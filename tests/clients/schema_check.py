"""How the Python client's typed bodies are held against the OpenAPI schema.

``mismatches(annotation, schema, ...)`` lists where a field the client uses is not in the
schema, or has another type there: a ``TypedDict``'s every key must be a property of the
object schema (recursively), ``str``/``int``/``float``/``bool`` the schema's type, a
``Literal``'s values within its enum (a request's) or covering it (a response's), a value
the schema says may be null one the client takes as ``None`` (a response's), and one the
client may send as ``None`` one the schema lets be null (a request's).
``unsent_required(annotation, schema, ...)`` lists the fields a request body's schema requires
that the client's type leaves optional. A schema that says
nothing of a value (``{}``, a free-form object) holds any.
"""

from __future__ import annotations

import types
import typing
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)


def resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """The schema with its ``$ref`` followed and a lone ``allOf`` merged (as drf-spectacular
    writes a nullable reference)."""
    while True:
        if "$ref" in schema:
            extra = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**components[schema["$ref"].rsplit("/", 1)[1]], **extra}
        elif "allOf" in schema and len(schema["allOf"]) == 1:
            extra = {k: v for k, v in schema.items() if k != "allOf"}
            schema = {**resolve(schema["allOf"][0], components), **extra}
        else:
            return schema


def _typed_dict_hints(annotation: Any) -> tuple[Any, dict[str, Any]]:
    """A TypedDict (or a generic one's alias, ``Page[Memory]``) and its keys' types, type
    variables replaced."""
    origin = get_origin(annotation) or annotation
    hints = get_type_hints(origin)
    parameters = getattr(origin, "__parameters__", ())
    if parameters and get_args(annotation):
        bound = dict(zip(parameters, get_args(annotation), strict=True))
        hints = {key: _substitute(value, bound) for key, value in hints.items()}
    return origin, hints


def _substitute(annotation: Any, bound: dict[Any, Any]) -> Any:
    if isinstance(annotation, typing.TypeVar):
        return bound.get(annotation, Any)
    args = get_args(annotation)
    origin = get_origin(annotation)
    if not args or origin is None:
        return annotation
    substituted = tuple(_substitute(arg, bound) for arg in args)
    if origin in (Union, types.UnionType):
        return Union[substituted]  # noqa: UP007 - built at run time
    if origin is Literal:
        return annotation
    return origin[substituted]


def is_typed_dict(annotation: Any) -> bool:
    return is_typeddict(get_origin(annotation) or annotation)


def _nullable(schema: dict[str, Any]) -> bool:
    if schema.get("nullable") or schema.get("type") == "null":
        return True
    return any(
        _nullable(branch) for key in ("oneOf", "anyOf") for branch in schema.get(key, [])
    ) or (None in schema.get("enum", []))


_SCALARS = {str: {"string"}, int: {"integer"}, float: {"number", "integer"}, bool: {"boolean"}}


def mismatches(
    annotation: Any, schema: dict[str, Any], components: dict[str, Any], *, where: str, sent: bool
) -> list[str]:
    """Where ``annotation`` (the client's type of a value at ``where``) disagrees with the
    schema of that value; ``sent``: a request's value (else a response's)."""
    schema = resolve(schema, components)
    if annotation is Any:
        return []
    args = get_args(annotation)
    is_union = get_origin(annotation) in (Union, types.UnionType)
    takes_none = is_union and type(None) in args
    problems = []
    if sent and takes_none and not _nullable(schema):
        problems.append(f"{where}: the client may send null; the schema does not allow it")
    if not sent and not takes_none and _nullable(schema):
        problems.append(f"{where}: the schema says it may be null; the client's type not")
    if is_union:
        rest = [arg for arg in args if arg is not type(None)]
        if all(get_origin(arg) is Literal for arg in rest):
            annotation = Literal[tuple(v for arg in rest for v in get_args(arg))]
        elif len(rest) == 1:
            annotation = rest[0]
        else:
            return problems  # a union of shapes: not compared
    return problems + _shape_mismatches(annotation, schema, components, where=where, sent=sent)


def _shape_mismatches(
    annotation: Any, schema: dict[str, Any], components: dict[str, Any], *, where: str, sent: bool
) -> list[str]:
    """``mismatches`` of a value that is not null, against any of the schema's forms."""
    branches = schema.get("oneOf") or schema.get("anyOf")
    if not branches:
        return _plain_mismatches(annotation, schema, components, where=where, sent=sent)
    found = [
        _shape_mismatches(
            annotation, resolve(branch, components), components, where=where, sent=sent
        )
        for branch in branches
        if resolve(branch, components).get("enum") != [None]  # the null of a nullable choice
    ]
    if any(not problems for problems in found):
        return []
    return [f"{where}: matches none of the schema's forms: {found}"]


def _plain_mismatches(
    annotation: Any, schema: dict[str, Any], components: dict[str, Any], *, where: str, sent: bool
) -> list[str]:
    kind = schema.get("type")
    if get_origin(annotation) is Literal:
        values = {v for v in get_args(annotation)}
        enum = {v for v in schema.get("enum", []) if v not in (None, "")}
        if kind not in (None, "string"):
            return [f"{where}: the client has text; the schema has {kind}"]
        if enum and sent and not values <= enum:
            return [f"{where}: the client may send {sorted(values - enum)}, not in {sorted(enum)}"]
        if enum and not sent and not enum <= values:
            return [f"{where}: the schema may answer {sorted(enum - values)}; the client not"]
        return []
    if annotation in _SCALARS:
        if kind is None or kind in _SCALARS[annotation]:
            return []
        return [f"{where}: the client has {annotation.__name__}; the schema has {kind}"]
    origin = get_origin(annotation)
    if origin is list:
        if kind not in (None, "array"):
            return [f"{where}: the client has a list; the schema has {kind}"]
        items = schema.get("items")
        if items is None:
            return []
        return mismatches(get_args(annotation)[0], items, components, where=f"{where}[]", sent=sent)
    if origin is dict:
        if kind not in (None, "object"):
            return [f"{where}: the client has an object; the schema has {kind}"]
        values = schema.get("additionalProperties")
        if not isinstance(values, dict):
            return []
        return mismatches(
            get_args(annotation)[1], values, components, where=f"{where}{{}}", sent=sent
        )
    if is_typed_dict(annotation):
        if kind not in (None, "object"):
            return [f"{where}: the client has an object; the schema has {kind}"]
        properties = schema.get("properties")
        if not properties:
            return []  # a free-form object: the schema says nothing of its fields
        _, hints = _typed_dict_hints(annotation)
        problems = []
        for key, value in hints.items():
            if key not in properties:
                problems.append(f"{where}.{key}: not in the schema")
                continue
            problems += mismatches(
                value, properties[key], components, where=f"{where}.{key}", sent=sent
            )
        return problems
    return []


def typed_mismatches(client: Any, server: Any, *, where: str) -> list[str]:
    """Where the client's TypedDict ``client`` disagrees with the server's own ``server``
    (the envelope, which the schema leaves free-form): each key of the client's must be the
    server's, with the same type."""
    if is_typed_dict(client) and is_typed_dict(server):
        _, ours = _typed_dict_hints(client)
        _, theirs = _typed_dict_hints(server)
        problems = []
        for key, value in ours.items():
            if key not in theirs:
                problems.append(f"{where}.{key}: the server has no such key")
            else:
                problems += typed_mismatches(value, theirs[key], where=f"{where}.{key}")
        return problems
    if get_origin(client) is not None and get_origin(client) is get_origin(server):
        problems = []
        for index, (a, b) in enumerate(zip(get_args(client), get_args(server), strict=False)):
            problems += typed_mismatches(a, b, where=f"{where}<{index}>")
        return problems
    if client == server:
        return []
    return [f"{where}: the client has {client}; the server has {server}"]


def unsent_required(
    annotation: Any, schema: dict[str, Any], components: dict[str, Any], *, where: str
) -> list[str]:
    """The fields a request body's schema requires that the client's ``TypedDict`` may leave
    out. Only the body itself: a nested document (a policy, one type for the floor's every
    axis and a workload's few) is held by its own checks."""
    schema = resolve(schema, components)
    if not is_typed_dict(annotation):
        return []
    origin, hints = _typed_dict_hints(annotation)
    optional = _optional_keys(origin)
    return [
        f"{where}.{key}: required by the schema; optional here"
        for key in schema.get("required", [])
        if key in hints and key in optional
    ]


def _optional_keys(typed_dict: Any) -> set[str]:
    """The keys a ``TypedDict`` may leave out. Not ``__optional_keys__``: under postponed
    annotations Python 3.11 counts a ``NotRequired[...]`` key as required there."""
    total = getattr(typed_dict, "__total__", True)
    optional = set()
    for key, annotation in get_type_hints(typed_dict, include_extras=True).items():
        marked = get_origin(annotation)
        if marked is NotRequired or (not total and marked is not Required):
            optional.add(key)
    return optional
