"""The check of a MyApp's spec, compiled from the CRD's own schema.

The CRD (crds/, through the generated gitsync.model.crd_schema) says what a spec holds:
its fields, types, required fields, bounds, enums and list keys. Each node of that schema
becomes one check, once, at import; a keyword no check here enforces is an error then,
so the CRD can say nothing this checker would let through unseen. What gitsync adds is
its words (a message names what is wanted, in the user's terms) and the rules it holds
on purpose beyond the server's: an unknown field is an error, not pruned; an image is
printable ASCII; a quantity string has a bounded length and a value the server can hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from gitsync.errors import quote
from gitsync.model.api import Obj
from gitsync.model.crd_schema import OPENAPI_V3_SCHEMA
from gitsync.model.integers import as_integer
from gitsync.model.problems import FieldPath, Problems, field_name, key_text, kind_of
from gitsync.model.quantity import canonical_quantity

_IMAGE = re.compile(r"[!-~]+")

Node = Mapping[str, Any]
#: checks the value at a path and gives it back as the clean object holds it
Check = Callable[[object, FieldPath, Problems], object]


class SchemaError(ValueError):
    """The CRD's schema says something that :func:`compile_spec` cannot check."""


#: what the messages call a value of these fields, where the schema's shape reads worse
_WORDS: Final[Mapping[FieldPath, str]] = {
    ("spec",): "a mapping with an image",
    ("spec", "env"): "a list of name/value pairs",
}
#: the words YAML 1.1 (go-yaml, and so kubectl) reads as booleans, by the value read
_YAML_BOOLS: Final[Mapping[str, bool]] = {
    **dict.fromkeys(("y", "yes", "true", "on"), True),
    **dict.fromkeys(("n", "no", "false", "off"), False),
}
_INT_FORMATS: Final = {"int32": 2**31 - 1, "int64": 2**63 - 1}
_COMMON: Final = frozenset({"type", "description"})
# nor does any quantity the API server accepts hold more characters than this
_MAX_QUANTITY = 100


def compile_spec(schema: Node) -> Check:
    """The check of ``spec`` for a CRD's ``openAPIV3Schema``."""
    return _compile(schema["properties"]["spec"], ("spec",))


def _compile(node: Node, path: FieldPath) -> Check:
    kind = node.get("type")
    if path in _STRICTER:
        return _STRICTER[path](node, path)
    if "enum" in node:
        return _enum(node, path)
    if kind == "integer":
        return _integer_field(node, path)
    if kind == "boolean":
        _only(node, path, "default")
        return _boolean
    if kind == "string":
        return _string(node, path)
    if kind == "array":
        return _list(node, path)
    if kind == "object" and "additionalProperties" in node:
        return _resource_list(node, path)
    if kind == "object":
        return _record(node, path)
    raise SchemaError(f"{field_name(path)}: a schema of type {kind!r} is not checked")


def _only(node: Node, path: FieldPath, *allowed: str) -> None:
    extra = sorted(set(node) - _COMMON - set(allowed))
    if extra:
        raise SchemaError(f"{field_name(path)}: {', '.join(extra)} is not checked by gitsync")


def _non_empty(node: Node, path: FieldPath) -> bool:
    """Whether a string must not be empty; no other length is checked here."""
    _only(node, path, "minLength")
    if node.get("minLength", 0) > 1:
        raise SchemaError(f"{field_name(path)}: a minLength above 1 is not checked by gitsync")
    return node.get("minLength") == 1


def _image(node: Node, path: FieldPath) -> Check:
    # printable ASCII, as every image reference is (so never empty either): an invisible or
    # look-alike character (a registry host spelled with a Cyrillic letter) is refused here
    _non_empty(node, path)

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if not isinstance(value, str) or not _IMAGE.fullmatch(value):
            out.append((path, f"must be a non-empty image reference, found {kind_of(value)}"))
        return value

    return check


