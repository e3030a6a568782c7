"""The one config dialect and its one loader: typed models, YAML files, dotted ``k=v`` overrides.

Every config of rockroll (training, evaluation, rollout, job configs of the API) is a
:class:`ConfigModel`: a pydantic v2 model with ``extra="forbid"``, ``Literal`` choices (or
:class:`OneOf` for choices owned by a registry) and a ``description`` on every field; checks that
span fields are ``model_validator``\\ s raising ``ValueError`` with what to do instead.

:func:`load_config` reads a YAML file (optional), deep-merges a mapping over it, applies
``a.b.c=value`` overrides (each value parsed as YAML: ``1e-4``, ``false``, ``[0.9, 0.99]``,
``{is_slippery: false}``; list items by index, ``envs.0.episodes=5``) and validates the result.
Whatever the source of a bad field, the error is one :class:`ConfigError` (a ``ValueError``)
naming the dotted key and what is allowed. :func:`describe_config` lists every key (nested ones
dotted) with its type, default and description; ``rockroll train --help-config`` prints it.

Example::

    cfg = load_config(TrainConfig, "configs/frozenlake_tiny.yaml", ["optim.lr=3e-4", "total_steps=20"])
    save_config(cfg, "runs/x/config.yaml")          # the resolved config, loadable again
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml
from pydantic import BaseModel, ConfigDict, Tag, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from rockroll.envs.registries import close_names

__all__ = ["ConfigModel", "ConfigError", "OneOf", "ConfigField", "load_config", "parse_config", "read_yaml"]
__all__ += ["apply_overrides", "merge", "config_to_dict", "save_config", "describe_config", "format_config_help"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value that cannot be used: names the dotted ``key`` and what is ``allowed``.

    Attributes:
        key: dotted key of the (first) bad field, e.g. ``rollout.mode``; ``""`` for the whole config.
        allowed: what the key accepts (choices, type, bound, known keys), or ``""``.
        value: the rejected value (None when missing or not applicable).
        problems: every problem found, as ``(key, message)`` pairs (the message is the whole line).
    """

    def __init__(self, key: str, message: str, *, allowed: str = "", value: Any = None,
                 problems: list[tuple[str, str]] | None = None, errors: list[Any] | None = None) -> None:  # fmt: skip
        self.problems = problems or [(key, message)]
        super().__init__("\n".join(m for _, m in self.problems))
        self.key, self.allowed, self.value = key, allowed, value
        self.errors = errors or []  # pydantic's error dicts, located relative to the validated type

    def __reduce__(self) -> Any:  # picklable (Ray workers, process pools): rebuilt from key, message, attributes
        return (type(self), (self.key, str(self)), self.__dict__)

    @classmethod
    def from_validation(cls, err: ValidationError, tp: Any) -> ConfigError:
        """One ConfigError for a pydantic ``ValidationError`` raised validating type ``tp``."""
        raw = _flatten(err.errors(include_url=False))
        found = [_explain(e, tp) for e in raw]
        key, message, allowed, value = found[0]
        return cls(key, message, allowed=allowed, value=value, problems=[(k, m) for k, m, _, _ in found], errors=raw)


def _flatten(errors: list[Any], prefix: tuple[Any, ...] = ()) -> list[Any]:
    """Errors with absolute locations: a nested model's ConfigError (raised by its ``__init__``) is opened up."""
    out: list[Any] = []
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

    def __init__(self, choices: Iterable[Any] | Callable[[], Iterable[Any]]) -> None:
        self._source = choices

    def choices(self) -> tuple[Any, ...]:
        return tuple(self._source() if callable(self._source) else self._source)

    def _check(self, value: Any) -> Any:
        choices = self.choices()
        if value not in choices:
            raise PydanticCustomError("choice", "must be one of {choices}", {"choices": ", ".join(map(str, choices))})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        out = handler(schema)
        out["enum"] = list(self.choices())
        return out

    def __repr__(self) -> str:
        return f"OneOf({'|'.join(map(str, self.choices()))})"


class ConfigModel(BaseModel):
    """Base of every config: unknown keys are errors, numbers read from YAML are accepted as text.

    Building one directly (``TrainConfig(total_steps=-1)``) raises :class:`ConfigError` too.
    """

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ConfigError.from_validation(e, type(self)) from e


