"""A test double: an engine that answers each turn of a Lookup episode with the expert's call, in a parser's style.

It keeps a shadow env per episode (the same seed as the episode it answers): each request's turn is the
expert's next action on the shadow, rendered the model's way (:meth:`ToolCallParser.render`) and ended with the
stop token; the shadow then takes that action too, so it stays where the played env is. ``bad_turns`` maps a
turn index to raw text answered instead (malformed calls, unknown tools), which the shadow then skips.
"""

from __future__ import annotations

import asyncio
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.tools import get_parser
from rockroll.envs.lookup.expert import next_action
from rockroll.envs.tools import ToolAction


class ExpertToolEngine(LLMEngine):
    name = "expert-tools"

    def __init__(
        self, tokenizer: Any, seeds: dict[str, int], *, style: str = "hermes", env_id: str = "Lookup-v0",
        bad_turns: dict[int, str] | None = None,
    ) -> None:  # fmt: skip
        self.tokenizer = tokenizer
        self.seeds = seeds  # episode id -> its seed
        self.parser = get_parser(style)
        self.env_id = env_id
        self.bad_turns = bad_turns or {}
        self.shadows: dict[str, Any] = {}
        self.texts: dict[str, list[str]] = {}  # episode id -> the texts answered

    def _text(self, episode: str, turn: int) -> str:
        if turn in self.bad_turns:
            return self.bad_turns[turn]
        if episode not in self.shadows or turn == 0:
            env = envhub.make(self.env_id)
            env.reset(seed=self.seeds[episode])
            self.shadows[episode] = env
        env = self.shadows[episode]
        action = next_action(env.unwrapped) or ToolAction("done")
        env.step(action)
        return self.parser.render(action)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        await asyncio.sleep(0)
        episode, _, turn = request.request_id.rpartition("/")
        text = self._text(episode, int(turn))
        self.texts.setdefault(episode, []).append(text)
        ids = list(self.tokenizer.encode(text, add_special_tokens=False)) + [self.tokenizer.eos_token_id]
        return GenerationResult(ids, [-0.5] * len(ids), "stop", self.weight_version)