def _enum(node: Node, path: FieldPath) -> Check:
    _only(node, path, "enum")
    allowed = tuple(node["enum"])
    words = ", ".join(map(str, allowed))

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if value not in allowed:
            out.append((path, f"must be one of {words}, found {kind_of(value)}{_quote(value)}"))
        return value

    def _quote(value: object) -> str:
        # ``rollback: off``: YAML (kubectl's too) reads a bare off, on, yes or no as a
        # boolean, so the word the enum names never arrives
        if not isinstance(value, bool):
            return ""
        word = next((w for w in allowed if _YAML_BOOLS.get(str(w).lower()) is value), None)
        if word is None:
            return ""
        return f'; write "{word}" in quotes: YAML reads a bare {word} as {str(value).lower()}'

    return check


def _integer_field(node: Node, path: FieldPath) -> Check:
    _only(node, path, "format", "minimum", "maximum", "default")
    largest = _INT_FORMATS[node.get("format", "int64")]
    low, high = node.get("minimum", -largest - 1), node.get("maximum", largest)

    def check(value: object, path: FieldPath, out: Problems) -> object:
        return _integer(value, low, high, path, out)

    return check


def _boolean(value: object, path: FieldPath, out: Problems) -> object:
    if not isinstance(value, bool):
        out.append((path, f"must be true or false (unquoted), found {kind_of(value)}"))
    return value


def _string(node: Node, path: FieldPath) -> Check:
    non_empty = _non_empty(node, path)

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if non_empty and (not isinstance(value, str) or not value):
            out.append((path, f"must be a non-empty string, found {kind_of(value)}"))
        elif not isinstance(value, str):
            out.append((path, f"must be a string, found {kind_of(value)}; quote it in the YAML"))
        return value

    return check


def _list(node: Node, path: FieldPath) -> Check:
    """A list of records; a list map's items are unique by their key."""
    _only(node, path, "items", "x-kubernetes-list-type", "x-kubernetes-list-map-keys")
    keys = tuple(node.get("x-kubernetes-list-map-keys", ()))
    if len(keys) > 1 or node["items"].get("type") != "object":
        raise SchemaError(f"{field_name(path)}: only a list of records, keyed by one field")
    item = _item(node["items"], (*path, "*"), keys[0] if keys else None)
    noun = _WORDS.get(path, "a list")

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if not isinstance(value, list):
            out.append((path, f"must be {noun}, found {kind_of(value)}"))
            return value
        seen: dict[object, int] = {}
        return [item(v, (*path, i), out, seen) for i, v in enumerate(value)]

    return check


def _record(node: Node, path: FieldPath) -> Check:
    """A mapping of the fields the schema names, checked in the document's order; what is
    required and missing is said last."""
    fields, required, noun, unknown = _fields(node, path)

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if not isinstance(value, dict):
            out.append((path, f"must be {noun}, found {kind_of(value)}"))
            return value
        result: Obj = {}
        for name, item in value.items():
            here = (*path, key_text(name))
            if name in fields:
                item = fields[name](item, here, out)
            else:
                # the CRD's structural schema would prune it silently; tell the user instead
                out.append((here, unknown))
            result[str(name)] = item
        for name in required:
            if name not in value:
                out.append(((*path, name), "required"))
        return result

    return check


#: checks a list item at a path, with the index of each key value the list holds so far
ItemCheck = Callable[[object, FieldPath, Problems, dict[object, int]], object]


def _item(node: Node, path: FieldPath, key: str | None) -> ItemCheck:
    """A list item: a record read as one entry, so what is unknown is said first, then each
    field in the schema's order, a required one that is missing as null. An item whose
    ``key`` repeats an earlier item's is a duplicate (the API server merges list maps by
    it, so one of the two would be lost)."""
    fields, required, noun, unknown = _fields(node, path)

    def check(value: object, path: FieldPath, out: Problems, seen: dict[object, int]) -> object:
        if not isinstance(value, dict):
            out.append((path, f"must be {noun}, found {kind_of(value)}"))
            return value
        for name in value:
            if name not in fields:
                out.append(((*path, key_text(name)), unknown))
        result: Obj = {str(k): v for k, v in value.items()}
        for name, field in fields.items():
            if name in value or name in required:
                found = out.found
                result[name] = field(value.get(name), (*path, name), out)
                if name == key and out.found == found:
                    _unique(result[name], (*path, name), seen, out)
        return result

    return check


