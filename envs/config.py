"""The one config dialect of rockroll: typed models, their errors, and changed keys.

Every config of rockroll (training, evaluation, rollout, sandbox manager and pool, job configs of
the API) is a :class:`ConfigModel`: a pydantic v2 model with ``extra="forbid"``, ``Literal``
choices (or :class:`OneOf` for choices owned by a registry) and a ``description`` on every field;
checks that span fields are ``model_validator``\\ s raising ``ValueError`` with what to do instead.
A key that moved lives in the model's ``moved_keys``: using the old key raises a
:class:`ConfigError` naming the new one. :func:`with_defaults` gives one model other defaults for
another role without declaring its fields again.

Whatever the source of a bad field (a YAML file, a ``k=v`` override, a constructor call), the
error is one :class:`ConfigError` (a ``ValueError``) naming the dotted key and what is allowed.
The loader (YAML files, overrides, ``--help-config`` tables) is :mod:`rockroll.envs.config_loader`.
It lives in ``envs`` (the lowest layer) so every layer, sandbox included, speaks the same dialect.
"""

from __future__ import annotations

import difflib
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar, Union, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import ErrorDetails, PydanticCustomError, core_schema
from typing_extensions import TypeForm

from rockroll.envs.errors import RockrollError
from rockroll.envs.registries import close_names

__all__ = ["ConfigModel", "ConfigError", "OneOf", "parse_config", "with_defaults"]

T = TypeVar("T")
M = TypeVar("M", bound="ConfigModel")


class ConfigError(RockrollError, ValueError):
    """A config value that cannot be used: names the dotted ``key`` and what is ``allowed``.

    Attributes:
        key: dotted key of the (first) bad field, e.g. ``rollout.mode``; ``""`` for the whole config.
        allowed: what the key accepts (choices, type, bound, known keys), or ``""``.
        value: the rejected value (None when missing or not applicable).
        problems: every problem found, as ``(key, message)`` pairs (the message is the whole line).
    """

    def __init__(self, key: str, message: str, *, allowed: str = "", value: object = None,
                 problems: list[tuple[str, str]] | None = None, errors: list[ErrorDetails] | None = None) -> None:  # fmt: skip
        self.problems = problems or [(key, message)]
        super().__init__("\n".join(m for _, m in self.problems))
        self.key, self.allowed, self.value = key, allowed, value
        self.errors = errors or []  # pydantic's error dicts, located relative to the validated type

    # picklable (Ray workers, process pools): rebuilt from key, message, attributes
    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str], dict[str, object]]:
        return (type(self), (self.key, str(self)), self.__dict__)

    @classmethod
    def from_validation(cls, err: ValidationError, tp: object) -> ConfigError:
        """One ConfigError for a pydantic ``ValidationError`` raised validating type ``tp``."""
        raw = _flatten(err.errors(include_url=False))
        found = [_explain(e, tp) for e in raw]
        key, message, allowed, value = found[0]
        return cls(key, message, allowed=allowed, value=value, problems=[(k, m) for k, m, _, _ in found], errors=raw)


def _flatten(errors: list[ErrorDetails], prefix: tuple[int | str, ...] = ()) -> list[ErrorDetails]:
    """Errors with absolute locations: a nested model's ConfigError (raised by its ``__init__``) is opened up."""
    out: list[ErrorDetails] = []
    for e in errors:
        inner, loc = (e.get("ctx") or {}).get("error"), prefix + tuple(e["loc"])
        if isinstance(inner, ConfigError) and inner.errors:
            out += _flatten(inner.errors, loc)
        else:
            out.append({**e, "loc": loc})
    return out


class OneOf:
    """``Annotated[str, OneOf(choices)]``: the value must be one of ``choices``.

    For choice lists owned elsewhere (a :class:`~rockroll.envs.registries.Registry` such as
    ``ENGINE_KINDS``, a backend list): ``choices`` is read at validation time, so a kind registered
    after import is accepted. Pass the registry itself (a ``Registry``, dict or tuple) or a function
    returning the choices. A bad value's error lists the choices and suggests the nearest.
    """

    __slots__ = ("_source",)

    def __init__(self, choices: Iterable[object] | Callable[[], Iterable[object]]) -> None:
        self._source = choices

    def choices(self) -> tuple[object, ...]:
        return tuple(self._source() if callable(self._source) else self._source)

    def _check(self, value: object) -> object:
        choices = self.choices()
        if value not in choices:
            raise PydanticCustomError("choice", "must be one of {choices}", {"choices": ", ".join(map(str, choices))})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = handler(schema)
        out["enum"] = list(self.choices())
        return out

    def __repr__(self) -> str:
        return f"OneOf({'|'.join(map(str, self.choices()))})"


