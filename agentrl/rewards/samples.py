"""Samples of single-turn RLVR and where they come from: local JSONL, a local Hugging Face folder, generators.

A :class:`Sample` is a prompt, a tag (which reward scores it, through
:class:`~rockroll.agentrl.rewards.router.RewardRouter`) and metadata (the answer, the tests...).
Each has a stable ``id`` (given, or the hash of its tag and prompt) and a split, ``train`` or
``heldout``, decided by :func:`split_of`: a hash of the id and a seed, so the same sample always
lands in the same split and the two splits never share a prompt.

Loaders check every row at load time: a row without a prompt, or without the metadata fields its
tag's reward needs (``requires``: a function ``tag -> fields``, e.g. ``router.required_fields``),
raises :class:`~rockroll.agentrl.rewards.errors.DatasetRowError` naming the source and the row.

JSONL rows: ``{"prompt": ..., "tag": ..., "id": ..., <metadata fields>}`` (the fields other than
prompt, tag and id are the metadata; a ``"metadata"`` object is merged in). ``datasets`` is an
optional dependency, imported only by :func:`load_hf_disk`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rockroll.agentrl.rewards.errors import DatasetRowError, RewardError

__all__ = ["Sample", "Split", "split_of", "split_samples", "sample_from_row", "load_jsonl", "load_hf_disk"]

Split = Literal["train", "heldout"]
Requires = Callable[[str], Iterable[str]]


@dataclass(frozen=True)
class Sample:
    """One single-turn task.

    Attributes:
        prompt: the text the policy answers.
        tag: the reward route (``math``, ``code``, ``gsm8k``...).
        metadata: what the reward needs (``answer``, ``tests``, ``numbers``/``target``...).
        id: a stable id (default: hash of tag and prompt).
    """

    prompt: str
    tag: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            digest = hashlib.sha256(f"{self.tag}\0{self.prompt}".encode()).hexdigest()[:16]
            object.__setattr__(self, "id", digest)

    def split(self, heldout_frac: float = 0.1, seed: int = 0) -> Split:
        """This sample's split (see :func:`split_of`)."""
        return split_of(self.prompt, heldout_frac, seed)


def split_of(key: str, heldout_frac: float = 0.1, seed: int = 0) -> Split:
    """``heldout`` for a share ``heldout_frac`` of keys, chosen by a hash of ``(seed, key)``, else ``train``.

    Keyed by the prompt (:meth:`Sample.split`), so equal prompts always share a split.
    """
    if not 0 <= heldout_frac <= 1:
        raise ValueError(f"heldout_frac must be within [0, 1], got {heldout_frac}")
    h = int.from_bytes(hashlib.sha256(f"{seed}\0{key}".encode()).digest()[:8], "big")
    return "heldout" if h / 2**64 < heldout_frac else "train"


def split_samples(
    samples: Iterable[Sample], heldout_frac: float = 0.1, seed: int = 0
) -> tuple[list[Sample], list[Sample]]:
    """``(train, heldout)`` by :func:`split_of`; disjoint in prompts by construction."""
    train: list[Sample] = []
    heldout: list[Sample] = []
    for s in samples:
        (heldout if s.split(heldout_frac, seed) == "heldout" else train).append(s)
    return train, heldout


def sample_from_row(
    row: Mapping[str, Any],
    *,
    source: str,
    index: int,
    tag: str | None = None,
    prompt_field: str = "prompt",
    requires: Requires | None = None,
) -> Sample:
    """One checked :class:`Sample` from a row (see the module docstring); raises :class:`DatasetRowError`."""
    if not isinstance(row, Mapping):
        raise DatasetRowError(source, index, f"expected an object, got {type(row).__name__}")
    prompt = row.get(prompt_field)
    if not isinstance(prompt, str) or not prompt.strip():
        raise DatasetRowError(source, index, f"no {prompt_field!r} text", (prompt_field,))
    row_tag = row.get("tag", tag)
    if not isinstance(row_tag, str) or not row_tag:
        raise DatasetRowError(source, index, "no 'tag' (give the row one, or pass tag= to the loader)", ("tag",))
    meta = {k: v for k, v in row.items() if k not in (prompt_field, "tag", "id", "metadata")}
    extra = row.get("metadata")
    if isinstance(extra, Mapping):
        meta.update(extra)
    if requires is not None:
        try:
            needed = tuple(requires(row_tag))
        except RewardError as e:  # an unknown tag: name the row too
            raise DatasetRowError(source, index, str(e)) from e
        missing = tuple(f for f in needed if meta.get(f) is None)
        if missing:
            raise DatasetRowError(source, index, f"tag {row_tag!r} needs {', '.join(missing)}", missing)
    return Sample(prompt=prompt, tag=row_tag, metadata=meta, id=str(row.get("id") or ""))


def _rows_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetRowError(str(path), i, f"not JSON (line {i + 1}): {e}") from e


def load_jsonl(
    path: str | Path, *, tag: str | None = None, prompt_field: str = "prompt", requires: Requires | None = None
) -> list[Sample]:
    """Every row of a local JSONL file as a checked :class:`Sample` (row numbers are 0-based lines)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no dataset file {p}")
    return [
        sample_from_row(row, source=str(p), index=i, tag=tag, prompt_field=prompt_field, requires=requires)
        for i, row in _rows_jsonl(p)
    ]


def load_hf_disk(
    path: str | Path,
    *,
    split: str | None = "train",
    tag: str | None = None,
    prompt_field: str = "prompt",
    requires: Requires | None = None,
) -> list[Sample]:
    """Rows of a Hugging Face ``datasets`` folder saved with ``save_to_disk`` (``datasets.load_from_disk``).

    A ``DatasetDict`` folder needs ``split``; a single ``Dataset`` folder ignores it.
    """
    try:
        import datasets
    except ImportError as e:
        raise RewardError("loading a Hugging Face dataset folder needs `pip install datasets`") from e
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"no dataset folder {p}")
    data = datasets.load_from_disk(str(p))
    if isinstance(data, datasets.DatasetDict):
        if split not in data:
            raise DatasetRowError(str(p), 0, f"no split {split!r}; it has {', '.join(data)}")
        data = data[split]
    return [
        sample_from_row(row, source=str(p), index=i, tag=tag, prompt_field=prompt_field, requires=requires)
        for i, row in enumerate(data)
    ]
