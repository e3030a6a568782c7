"""Exact validation off the critical path: a weight snapshot scored in a thread while training goes on.

The exact validator (:mod:`rockroll.trainer.evaluation.exact`) asks the policy for its greedy answer at every
cell of every validation map. Through the rollout engine that is one large generation at the step, which
the rollout waits for (on 2 cores about 7 s for 500 maps, a fifth of a run that validates every 100 steps).
When the env's answers are restricted to a set with a single choice point (FrozenLake: one token per move,
the rest forced; :meth:`~rockroll.agentrl.engines.choices.AnswerTrie.choice_point`), the greedy answer is
the argmax of one forward's logits over the choice ids. :class:`BackgroundValidation` does that on its own
CPU copy of the policy in a worker thread: the trainer hands it the step's weights and goes on; finished
scores come back at a later step (``select/step`` names the step scored) and the best snapshot is kept as
before. At most one validation waits behind the running one, so a slow validator slows the run instead of
piling up; the last step's validation is waited for.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rockroll.agentrl.engines.choices import AnswerTrie

if TYPE_CHECKING:
    from rockroll.trainer.config import TrainConfig
    from rockroll.trainer.evaluation.exact import FrozenLakeExact
    from rockroll.trainer.evaluation.selection import BestCheckpoint

__all__ = ["BackgroundValidation", "FirstChoiceScorer", "background_validation", "greedy_choices"]

#: prompts per forward of the scorer
CHUNK = 256


def greedy_choices(model: Any, prompts: list[list[int]], trie: AnswerTrie) -> list[tuple[int, ...]]:
    """The greedy restricted answer to each prompt, for a trie with one choice point: prompts of one length
    go through the model together (no padding), the choice is the argmax of the last position's logits over
    the choice ids."""
    import torch

    point = trie.choice_point()
    if point is None:
        raise ValueError("greedy_choices needs an answer trie with one choice point")
    prefix, choices = point
    ids = sorted(choices)
    allowed = torch.tensor(ids)
    out: list[tuple[int, ...]] = [()] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p) + len(prefix), []).append(i)
    with torch.no_grad():
        for rows in by_len.values():
            for at in range(0, len(rows), CHUNK):
                part = rows[at : at + CHUNK]
                x = torch.tensor([[*prompts[i], *prefix] for i in part])
                logits = model(input_ids=x, use_cache=False, logits_to_keep=1).logits[:, -1, :]
                best = logits.index_select(-1, allowed).argmax(-1).tolist()
                for i, b in zip(part, best, strict=True):
                    out[i] = choices[ids[b]]
    return out


class FirstChoiceScorer:
    """Scores a weight snapshot exactly on the validation maps with its own CPU copy of the policy."""

    def __init__(self, cfg: TrainConfig, exact: FrozenLakeExact, tok: Any, trie: AnswerTrie, difficulty: Any) -> None:
        self.cfg, self.exact, self.tok, self.trie, self.difficulty = cfg, exact, tok, trie, difficulty
        self._model: Any = None

    def _load(self, weights: dict[str, Any]) -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        if self._model is None:
            path = str(self.cfg.model.path)
            self._model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        result = self._model.load_state_dict({k: v.float() for k, v in weights.items()}, strict=False)
        if result.unexpected_keys:
            raise KeyError(f"the weights have keys the model lacks: {result.unexpected_keys[:5]}")
        return self._model

    def __call__(self, seeds: list[int], weights: dict[str, Any]) -> dict[str, float]:
        model = self._load(weights)
        where, prompts = self.exact.prompts(self.tok, seeds)
        answers = [
            self.tok.decode(list(s), skip_special_tokens=True) for s in greedy_choices(model, prompts, self.trie)
        ]
        return self.exact.score(seeds, where, answers, self.difficulty)


class BackgroundValidation:
    """Runs :class:`BestCheckpoint` validations in one worker thread (see the module docstring).

    ``score(seeds, weights) -> select/<tag>/... metrics``; ``tags``: the rollout's env tags.
    """

    def __init__(self, best: BestCheckpoint, score: Callable[[list[int], dict[str, Any]], dict[str, float]]) -> None:
        self.best, self.score = best, score
        self._pool = cf.ThreadPoolExecutor(1, thread_name_prefix="validate")
        self._pending: list[tuple[int, dict[str, Any], cf.Future[dict[str, float]]]] = []

    def submit(self, step: int, weights: dict[str, Any], tags: list[str], wait: bool = False) -> dict[str, float]:
        """Queue a validation of ``weights`` (copied) as ``step``; return the metrics of those finished by now
        (all of them with ``wait``). Blocks while two are unfinished."""
        snapshot = {k: v.detach().cpu().clone() for k, v in weights.items()}
        self._pending.append((step, snapshot, self._pool.submit(self.score, self.best.seeds, snapshot)))
        while len(running := [f for _, _, f in self._pending if not f.done()]) > 1:
            cf.wait(running, return_when=cf.FIRST_COMPLETED)
        return self.collect(tags, wait)

    def collect(self, tags: list[str], wait: bool = False) -> dict[str, float]:
        """Record the finished validations in step order (``wait``: all of them); their metrics, the last
        one's with ``select/step``. A validator's error is raised here."""
        out: dict[str, float] = {}
        while self._pending and (wait or self._pending[0][2].done()):
            step, snapshot, future = self._pending.pop(0)
            out = self.best.record(step, future.result(), tags, snapshot)
            out["select/step"] = float(step)
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def background_validation(
    cfg: TrainConfig, best: BestCheckpoint, rollout: Any, tok: Any
) -> BackgroundValidation | None:
    """A :class:`BackgroundValidation` for ``cfg``'s run, or None (off, no exact validator, or answers that
    are not one choice among a declared set: then the engine validates at the step)."""
    from rockroll.trainer.evaluation.exact import FrozenLakeExact

    exact = best.exact
    if not cfg.rollout.select_background or not isinstance(exact, FrozenLakeExact):
        return None
    if tok.eos_token_id is None:
        return None
    trie = exact.answers(tok)  # the exact validator's own (built once)
    if trie is None or trie.choice_point() is None:
        return None
    tag = exact.env.tag
    scorer = FirstChoiceScorer(cfg, exact, tok, trie, lambda s: rollout.difficulty(s, tag))
    return BackgroundValidation(best, scorer)