class ConfigModel(BaseModel):
    """Base of every config: unknown keys are errors, numbers read from YAML are accepted as text.

    Building one directly (``TrainConfig(total_steps=-1)``) raises :class:`ConfigError` too.
    ``moved_keys`` maps a key this model used to have to where it lives now (relative to this model,
    e.g. ``{"max_new_tokens": "episode.max_tokens_per_turn"}``): the old key is an error that names
    the new one.
    """

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)
    moved_keys: ClassVar[Mapping[str, str]] = {}

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ConfigError.from_validation(e, type(self)) from e

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: object) -> object:
        if isinstance(data, Mapping) and cls.moved_keys:
            for old in data:
                if old in cls.moved_keys:
                    raise PydanticCustomError(
                        "moved_key", "{old} moved to {new}", {"old": old, "new": cls.moved_keys[old]}
                    )
        return data


def with_defaults(model: type[M], name: str, doc: str, **defaults: object) -> type[M]:
    """A subclass of ``model`` named ``name`` whose fields ``defaults`` have other defaults.

    Types, bounds, descriptions and checks stay the model's own (each setting is declared once, where
    its owner lives); a config of another role (the trainer's episodes) only picks other defaults.
    Bind the result to a module-level variable called ``name`` in the calling module (pickling finds
    the class there).
    """
    unknown = sorted(set(defaults) - set(model.model_fields))
    if unknown:
        raise KeyError(f"{model.__name__} has no fields {unknown}; known: {', '.join(model.model_fields)}")
    namespace: dict[str, object] = {
        "__module__": str(sys._getframe(1).f_globals.get("__name__", model.__module__)),
        "__doc__": doc,
        "__annotations__": {key: model.model_fields[key].annotation for key in defaults},
    }
    for key, value in defaults.items():
        namespace[key] = FieldInfo.merge_field_infos(model.model_fields[key], default=value)
    # what pydantic's create_model does (whose **fields mypy would match against its own keyword arguments)
    made = types.new_class(
        name, (model,), {"__pydantic_reset_parent_namespace__": False}, lambda ns: ns.update(namespace)
    )
    assert issubclass(made, model)
    return made


# ----------------------------------------------------------------- parsing
@overload
def parse_config(tp: type[T], data: object) -> T: ...


@overload
def parse_config(tp: TypeForm[object], data: object) -> object: ...


def parse_config(tp: TypeForm[object], data: object) -> object:
    """Validate ``data`` (a nested mapping) into ``tp`` (a model, or any type such as a union)."""
    try:
        if isinstance(tp, type) and issubclass(tp, BaseModel):  # a generic alias is no class
            return tp.model_validate({} if data is None else data)
        adapter: TypeAdapter[object] = TypeAdapter(tp)
        return adapter.validate_python({} if data is None else data)
    except ValidationError as e:
        raise ConfigError.from_validation(e, tp) from e


