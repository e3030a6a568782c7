"""The one config loader: YAML + dotted overrides into typed models, one error for a bad field, help from the fields."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field, model_validator

from rockroll.agentrl.eval.config import EvalConfig
from rockroll.agentrl.rollout.config import EpisodeConfig, SchedulerConfig
from rockroll.envs.config import ConfigError, ConfigModel, OneOf, parse_config
from rockroll.envs.config_loader import apply_overrides, describe_config, format_config_help, load_config, save_config

KINDS: dict[str, Any] = {"a": 1, "b": 2}  # a registry: OneOf reads it when validating


class Inner(ConfigModel):
    mode: Literal["fast", "slow"] = Field("fast", description="how")
    n: int = Field(1, ge=1, description="how many")
    kind: Annotated[str, OneOf(KINDS)] = Field("a", description="a registered kind")


class Outer(ConfigModel):
    name: str = Field("x", description="a name")
    rate: float = Field(0.5, description="a rate")
    tags: list[str] = Field(default_factory=list, description="labels")
    opts: dict[str, Any] = Field(default_factory=dict, description="free-form options")
    inner: Inner = Field(default_factory=Inner, description="a section")
    items: list[Inner] = Field(default_factory=lambda: [Inner()], description="a list of sections")

    @model_validator(mode="after")
    def _check(self) -> Outer:
        if self.inner.mode == "slow" and self.rate > 1:
            raise ValueError("inner.mode 'slow' needs rate <= 1; lower rate")
        return self


def test_yaml_then_data_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: from-file\nrate: 1.0e-4\ninner: {mode: slow, n: 2}\nitems: [{n: 3}, {n: 4}]\n")
    cfg = load_config(
        Outer,
        path,
        ["inner.n=5", "rate=1e-4", "tags=[a, b]", "opts={k: false}", "items.1.kind=b", "name=007"],
        data={"inner": {"kind": "b"}},
    )
    assert cfg.inner == Inner(mode="slow", n=5, kind="b")  # file, data and override merged key by key
    assert cfg.rate == pytest.approx(1e-4)  # YAML 1.1 reads 1e-4 as text: still a float
    assert cfg.tags == ["a", "b"] and cfg.opts == {"k": False}
    assert [i.n for i in cfg.items] == [3, 4] and cfg.items[1].kind == "b"
    assert cfg.name == "7"  # a number where text is expected is taken as text
    assert load_config(Outer) == Outer()  # no file: the defaults


def test_saved_config_loads_back_equal(tmp_path: Path) -> None:
    cfg = load_config(Outer, overrides=["inner.mode=slow", "opts={a: [1, 2]}"])
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(Outer, tmp_path / "c.yaml") == cfg


@pytest.mark.parametrize(
    ("overrides", "key", "message", "allowed"),
    [
        (["inner.nn=2"], "inner.nn", "unknown key inner.nn; did you mean inner.n?", "mode, n, kind"),
        (["bogus=1"], "bogus", "unknown key bogus; known: name, rate", "name, rate, tags, opts, inner, items"),
        (["inner.n=many"], "inner.n", "inner.n must be int, got 'many'", "int"),
        (["rate=fast"], "rate", "rate must be a number, got 'fast'", "a number"),
        (["inner=3"], "inner", "inner must be a mapping of its fields (mode, n, kind), got 3", "a mapping"),
        (["inner.mode=medium"], "inner.mode", "inner.mode must be one of fast, slow; got 'medium'", "fast, slow"),
        (["inner.kind=c"], "inner.kind", "inner.kind must be one of a, b; got 'c'", "a, b"),
        (["inner.n=0"], "inner.n", "inner.n must be >= 1, got 0", ">= 1"),
        (["inner.mode=slow", "rate=2"], "", "inner.mode 'slow' needs rate <= 1; lower rate", ""),
    ],
)
def test_bad_field_is_one_config_error_naming_key_and_allowed(
    overrides: list[str], key: str, message: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(Outer, overrides=overrides)
    assert isinstance(e.value, ValueError)
    assert e.value.key == key and message in str(e.value) and e.value.allowed.startswith(allowed)


def test_registry_choices_are_read_when_validating() -> None:
    with pytest.raises(ConfigError, match="kind must be one of a, b; got 'c'"):
        Inner(kind="c")
    KINDS["c"] = 3
    try:
        assert Inner(kind="c").kind == "c"
        assert "a|b|c" in format_config_help(Outer)
    finally:
        del KINDS["c"]


def test_list_items_are_named_by_index() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(Outer, data={"items": [{}, {"n": 0}]})
    assert e.value.key == "items.1.n" and "items.1.n must be >= 1, got 0" in str(e.value)


def test_building_a_model_directly_raises_the_same_error() -> None:
    with pytest.raises(ConfigError) as e:
        Outer(inner={"n": 0, "mode": "x"})
    assert [k for k, _ in e.value.problems] == ["inner.mode", "inner.n"]
    assert e.value.key == "inner.mode" and e.value.allowed == "fast, slow"


def test_malformed_overrides_and_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["inner.n"])
    with pytest.raises(ConfigError, match="not a section"):
        apply_overrides({"name": "x"}, ["name.first=y"])
    with pytest.raises(FileNotFoundError, match="see configs/"):
        load_config(Outer, tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(Outer, tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_config(Outer, [1, 2])


def test_describe_lists_every_key_dotted_with_type_default_description() -> None:
    rows = {r.key: r for r in describe_config(Outer)}
    assert list(rows) == [
        "name", "rate", "tags", "opts", "inner.mode", "inner.n", "inner.kind",
        "items.N.mode", "items.N.n", "items.N.kind",
    ]  # fmt: skip
    assert (rows["inner.mode"].type, rows["inner.mode"].default) == ("fast|slow", '"fast"')
    assert rows["inner.n"].type == "int, >= 1" and rows["tags"].type == "list[str]" and rows["opts"].default == "{}"
    text = format_config_help(Outer, "title")
    assert text.startswith("title") and all(k in text and r.description in text for k, r in rows.items())


@pytest.mark.parametrize("model", [EpisodeConfig, SchedulerConfig, EvalConfig])
def test_rockroll_configs_describe_every_field(model: type[ConfigModel]) -> None:
    rows = describe_config(model)
    assert rows and all(r.description for r in rows), [r.key for r in rows if not r.description]
    assert model.model_config.get("extra") == "forbid"


def test_async_generation_ratio_is_declared_once_as_an_int() -> None:
    from rockroll.trainer.config import RolloutConfig

    assert SchedulerConfig.model_fields["async_generation_ratio"].annotation is int
    assert "async_generation_ratio" not in RolloutConfig.model_fields  # the trainer nests the scheduler's own
    assert RolloutConfig(scheduler={"async_generation_ratio": 1.0}).scheduler.async_generation_ratio == 1  # YAML's 1.0
    with pytest.raises(ConfigError, match="scheduler.async_generation_ratio must be int"):
        RolloutConfig(scheduler={"async_generation_ratio": 0.5})