# ----------------------------------------------------------------- loading
def parse_config(tp: type[T] | Any, data: Any) -> T:
    """Validate ``data`` (a nested mapping) into ``tp`` (a model, or any type such as a union)."""
    try:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp.model_validate({} if data is None else data)  # type: ignore[return-value]
        return TypeAdapter(tp).validate_python({} if data is None else data)
    except ValidationError as e:
        raise ConfigError.from_validation(e, tp) from e


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML file holds (FileNotFoundError when missing, ConfigError when not a mapping)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {p} not found; see configs/ for examples")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError("", f"{p} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError("", f"{p} must hold a mapping of config keys, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` deep-merged into ``base`` (in place; mappings merge key by key, anything else replaces)."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (value parsed as YAML) to a nested mapping, in place."""
    for item in overrides:
        key, sep, raw = item.partition("=") if isinstance(item, str) else ("", "", "")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("overrides", f"override {item!r} must look like key=value, e.g. optim.lr=1e-4")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(key, f"{key}: cannot read {raw!r} as a YAML value ({e})", value=raw) from e
        node: Any = data
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                continue
            if not isinstance(node, dict):
                raise ConfigError(key, f"override {item!r}: {'.'.join(parts[:i])} is not a section")
            node = node.setdefault(part, {})
        last = parts[-1]
        if isinstance(node, list) and last.isdigit() and int(last) < len(node):
            node[int(last)] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(key, f"override {item!r}: {'.'.join(parts[:-1])} is not a section")
    return data


def load_config(
    tp: type[T] | Any,
    path: str | Path | None = None,
    overrides: Iterable[str] = (),
    *,
    data: Mapping[str, Any] | None = None,
) -> T:
    """The typed config: YAML file ``path`` (or defaults), ``data`` merged over it, then overrides."""
    base = read_yaml(path) if path is not None else {}
    merge(base, dict(data or {}))
    return parse_config(tp, apply_overrides(base, list(overrides)))


def config_to_dict(cfg: BaseModel) -> dict[str, Any]:
    """The config as plain nested dicts, lists and scalars (YAML/JSON-ready; loads back equal)."""
    return cfg.model_dump(mode="json")


def save_config(cfg: BaseModel, path: str | Path) -> None:
    """Write the resolved config as YAML (every key, in field order)."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


# ------------------------------------------------------------ describing
@dataclass(frozen=True)
class ConfigField:
    """One key of a config: dotted ``key``, ``type`` (choices as ``a|b``), ``default`` (JSON), ``description``."""

    key: str
    type: str
    default: str
    description: str


def describe_config(model: type[BaseModel], prefix: str = "") -> list[ConfigField]:
    """Every key of ``model`` in field order; nested models flattened (``rollout.mode``, ``envs.N.env``)."""
    rows: list[ConfigField] = []
    for name, f in model.model_fields.items():
        tp = _strip(f.annotation)
        sub = _model(tp)
        if sub is not None:
            rows += describe_config(sub, f"{prefix}{name}.")
            continue
        if typing.get_origin(tp) is list and _model(_strip(typing.get_args(tp)[0])) is not None:
            rows += describe_config(_model(_strip(typing.get_args(tp)[0])), f"{prefix}{name}.N.")  # type: ignore[arg-type]
            continue
        default = "(required)" if f.is_required() else _json(f.get_default(call_default_factory=True))
        bounds = [f"{op} {getattr(m, attr)}" for m in f.metadata for attr, op in _OPS if hasattr(m, attr)]
        kind = ", ".join([_type_text(f.annotation, f.metadata), *bounds])
        rows.append(ConfigField(prefix + name, kind, default, f.description or ""))
    return rows


_OPS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def format_config_help(model: type[BaseModel], title: str = "") -> str:
    """Plain-text table of :func:`describe_config` (what ``--help-config`` prints)."""
    rows = describe_config(model)
    wk = max(len(r.key) for r in rows)
    wt = min(32, max(len(r.type) for r in rows))
    wd = min(24, max(len(r.default) for r in rows))
    lines = [title, ""] if title else []
    lines.append(f"{'key':<{wk}}  {'type':<{wt}}  {'default':<{wd}}  description")
    for r in rows:
        lines.append(f"{r.key:<{wk}}  {r.type:<{wt}}  {r.default:<{wd}}  {r.description}")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------- internals
def _json(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated`` and without ``None`` in an optional."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(rest) == 1:
            return _strip(rest[0])
    return tp


def _model(tp: Any) -> type[BaseModel] | None:
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _choices(tp: Any, metadata: Iterable[Any] = ()) -> tuple[Any, ...] | None:
    for m in metadata:
        if isinstance(m, OneOf):
            return m.choices()
    if typing.get_origin(tp) is typing.Annotated:
        return _choices(typing.get_args(tp)[0], typing.get_args(tp)[1:])
    if typing.get_origin(tp) is Literal:
        return typing.get_args(tp)
    return None


def _type_text(tp: Any, metadata: Iterable[Any] = ()) -> str:
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


def _walk(tp: Any, loc: tuple[Any, ...]) -> tuple[list[str], Any]:
    """The dotted key parts of an error location, and the type found there (None when unknown)."""
    parts: list[str] = []
    for item in loc:
        raw = tp
        tp = _strip(tp)
        origin = typing.get_origin(tp)
        if _model(tp) is not None:
            f = tp.model_fields.get(item) if isinstance(item, str) else None
            parts.append(str(item))
            tp = f.annotation if f is not None else None
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


def _member(union: Any, item: Any) -> Any:
    for arg in typing.get_args(_strip(union)):
        meta = typing.get_args(arg)[1:] if typing.get_origin(arg) is typing.Annotated else ()
        if any(isinstance(m, Tag) and m.tag == item for m in meta) or getattr(_strip(arg), "__name__", None) == item:
            return arg
    return None


_KINDS = {int: "int", float: "a number", bool: "true or false", str: "text", list: "a list", dict: "a mapping"}
_BOUNDS = {"greater_than_equal": ">= {ge}", "greater_than": "> {gt}", "less_than_equal": "<= {le}",
           "less_than": "< {lt}", "multiple_of": "a multiple of {multiple_of}"}  # fmt: skip


def _explain(e: Any, tp: Any) -> tuple[str, str, str, Any]:
    """``(key, message, allowed, value)`` for one pydantic error dict."""
    loc, kind, ctx, value = tuple(e["loc"]), e["type"], e.get("ctx") or {}, e.get("input")
    parts, here = _walk(tp, loc)
    key = ".".join(parts)
    name = key or "the config"
    if kind == "extra_forbidden":
        parent_parts, parent = _walk(tp, loc[:-1])
        known = list(_model(_strip(parent)).model_fields) if _model(_strip(parent)) else []
        prefix = ".".join(parent_parts) + "." if parent_parts else ""
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {prefix}{close[0]}?" if close else ";"
        allowed = ", ".join(known)
        return key, f"unknown key {key}{hint} known: {allowed}", allowed, None
    if kind in ("literal_error", "choice", "enum"):
        choices = _choices(here) if here is not None else None
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