def _fields(node: Node, path: FieldPath) -> tuple[dict[str, Check], tuple[str, ...], str, str]:
    """A record's checks by field, its required fields, and the words for it."""
    _only(node, path, "properties", "required")
    fields = {name: _compile(sub, (*path, name)) for name, sub in node["properties"].items()}
    names = list(fields)
    listed = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
    noun = _WORDS.get(path, f"a mapping with {listed}")
    return (
        fields,
        tuple(node.get("required", ())),
        noun,
        f"unknown field (known: {', '.join(names)})",
    )


def _unique(value: object, path: FieldPath, seen: dict[object, int], out: Problems) -> None:
    *at, index, key = path
    if value in seen:
        field = at[-1]
        out.append(
            (path, f"duplicate {field} {key} {quote(str(value))} (also {field}[{seen[value]}])")
        )
    else:
        seen[value] = int(index)


def _resource_list(node: Node, path: FieldPath) -> Check:
    """A mapping of resource names to quantities (a container's requests, its limits)."""
    _only(node, path, "additionalProperties")
    quantity = _quantity(node["additionalProperties"], (*path, "*"))

    def check(value: object, path: FieldPath, out: Problems) -> object:
        if not isinstance(value, dict):
            out.append((path, f"must be a mapping of quantities, found {kind_of(value)}"))
            return value
        result: Obj = {}
        for name, amount in value.items():
            here = (*path, key_text(name))
            if not isinstance(name, str) or not name:
                out.append((here, "a resource name must be a string"))
            result[str(name)] = quantity(amount, here, out)
        return result

    return check


def _quantity(node: Node, path: FieldPath) -> Check:
    _only(node, path, "x-kubernetes-int-or-string", "anyOf", "pattern")
    either = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-int-or-string") is not True or node.get("anyOf") != either:
        raise SchemaError(f"{field_name(path)}: a quantity is an integer or a string")
    grammar = re.compile(node["pattern"])

    def check(amount: object, path: FieldPath, out: Problems) -> object:
        if isinstance(amount, float) and amount.is_integer() and abs(amount) < 2**53:
            # 1e3 reads as a float, as kubectl reads it, and goes on the wire as the JSON
            # number 1000, as kubectl sends it
            amount = int(amount)
        if isinstance(amount, int) and not isinstance(amount, bool) and amount >= 0:
            return amount
        if isinstance(amount, str) and len(amount) > _MAX_QUANTITY:
            out.append((path, f"must be a quantity of at most {_MAX_QUANTITY} characters"))
        elif isinstance(amount, str) and grammar.fullmatch(amount):
            try:
                # the grammar allows what the API server still refuses (1e2000)
                canonical_quantity(amount)
            except ValueError as e:
                out.append((path, str(e)))
        else:
            hint = "; quote it in the YAML" if isinstance(amount, float) else ""
            msg = f"must be a quantity such as 500m, 2, 128Mi, found {kind_of(amount)}{hint}"
            out.append((path, msg))
        return amount

    return check


def _integer(value: object, low: int, high: int, path: FieldPath, out: Problems) -> object:
    # the CRD says integer: gitsync.model.integers says what stands for one (3.0); a
    # string never, not even "3": kubectl sends it as a string, which the server refuses
    if isinstance(value, str):
        hint = f"; write {value} unquoted" if as_integer(value) is not None else ""
        out.append((path, f"must be an integer from {low} to {high}, found {kind_of(value)}{hint}"))
        return value
    converted = as_integer(value)
    if converted is None or not low <= converted <= high:
        shown = value if converted is None else converted
        out.append((path, f"must be an integer from {low} to {high}, found {kind_of(shown)}"))
        return value
    return converted


#: fields gitsync holds to more than the CRD says, each with the reason in its check
_STRICTER: Final[Mapping[FieldPath, Callable[[Node, FieldPath], Check]]] = {
    ("spec", "image"): _image,
}
#: the check of a MyApp's spec, from the CRD
SPEC: Final = compile_spec(OPENAPI_V3_SCHEMA)