# -------------------------------------------------------------- internals
def _strip(tp: object) -> object:
    """``tp`` without ``Annotated`` and without ``None`` in an optional."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return _strip(rest[0])
    return tp


def _model(tp: object) -> type[BaseModel] | None:
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _choices(tp: object, metadata: Iterable[object] = ()) -> tuple[object, ...] | None:
    for m in metadata:
        if isinstance(m, OneOf):
            return m.choices()
    if typing.get_origin(tp) is typing.Annotated:
        return _choices(typing.get_args(tp)[0], typing.get_args(tp)[1:])
    if typing.get_origin(tp) is Literal:
        return typing.get_args(tp)
    return None


def _type_text(tp: object, metadata: Iterable[object] = ()) -> str:
    choices = _choices(tp, metadata)
    if choices is not None:
        return "|".join(map(str, choices))
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _type_text(typing.get_args(tp)[0], typing.get_args(tp)[1:])
    if origin in (Union, types.UnionType):
        return " | ".join(_type_text(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is not None:
        args = [_type_text(a) for a in typing.get_args(tp) if a is not Ellipsis]
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(args)}]" if args and name != "dict" else name
    return getattr(tp, "__name__", str(tp)).replace("Any", "any")


def _walk(tp: object, loc: tuple[int | str, ...]) -> tuple[list[str], object]:
    """The dotted key parts of an error location, and the type found there (None when unknown)."""
    parts: list[str] = []
    for item in loc:
        raw = tp
        tp = _strip(tp)
        origin = typing.get_origin(tp)
        model = _model(tp)
        if model is not None:
            f = model.model_fields.get(item) if isinstance(item, str) else None
            parts.append(str(item))
            tp = None if f is None else typing.Annotated[f.annotation, *f.metadata] if f.metadata else f.annotation
        elif origin in (list, tuple) and isinstance(item, int):
            parts.append(str(item))
            tp = typing.get_args(tp)[0] if typing.get_args(tp) else None
        elif origin is dict:
            parts.append(str(item))
            tp = typing.get_args(tp)[1] if typing.get_args(tp) else None
        elif origin in (Union, types.UnionType):  # the item names the union member (a tag or class)
            tp = _member(raw, item)
        else:
            parts.append(str(item))
            tp = None
    return parts, tp


def _member(union: object, item: int | str) -> object:
    for arg in typing.get_args(_strip(union)):
        meta = typing.get_args(arg)[1:] if typing.get_origin(arg) is typing.Annotated else ()
        if any(isinstance(m, Tag) and m.tag == item for m in meta) or getattr(_strip(arg), "__name__", None) == item:
            return arg
    return None


_KINDS: dict[object, str] = {
    int: "int",
    float: "a number",
    bool: "true or false",
    str: "text",
    list: "a list",
    dict: "a mapping",
}
_BOUNDS = {"greater_than_equal": ">= {ge}", "greater_than": "> {gt}", "less_than_equal": "<= {le}",
           "less_than": "< {lt}", "multiple_of": "a multiple of {multiple_of}"}  # fmt: skip


def _explain(e: ErrorDetails, tp: object) -> tuple[str, str, str, object]:
    """``(key, message, allowed, value)`` for one pydantic error dict."""
    loc, kind, ctx, value = tuple(e["loc"]), e["type"], e.get("ctx") or {}, e.get("input")
    parts, here = _walk(tp, loc)
    key = ".".join(parts)
    name = key or "the config"
    if kind == "moved_key":
        prefix = key + "." if key else ""
        new = f"{prefix}{ctx['new']}"
        return f"{prefix}{ctx['old']}", f"{prefix}{ctx['old']} moved to {new}", new, None
    if kind == "extra_forbidden":
        parent_parts, parent = _walk(tp, loc[:-1])
        parent_model = _model(_strip(parent))
        known = list(parent_model.model_fields) if parent_model is not None else []
        prefix = ".".join(parent_parts) + "." if parent_parts else ""
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {prefix}{close[0]}?" if close else ";"
        allowed = ", ".join(known)
        return key, f"unknown key {key}{hint} known: {allowed}", allowed, None
    if kind in ("literal_error", "choice", "enum"):
        if ctx.get("field") and isinstance(value, Mapping):  # a union's discriminator (e.g. kind) picked no member
            key, value = f"{key}.{ctx['field']}" if key else str(ctx["field"]), value.get(ctx["field"])
            name, here = key, None
        choices = _choices(here) if here is not None else None
        if choices is None and isinstance(ctx.get("choices"), str):
            choices = tuple(ctx["choices"].split(", "))
        allowed = ", ".join(map(str, choices)) if choices else str(ctx.get("choices") or ctx.get("expected", ""))
        close = close_names(value, choices) if choices and isinstance(value, str) else []
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        return key, f"{name} must be one of {allowed}; got {value!r}{hint}", allowed, value
    if kind == "missing":
        return key, f"{name} is required", _type_text(here) if here is not None else "", None
    if kind in _BOUNDS:
        allowed = _BOUNDS[kind].format(**ctx)
        return key, f"{name} must be {allowed}, got {value!r}", allowed, value
    if kind in ("value_error", "assertion_error"):
        msg = str(ctx.get("error") or e["msg"]).removeprefix("Value error, ")
        return key, (msg if not key or key in msg else f"{key}: {msg}"), "", value
    if kind.endswith(("_type", "_parsing")) or kind in ("int_from_float", "model_attributes_type"):
        sub = _model(_strip(here))
        base = typing.get_origin(_strip(here)) or _strip(here)
        if sub is not None:
            allowed = f"a mapping of its fields ({', '.join(sub.model_fields)})"
        else:
            allowed = _KINDS.get(base) or (_type_text(here) if here is not None else kind.split("_")[0])
        return key, f"{name} must be {allowed}, got {value!r}", allowed, value
    msg = str(e["msg"]).replace("Input should be", "must be").replace("Input", "the value")
    return key, f"{name}: {msg}", "", value
