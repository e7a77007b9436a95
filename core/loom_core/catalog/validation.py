"""An op's input schema, checked: the formats the published schemas name, the compiled
validator (jsonschema-rs) that passes what is valid, and the refusal `jsonschema`'s first error
becomes (a 422 naming its field, in Loom's words)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NoReturn

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

from ..errors import ValidationFailed, invalid_field
from ..json_limits import QUOTE_CHARS, clip
from .schema import NOT_BLANK

# The formats the published schemas name, checked as the planes parse them.
FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """RFC 3339 with a date, a time and an offset, as the planes parse it (datetime.fromisoformat)."""
    if not isinstance(value, str):
        return True
    if "T" not in value:
        return False
    parsed = datetime.fromisoformat(value)
    return parsed.tzinfo is not None


def _date_time_ok(value: str) -> bool:
    try:
        return _is_date_time(value)
    except ValueError:
        return False


# Python's `\S` is "not str.isspace()" (U+001C..U+001F and U+0085 included); Rust's regex has
# its own whitespace set. The compiled validator's copy of a schema names Python's set, so it
# is never looser than `re` (tests/core/test_fast_validation.py checks every pattern).
_PY_SPACE = "".join(f"\\u{c:04x}" for c in range(0x10000) if chr(c).isspace())
_RUST_PATTERNS = {r"\S": f"[^{_PY_SPACE}]"}


def _fast_schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: (_RUST_PATTERNS.get(v, v) if k == "pattern" and isinstance(v, str) else _fast_schema(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_fast_schema(v) for v in schema]
    return schema


def fast_validator(schema: dict[str, Any]) -> Any:
    """The op's input schema compiled (jsonschema-rs): decides valid or not in a fraction of
    `jsonschema`'s time (~0.1 ms against ~5 ms for a batch of 100). Only "valid" is taken from
    it; anything else goes to `jsonschema`, which names the refusal. None: it cannot compile
    the schema (that op is checked by `jsonschema` alone)."""
    try:
        return jsonschema_rs.validator_for(_fast_schema(schema), formats={"date-time": _date_time_ok}, validate_formats=True)
    except Exception:  # noqa: BLE001 - a schema it cannot take is checked the slow way
        return None


def refusal_validator(schema: dict[str, Any]) -> Any:
    """The op's input schema for `jsonschema`, which names a refusal, with its unions (anyOf)
    judged branch by branch without walking what is valid: a branch of another kind than the
    instance (another JSON type, or another value of a required key: the rule language's nodes)
    is refused on its type or key alone, and a branch the compiled validator passes ends the
    union. Walking every kind of every node of a condition tree cost up to 65 ms a refused body.
    The verdict and the refusal are the same (`_chosen_branch` drops the other kinds' branches;
    an unknown kind still lists the accepted values)."""
    unions = {id(any_of): [_Branch(schema, b) for b in any_of] for any_of in _unions(schema)}
    validate_any_of = Draft202012Validator.VALIDATORS["anyOf"]

    def any_of(validator: Any, any_of: list[Any], instance: Any, parent: dict[str, Any]) -> Iterator[ValidationError]:
        branches = unions.get(id(any_of))
        if branches is None:
            yield from validate_any_of(validator, any_of, instance, parent)
            return
        all_errors: list[ValidationError] = []
        for index, branch in enumerate(branches):
            refusal = branch.other_kind(validator, instance)
            if refusal is None and branch.passes(instance):
                return
            errs = list(validator.descend(instance, refusal if refusal is not None else branch.schema, schema_path=index))
            if not errs:
                return
            all_errors.extend(errs)
        yield ValidationError(f"{instance!r} is not valid under any of the given schemas", context=all_errors)

    cls = validators.extend(Draft202012Validator, {"anyOf": any_of})  # type: ignore[no-untyped-call]
    return cls(schema, format_checker=FORMATS)


def _unions(schema: Any) -> Iterator[list[Any]]:
    """Every anyOf list in a schema."""
    if isinstance(schema, dict):
        if isinstance(schema.get("anyOf"), list):
            yield schema["anyOf"]
        for value in schema.values():
            yield from _unions(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _unions(value)


class _Branch:
    """One branch of a union: its kind (one JSON type and/or string values of required keys,
    when it states them) and, compiled when first asked, its validator."""

    def __init__(self, root: dict[str, Any], schema: Any):
        self.schema = schema
        self._root_defs = root.get("$defs", {})
        resolved = schema
        while isinstance(resolved, dict) and set(resolved) == {"$ref"} and resolved["$ref"].startswith("#/$defs/"):
            resolved = self._root_defs.get(resolved["$ref"].removeprefix("#/$defs/"))
        resolved = resolved if isinstance(resolved, dict) else {}
        self._type = resolved["type"] if isinstance(resolved.get("type"), str) else None
        self._properties: dict[str, Any] = resolved.get("properties", {})
        self._keys: dict[str, list[str]] = {}
        for key in resolved.get("required", ()):
            prop = self._properties.get(key, {})
            values = [prop["const"]] if "const" in prop else prop.get("enum")
            if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
                self._keys[key] = values
        self._compiled: Any = False  # not compiled yet; None: it cannot be

    def other_kind(self, validator: Any, instance: Any) -> dict[str, Any] | None:
        """The part of the branch that refuses an instance of another kind, or None."""
        if self._type is not None and not validator.is_type(instance, self._type):
            return {"type": self._type}
        if isinstance(instance, dict):
            for key, values in self._keys.items():
                if key in instance and not (isinstance(instance[key], str) and instance[key] in values):
                    return {"properties": {key: self._properties[key]}}
        return None

    def passes(self, instance: Any) -> bool:
        """The compiled validator's "valid" (only that is taken from it, as for a whole body)."""
        if self._compiled is False:
            self._compiled = fast_validator({**(self.schema if isinstance(self.schema, dict) else {}), "$defs": self._root_defs})
        if self._compiled is None or not isinstance(self.schema, dict):
            return False
        try:
            return bool(self._compiled.is_valid(instance))
        except Exception:  # noqa: BLE001 - a value it cannot convert: `jsonschema` judges
            return False


def raise_refusal(first: ValidationError) -> NoReturn:
    """`jsonschema`'s first error (by path) as the caller's 422 naming the bad field."""
    err = _chosen_branch(first)
    path = _field_path(err.absolute_path)
    found = [e for e in err.context or () if e.validator in ("const", "enum") and len(e.relative_path) == 1]
    if err.validator in ("anyOf", "oneOf") and found:
        # No kind takes the discriminator (a condition's unknown `op`): name it and the kinds.
        kinds = list(dict.fromkeys(v for e in found for v in (e.validator_value if e.validator == "enum" else [e.validator_value])))
        field_name = _field_path(found[0].absolute_path)
        raise ValidationFailed(
            f"{field_name}: one of {', '.join(map(str, kinds))}", {"field": field_name, "reason": "unknown kind", "accepted": kinds}
        )
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        field_name = ".".join(filter(None, [path, extra[0] if extra else ""]))
        field_name = clip(field_name)
        raise ValidationFailed(f"unknown field {field_name!r}", {"field": field_name, "reason": "unknown field"})
    if err.validator == "required":
        missing = [m for m in err.validator_value if m not in err.instance]
        field_name = ".".join(filter(None, [path, missing[0] if missing else ""]))
        raise invalid_field(field_name, "required")
    field_name = path or "(body)"
    if err.validator == "anyOf" and all("required" in sub for sub in err.validator_value):
        names = [sub["required"][0] for sub in err.validator_value]
        field_name = ".".join(filter(None, [path, names[0]]))
        raise ValidationFailed(
            f"{field_name}: required (name at least one of {', '.join(names)})",
            {"field": field_name, "reason": "required", "one_of": names},
        )
    if err.validator == "pattern":
        reason = "blank" if err.validator_value == NOT_BLANK else "malformed"
        what = "must not be blank" if reason == "blank" else f"malformed (must match {err.validator_value})"
        raise ValidationFailed(f"{field_name}: {what}", {"field": field_name, "reason": reason, "pattern": err.validator_value})
    if err.validator == "format":
        raise ValidationFailed(
            f"{field_name}: malformed (an RFC 3339 time, e.g. 2026-01-02T03:04:05Z)",
            {"field": field_name, "reason": "malformed", "format": err.validator_value},
        )
    if err.validator == "enum":
        raise ValidationFailed(
            f"{field_name}: one of {', '.join(map(str, err.validator_value))}",
            {"field": field_name, "reason": "not one of the accepted values", "accepted": list(err.validator_value)},
        )
    # jsonschema quotes the refused value whole: quote at most QUOTE_CHARS of it.
    quoted = repr(err.instance)
    message = err.message.replace(quoted, clip(quoted)) if len(quoted) > QUOTE_CHARS else err.message
    raise invalid_field(field_name, message)


def _chosen_branch(err: Any) -> Any:
    """An anyOf / oneOf over kinds discriminated by a `const` key (the rule language's nodes): the
    error of the branch whose kind and type match (the fewest errors among them), so the refusal
    names the bad node, not the union. Stops at a union no branch of which matches."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        branches: dict[Any, list[Any]] = {}
        for e in err.context:
            branches.setdefault(e.relative_schema_path[0], []).append(e)
        matching = [errs for errs in branches.values() if not any(_wrong_kind(e) for e in errs)]
        if not matching or len(matching) == len(branches):
            break  # no kind matches, or the union is not over kinds (one_required_of, an instant's forms)
        errs = min(matching, key=len)
        err = sorted(errs, key=lambda e: (list(e.absolute_path), e.validator != "required"))[0]
    return err


def _wrong_kind(e: Any) -> bool:
    """A branch error saying the instance is another kind: its type, or its discriminator's value."""
    return (e.validator == "type" and len(e.relative_path) == 0) or (e.validator in ("const", "enum") and len(e.relative_path) == 1)


def _field_path(parts: Iterable[str | int]) -> str:
    """A JSON path as the planes name fields: `posters[0]`, `brief.inputs`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
