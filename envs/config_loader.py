"""The one config loader: YAML files, dotted ``k=v`` overrides, and the ``--help-config`` table.

:func:`load_config` reads a YAML file (optional), deep-merges a mapping over it, applies
``a.b.c=value`` overrides (each value parsed as YAML: ``1e-4``, ``false``, ``[0.9, 0.99]``,
``{is_slippery: false}``; list items by index, ``envs.0.episodes=5``) and validates the result into a
:class:`~rockroll.envs.config.ConfigModel`; a bad field raises one
:class:`~rockroll.envs.config.ConfigError` naming the dotted key. :func:`describe_config` lists every
key (nested ones dotted) with its type, default and description; ``rockroll train --help-config``
prints it.

Example::

    cfg = load_config(TrainConfig, "configs/frozenlake_tiny.yaml", ["optim.lr=3e-4", "total_steps=20"])
    save_config(cfg, "runs/x/config.yaml")          # the resolved config, loadable again
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union

import yaml
from pydantic import BaseModel

from rockroll.envs.config import ConfigError, _model, _strip, _type_text, parse_config

__all__ = ["ConfigField", "load_config", "read_yaml", "apply_overrides", "merge", "config_to_dict", "save_config"]
__all__ += ["describe_config", "format_config_help"]

T = TypeVar("T")


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
    tp: type[T],
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
        item = _model(_strip(typing.get_args(tp)[0])) if typing.get_origin(tp) is list else None
        if item is not None:
            rows += describe_config(item, f"{prefix}{name}.N.")
            continue
        union = typing.get_args(tp) if typing.get_origin(tp) in (Union, UnionType) else ()
        members = [m for m in map(_model, map(_strip, union)) if m is not None]
        if union and len(members) == len(union):  # one model per kind (rollout.engine): each kind's keys, tagged
            rows += _describe_members(members, f"{prefix}{name}.", f.get_default(call_default_factory=True))
            continue
        default = "(required)" if f.is_required() else _json(f.get_default(call_default_factory=True))
        bounds = [f"{op} {getattr(m, attr)}" for m in f.metadata for attr, op in _OPS if hasattr(m, attr)]
        kind = ", ".join([_type_text(f.annotation, f.metadata), *bounds])
        rows.append(ConfigField(prefix + name, kind, default, f.description or ""))
    return rows


def _describe_members(members: list[type[BaseModel]], prefix: str, default: object) -> list[ConfigField]:
    """The keys of a union of models told apart by a ``kind`` field: ``kind`` once (its choices), then each
    member's other keys with ``[<kind>]`` before their description (a key several kinds have: one row)."""
    kinds = [str(m.model_fields["kind"].default) if "kind" in m.model_fields else m.__name__ for m in members]
    rows = {prefix + "kind": ConfigField(prefix + "kind", "|".join(kinds), _json(getattr(default, "kind", kinds[0])),
                                         "which kind")}  # fmt: skip
    for kind, m in zip(kinds, members, strict=True):
        for r in describe_config(m, prefix):
            if r.key == prefix + "kind":
                continue
            seen = rows.get(r.key)
            text = f"[{kind}] {r.description}"
            rows[r.key] = ConfigField(r.key, r.type, r.default, f"{seen.description}; {text}" if seen else text)
    return list(rows.values())


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


def _json(value: object) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value, default=str)
