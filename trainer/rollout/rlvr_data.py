"""The rows of a single-turn RLVR run: loaded and checked once, split, and turned into prompt token ids.

:func:`load_rows` reads ``rollout.rlvr.dataset`` (a generator, a local JSONL file or a local Hugging Face
folder) into ``(train, heldout)`` :class:`~rockroll.agentrl.rewards.samples.Sample` lists. Every row is
checked at load time: a row missing a field its reward needs, or a field the prompt template names,
raises :class:`~rockroll.agentrl.rewards.errors.DatasetRowError` naming the source and the row; a bad
setting (a generator's option, a split that leaves no rows) raises a ``ConfigError`` naming its key.

Held-out rows are never trained on: a generator draws them from the prompts its hash puts apart, a
file is split by the same hash of the prompt (``heldout_frac``), or the held-out rows come from a file of
their own (``heldout_path``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rockroll.agentrl.rewards.errors import DatasetRowError
from rockroll.agentrl.rewards.generators import generate
from rockroll.agentrl.rewards.samples import Sample, load_hf_disk, load_jsonl, split_samples
from rockroll.envs.config import ConfigError
from rockroll.trainer.rollout.rlvr_config import RLVRDatasetConfig, template_fields

__all__ = ["load_rows", "render", "PromptIds", "corpus"]

Requires = Callable[[str], Iterable[str]]
_KEY = "rollout.rlvr.dataset"


def _fields(sample: Sample) -> dict[str, Any]:
    return {**sample.metadata, "prompt": sample.prompt, "tag": sample.tag, "id": sample.id}


def render(template: str, sample: Sample, *, source: str = "", index: int = 0) -> str:
    """``template`` filled from the sample's fields (``prompt``, ``tag``, ``id`` and its metadata)."""
    fields = _fields(sample)
    missing = [f for f in template_fields(template, "template") if fields.get(f) is None]
    if missing:
        raise DatasetRowError(source, index, f"the template {template!r} needs {', '.join(missing)}", tuple(missing))
    return template.format(**fields)


def _check(samples: Sequence[Sample], source: str, requires: Requires | None, template: str) -> list[Sample]:
    """Every sample has what its reward needs and what the prompt template names (else the row is named)."""
    for i, s in enumerate(samples):
        if requires is not None:
            needed = tuple(requires(s.tag))
            missing = tuple(f for f in needed if s.metadata.get(f) is None)
            if missing:
                raise DatasetRowError(source, i, f"tag {s.tag!r} needs {', '.join(missing)}", missing)
        render(template, s, source=source, index=i)
    return list(samples)


def _generated(cfg: RLVRDatasetConfig) -> tuple[list[Sample], list[Sample]]:
    shared = {"seed": cfg.seed, "heldout_frac": cfg.heldout_frac, "split_seed": cfg.split_seed, **cfg.options}
    try:
        train = generate(cfg.generator, cfg.size, split="train", **shared)
        heldout = generate(cfg.generator, cfg.heldout_size, split="heldout", **shared) if cfg.heldout_size else []
    except (ValueError, TypeError) as e:
        text = str(e)
        key = f"{_KEY}.heldout_frac" if "empty with heldout_frac" in text else f"{_KEY}.options"
        if "distinct" in text:
            key = f"{_KEY}.size" if "train" in text else f"{_KEY}.heldout_size"
        raise ConfigError(key, f"{key}: generator {cfg.generator}: {text}", value=cfg.options) from e
    if cfg.tag:  # the generator's rows carry their tag; dataset.tag renames them (a route of another name)
        train = [Sample(s.prompt, cfg.tag, s.metadata, s.id) for s in train]
        heldout = [Sample(s.prompt, cfg.tag, s.metadata, s.id) for s in heldout]
    return train, heldout


def _loaded(cfg: RLVRDatasetConfig, path: str, requires: Requires | None) -> list[Sample]:
    tag = cfg.tag or None
    if cfg.source == "jsonl":
        return load_jsonl(path, tag=tag, prompt_field=cfg.prompt_field, requires=requires)
    return load_hf_disk(path, split=cfg.hf_split, tag=tag, prompt_field=cfg.prompt_field, requires=requires)


def load_rows(cfg: RLVRDatasetConfig, requires: Requires | None = None) -> tuple[list[Sample], list[Sample]]:
    """``(train, heldout)`` rows of ``cfg``, every row checked (see the module docstring).

    ``requires``: ``tag -> fields`` its reward needs (``RewardRouter.required_fields``; an unknown tag
    raises there, naming the row). Raises ``ConfigError`` when no training row is left.
    """
    if cfg.source == "generator":
        train, heldout = _generated(cfg)
        where = f"generator {cfg.generator}"
        train = _check(train, f"{where} (train)", requires, cfg.prompt_template)
        heldout = _check(heldout, f"{where} (heldout)", requires, cfg.prompt_template)
    else:
        rows = _check(_loaded(cfg, cfg.path, requires), cfg.path, None, cfg.prompt_template)
        if cfg.heldout_path:
            train = rows
            heldout = _check(_loaded(cfg, cfg.heldout_path, requires), cfg.heldout_path, None, cfg.prompt_template)
        else:
            train, heldout = split_samples(rows, cfg.heldout_frac, cfg.split_seed)
    if not train:
        raise ConfigError(f"{_KEY}.heldout_frac", f"{_KEY}: no training rows are left after the held-out split")
    return train, heldout


def corpus(cfg: RLVRDatasetConfig, rows: Sequence[Sample]) -> list[str]:
    """Text a task tokenizer is trained on: the system prompt, the rendered prompts and the demo answers."""
    texts = [cfg.system_prompt, "system\nuser\nassistant\n"]
    demo = cfg.demo_format()
    for i, s in enumerate(rows):
        texts.append(render(cfg.prompt_template, s, index=i))
        if demo:
            try:
                texts.append(render(demo, s, index=i))
            except DatasetRowError:
                continue  # a row without a demo answer: its prompt still counts
    return texts


class PromptIds:
    """The chat-templated prompt token ids of each row (cached by id); a tokenizer without a chat template
    gets the system prompt and the user message on lines of their own."""

    def __init__(self, tokenizer: Any, cfg: RLVRDatasetConfig) -> None:
        self.tok, self.cfg = tokenizer, cfg
        self._cache: dict[tuple[str, str], list[int]] = {}

    def text(self, sample: Sample) -> str:
        user = render(self.cfg.prompt_template, sample)
        msgs = [{"role": "user", "content": user}]
        if self.cfg.system_prompt:
            msgs.insert(0, {"role": "system", "content": self.cfg.system_prompt})
        if getattr(self.tok, "chat_template", None):
            return str(self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
        return "\n".join(m["content"] for m in msgs) + "\n"

    def __call__(self, sample: Sample) -> list[int]:
        key = (sample.id, sample.prompt)  # ids come from the rows: two rows may share one
        if key not in self._cache:
            self._cache[key] = list(self.tok.encode(self.text(sample), add_special_tokens=False))
        return self._cache[key]
