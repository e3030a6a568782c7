"""Forward passes that compute a prefix shared by several rows once.

A GRPO group's episodes start from one prompt, and with a short history window a batch's turns
repeat the same observation many times with different answers: most of each row is a prompt that
other rows share, while the tokens that need a logprob are a few at the end. :func:`shared_hidden`
runs the decoder once over each distinct prefix (the tokens before the first position whose hidden
state is needed), copies the prefix's key/value cache to the rows that share it, and runs only each
row's own tail on top. Gradients flow through the cache into the shared prefix, so the loss and
its gradient equal those of one full forward per row (up to float summation order), at the cost of
``distinct prefixes x prefix length + rows x tail length`` tokens instead of ``rows x length``.

Where every row's prompt differs but all start alike (a tool env's system prompt with its tools, the
same in every episode, before each episode's own question), the batch's common prefix is computed once
instead (:func:`common_plan`): whichever of the two plans computes fewer tokens runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["shared_hidden", "plan_sharing", "common_plan", "SharingPlan", "MIN_SAVING"]

#: share only when it computes at most this fraction of the plain pass's tokens
MIN_SAVING = 0.8


class SharingPlan:
    """Which rows share which prefix: ``starts[i]`` is row i's split, ``prefix_of[i]`` its prefix's index."""

    def __init__(self, rows: list[int], starts: list[int], prefixes: list[tuple[int, ...]], prefix_of: list[int]):
        self.rows, self.starts, self.prefixes, self.prefix_of = rows, starts, prefixes, prefix_of

    def cost(self, lengths: list[int]) -> int:
        """Tokens the shared passes compute."""
        tails = sum(lengths[r] - s for r, s in zip(self.rows, self.starts, strict=True))
        return len(self.prefixes) * max((len(p) for p in self.prefixes), default=0) + tails


def plan_sharing(ids: list[list[int]], first_needed: list[int | None]) -> SharingPlan | None:
    """Group rows by their prefix ``ids[i][:first_needed[i]]`` (rows that need nothing are left out).

    ``None`` when sharing cannot apply: some needed row has an empty prefix.
    """
    rows, starts, prefix_of = [], [], []
    index: dict[tuple[int, ...], int] = {}
    prefixes: list[tuple[int, ...]] = []
    for i, (row, start) in enumerate(zip(ids, first_needed, strict=True)):
        if start is None:
            continue
        if start < 1:
            return None
        key = tuple(row[:start])
        if key not in index:
            index[key] = len(prefixes)
            prefixes.append(key)
        rows.append(i)
        starts.append(start)
        prefix_of.append(index[key])
    return SharingPlan(rows, starts, prefixes, prefix_of)


def common_plan(ids: list[list[int]], first_needed: list[int | None]) -> SharingPlan | None:
    """Every needed row split at the prefix all of them share (at most each row's first needed position):
    one prefix, computed once. ``None`` when the needed rows share no token."""
    rows = [i for i, start in enumerate(first_needed) if start is not None]
    if not rows:
        return None
    split = min(first_needed[i] or 0 for i in rows)
    first = ids[rows[0]]
    for i in rows[1:]:
        row, k = ids[i], 0
        limit = min(split, len(row))
        while k < limit and row[k] == first[k]:
            k += 1
        split = k
    if split < 1:
        return None
    return SharingPlan(rows, [split] * len(rows), [tuple(first[:split])], [0] * len(rows))


def shared_hidden(
    decoder: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor
) -> torch.Tensor | None:
    """The decoder's last hidden states at ``(rows, cols)`` of the right-padded batch, prefixes shared.

    ``None`` when sharing would not save at least ``1 - MIN_SAVING`` of the tokens (the caller then
    runs the plain forward).
    """
    import torch

    n, length = input_ids.shape
    lengths = attention_mask.sum(1).tolist()
    first: list[int | None] = [None] * n
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        first[r] = c if first[r] is None else min(first[r], c)
    ids = input_ids.tolist()
    trimmed = [row[: lengths[i]] for i, row in enumerate(ids)]
    plans = [p for p in (plan_sharing(trimmed, first), common_plan(trimmed, first)) if p is not None and p.rows]
    plan = min(plans, key=lambda p: p.cost(lengths), default=None)
    if plan is None or plan.cost(lengths) > MIN_SAVING * sum(lengths[r] for r in plan.rows):
        return None
    device = input_ids.device
    pad = 0
    # the distinct prefixes, left-padded, with their positions
    width = max(len(p) for p in plan.prefixes)
    p_ids = torch.full((len(plan.prefixes), width), pad, dtype=torch.long, device=device)
    p_mask = torch.zeros((len(plan.prefixes), width), dtype=torch.long, device=device)
    for j, p in enumerate(plan.prefixes):
        p_ids[j, width - len(p) :] = torch.tensor(p, dtype=torch.long, device=device)
        p_mask[j, width - len(p) :] = 1
    p_pos = (p_mask.cumsum(1) - 1).clamp(min=0)
    out = decoder(input_ids=p_ids, attention_mask=p_mask, position_ids=p_pos, use_cache=True)
    cache = out["cache"] if "cache" in out else out.past_key_values  # renamed in transformers 5
    which = torch.tensor(plan.prefix_of, dtype=torch.long, device=device)
    cache.batch_select_indices(which)
    # each row's own tail on top of its prefix
    tails = [ids[r][s : lengths[r]] for r, s in zip(plan.rows, plan.starts, strict=True)]
    t_width = max(len(t) for t in tails)
    t_ids = torch.full((len(tails), t_width), pad, dtype=torch.long, device=device)
    t_mask = torch.zeros((len(tails), t_width), dtype=torch.long, device=device)
    for i, t in enumerate(tails):
        t_ids[i, : len(t)] = torch.tensor(t, dtype=torch.long, device=device)
        t_mask[i, : len(t)] = 1
    starts = torch.tensor(plan.starts, dtype=torch.long, device=device)
    t_pos = starts.unsqueeze(1) + torch.arange(t_width, device=device).unsqueeze(0)
    mask = torch.cat([p_mask[which], t_mask], dim=1)
    kw = {"cache": cache} if "cache" in out else {"past_key_values": cache}
    hidden = decoder(input_ids=t_ids, attention_mask=mask, position_ids=t_pos, use_cache=True, **kw).last_hidden_state
    slot = torch.full((n,), -1, dtype=torch.long, device=device)
    slot[torch.tensor(plan.rows, dtype=torch.long, device=device)] = torch.arange(len(plan.rows), device=device)
    return hidden[slot[rows], cols - starts[slot[rows]]]
