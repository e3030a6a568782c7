"""One optimizer step per tag (``optim.tag_steps``): a mixed run's tags each stepped as if trained alone.

In a run that mixes tags (dataset tags and env tags in one batch), one AdamW step over all rows scales each
parameter's step by the moments of every tag's gradients together, so a tag whose gradients are small next to
another's moves less than it would alone. With ``tag_steps`` each minibatch's rows are split by tag and each
tag takes its own optimizer step, with AdamW moments and a schedule of its own: the step a run of that tag alone
would take from the same weights (the token mean within the tag). The tags step one after another in the order
of their ids, each from the weights the last one left.

Rows carry their tag as ``batch.extras["tag_ids"]`` (:func:`tag_ids`: a stable id per tag string, the same in
every step and after a resume). The optimizers are made when a tag first shows up and saved with the trainer's
state.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from rockroll.trainer.learner.batch import Batch


class PolicyTrainer(Protocol):
    """What a tag step needs of :class:`rockroll.trainer.learner.actor.PolicyTrainer`."""

    tag_opts: dict[int, tuple[Any, Any]]

    def new_optimizer(self) -> tuple[Any, Any]: ...

    def _minibatch_with(
        self, batch: Batch, rows: list[int], record: torch.Tensor | None, opt: Any, sched: Any
    ) -> dict[str, float] | None: ...


__all__ = ["load_tag_state", "tag_ids", "tag_minibatch", "tag_optimizer", "tag_state"]


def tag_ids(tags: list[str]) -> torch.Tensor:
    """``[rows]`` stable ids of the rows' tags (a CRC of the tag's name)."""
    import torch

    return torch.tensor([zlib.crc32(t.encode()) & 0x7FFFFFFF for t in tags], dtype=torch.long)


def tag_optimizer(trainer: PolicyTrainer, tid: int) -> tuple[Any, Any]:
    """Tag ``tid``'s AdamW and schedule (the trainer's settings, moments of its own), made on first use."""
    if tid not in trainer.tag_opts:
        trainer.tag_opts[tid] = trainer.new_optimizer()
    return trainer.tag_opts[tid]


def tag_minibatch(
    trainer: PolicyTrainer, batch: Batch, rows: list[int], record: torch.Tensor | None
) -> dict[str, float] | None:
    """Each tag's rows of the minibatch ``rows`` stepped by the tag's own optimizer; the steps' metrics averaged
    (``actor/tag_steps``: how many tags stepped)."""
    ids = batch.extras["tag_ids"]
    groups: dict[int, list[int]] = {}
    for r in rows:
        groups.setdefault(int(ids[r]), []).append(r)
    sums: dict[str, float] = {}
    steps = 0
    for tid in sorted(groups):
        opt, sched = tag_optimizer(trainer, tid)
        stats = trainer._minibatch_with(batch, groups[tid], record, opt, sched)
        if stats is None:
            continue
        steps += 1
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v
    if not steps:
        return None
    return {**{k: v / steps for k, v in sums.items()}, "actor/tag_steps": float(steps)}


def tag_state(trainer: PolicyTrainer) -> dict[int, dict[str, Any]]:
    """The tags' optimizer and schedule states, for a checkpoint."""
    return {
        tid: {"opt": opt.state_dict(), "sched": sched.state_dict()} for tid, (opt, sched) in trainer.tag_opts.items()
    }


def load_tag_state(trainer: PolicyTrainer, state: dict[int, dict[str, Any]]) -> None:
    """Restore :func:`tag_state` (the tags' optimizers are made as needed)."""
    for tid, s in state.items():
        opt, sched = tag_optimizer(trainer, int(tid))
        opt.load_state_dict(s["opt"])
        sched.load_state_dict(s["sched"])
