"""A tiny model's one pretraining task: copy from its context.

Every real checkpoint can repeat what it has read; a tiny model built here from random weights cannot,
and a tool-calling agent must (the id a ``find`` returned goes into the next ``get``). Trained on
sequences of random tokens that repeat after a gap, with the loss on the repeat, a 2-layer model forms
induction heads (attend to the token after the earlier occurrence of the current one, copy it) after a
few hundred steps: the loss falls from about ``ln(vocab)`` to near 0 in one drop. :func:`copy_pretrain`
runs that before the model is saved (``model.tiny_copy_steps``), so the warm start on an env only has to
learn what to copy.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["copy_pretrain"]

#: token ids below this are left out of the random sequences (the special and control tokens sit there)
FIRST_ID = 20


def copy_pretrain(
    model: Any, steps: int, *, seed: int = 0, batch_size: int = 32, lr: float = 1e-3, max_len: int = 32
) -> dict[str, float]:
    """Train ``model`` (a causal LM, in place) ``steps`` AdamW steps on repeated random sequences: each row is
    ``n`` random tokens (8 to ``max_len``), a gap of up to 16 random tokens, then the same ``n`` again, the loss
    on predicting the repeat. Returns the first and last loss and the time taken."""
    import torch

    vocab = int(model.config.vocab_size)
    if vocab <= FIRST_ID + 8:
        raise ValueError(f"a vocabulary of {vocab} tokens is too small for copy pretraining")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    t0, first, loss_v = time.perf_counter(), float("nan"), float("nan")
    for step in range(steps):
        n = int(torch.randint(8, max_len + 1, (), generator=gen))
        gap = int(torch.randint(0, 17, (), generator=gen))
        seq = torch.randint(FIRST_ID, vocab, (batch_size, n), generator=gen)
        filler = torch.randint(FIRST_ID, vocab, (batch_size, gap), generator=gen)
        ids = torch.cat([seq, filler, seq], dim=1)
        logits = model(input_ids=ids, use_cache=False).logits[:, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        loss = -logp[:, n + gap :].mean()  # position t predicts token t + 1: the repeat's tokens from n + gap + 1
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_v = float(loss.item())
        if step == 0:
            first = loss_v
    model.eval()
    return {"copy/first_loss": first, "copy/last_loss": loss_v, "copy/time_s": time.perf_counter() - t0}
