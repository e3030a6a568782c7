"""The hf engine's token choice (:class:`TokenSampling`): one token per running row (masking restricted
rows to their allowed tokens, seeded temperature/top-k/top-p sampling), and the results of rows that
end. A mixin of :class:`~rockroll.agentrl.engines.hf.HFEngine`, also used by its batch path
(:mod:`rockroll.agentrl.engines.hf_batch`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from rockroll.agentrl.engines.base import GenerationResult, SamplingParams
from rockroll.agentrl.engines.hf_rows import Row

__all__ = ["TokenSampling"]


class TokenSampling:
    """Choosing one token per row (see the module docstring)."""

    _torch: Any
    stats: dict[str, int]
    _outbox: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], GenerationResult]]

    # ------------------------------------------------------------ sampling
    def _advance(self, rows: list[Row], logits: Any, version: int) -> tuple[list[int], Any]:
        """Sample one token per row, queue finished requests' results; return the rows that go on
        (indices) and the sampled tokens (a tensor)."""
        torch = self._torch
        logits = self._restrict(logits, rows)
        chosen = self._sample(logits, [r.params for r in rows], rows)
        logp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0]
        keep: list[int] = []
        for j, (r, tok, lp) in enumerate(zip(rows, chosen.tolist(), logp.tolist(), strict=True)):
            r.toks.append(tok)
            r.lps.append(lp)
            if r.pending.future is not None and r.pending.future.cancelled():  # nobody waits (a client left)
                self.stats["cancelled"] += 1
            elif tok in r.stops or len(r.toks) >= r.max_new or r.finish_forced():
                reason: Literal["stop", "length"] = "stop" if r.toks[-1] in r.stops else "length"
                res = GenerationResult(token_ids=r.toks, logprobs=r.lps, finish_reason=reason, weight_version=version)
                self._outbox.append((r.pending.loop, r.pending.future, res))
            else:
                keep.append(j)
        self.stats["tokens"] += len(rows)
        self.stats["running"] = len(keep)
        return keep, chosen

    def _restrict(self, logits: Any, rows: list[Row]) -> Any:
        """``logits`` with each restricted row (``SamplingParams.allowed``) masked to its trie's next tokens
        (:func:`rockroll.agentrl.engines.choices.mask_logits`); sampling and logprobs then use the
        renormalised distribution."""
        if all(r.params.allowed is None for r in rows):
            return logits
        from rockroll.agentrl.engines.choices import allowed_tensor, mask_logits

        sets = [() if r.params.allowed is None else r.params.allowed.next_ids(r.toks) for r in rows]
        return mask_logits(logits, allowed_tensor(sets, logits.device))

    def _sample(self, logits: Any, params: list[SamplingParams], rows: list[Row]) -> Any:
        """One token per row: argmax where temperature is 0, else inverse-CDF sampling from the
        temperature/top-k/top-p distribution with the next uniform of the row's generator."""
        torch = self._torch
        dev = logits.device
        greedy_tok = logits.argmax(dim=-1)
        temps = torch.tensor([sp.temperature for sp in params], device=dev, dtype=logits.dtype)
        if bool((temps == 0).all()):
            return greedy_tok
        scaled = logits / temps.clamp(min=1e-6)[:, None]
        top_k = [sp.top_k for sp in params]
        if any(k > 0 for k in top_k):
            vocab = scaled.shape[-1]
            ks = torch.tensor([min(k, vocab) if k > 0 else vocab for k in top_k], device=dev)
            kth = scaled.sort(dim=-1, descending=True).values.gather(1, (ks - 1)[:, None])
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1)
        top_p = [sp.top_p for sp in params]
        if any(p < 1 for p in top_p):
            sp_, order = probs.sort(dim=-1, descending=True)
            cum = sp_.cumsum(-1)
            tp = torch.tensor(top_p, device=dev, dtype=probs.dtype)[:, None]
            sp_ = sp_.masked_fill(cum - sp_ >= tp, 0.0)  # keep the smallest prefix with mass >= top_p
            probs = torch.zeros_like(probs).scatter(1, order, sp_)
        cdf = probs.cumsum(-1)
        u = torch.tensor([r.uniform() for r in rows], dtype=torch.float64).to(dev, cdf.dtype)
        sampled = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0]
        sampled = sampled.clamp(max=logits.shape[-1] - 1)
        return torch.where(temps == 0, greedy_tok, sampled)
