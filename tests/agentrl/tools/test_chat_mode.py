"""Chat mode on the env managers: an engine that answers messages with a server's parsed calls (a test double
here; vLLM's own server in tests/agentrl/test_vllm_tool_chat.py), and the reading of a server's reply."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import rockroll.envhub as envhub
from rockroll.agentrl.engines.base import GenerationRequest, GenerationResult, LLMEngine
from rockroll.agentrl.engines.chat_mode import ChatReply, chat_messages_for_server, reply_from_choice
from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.env_manager import EpisodeSpec
from rockroll.agentrl.rollout.lockstep import EnvManager, make_env_manager
from rockroll.agentrl.sources.kinds import LocalSource
from rockroll.envs.lookup.expert import next_action


class ExpertChatServer(LLMEngine):
    """Answers each conversation with the expert's call for the state the conversation's messages lead to."""

    name = "chat-double"
    chat_mode = True

    def __init__(self, seed: int) -> None:
        self.tokenizer = CharTokenizer()
        self.env = envhub.make("Lookup-v0")
        self.env.reset(seed=seed)
        self.seen: list[list[dict[str, Any]]] = []

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        raise AssertionError("a chat engine is played through chat()")

    async def chat(self, messages: Any, tools: Any, params: Any) -> ChatReply:
        self.seen.append([dict(m) for m in messages])
        assert [t.name for t in tools] == ["find", "get", "answer"]
        action = next_action(self.env.unwrapped)
        assert action is not None
        self.env.step(action)
        return ChatReply("", action.calls, (), "tool_calls")


@pytest.mark.parametrize("lockstep", [False, True])
def test_a_chat_engine_plays_a_tool_env_and_its_turns_are_not_for_training(lockstep: bool) -> None:
    engine = ExpertChatServer(seed=5)
    manager = make_env_manager(engine, LocalSource(), EpisodeConfig(max_turns=6, lockstep=lockstep))
    assert type(manager) is EnvManager  # a chat server plays each episode at its own pace
    traj = asyncio.run(manager.run(EpisodeSpec("Lookup-v0", 5)))
    manager.shutdown()
    assert traj.success and traj.failure is None
    assert all(not t.tokens_exact and t.tools and t.tools["tool_calls"] == 1 for t in traj.turns)
    # the whole conversation: the env's instructions, calls as OpenAI tool_calls, results as tool messages
    last = engine.seen[-1][1:]
    assert engine.seen[-1][0]["role"] == "system"
    assert [m["role"] for m in last[:3]] == ["user", "assistant", "tool"] and last[1]["tool_calls"]
    wire = chat_messages_for_server(last)
    assert isinstance(wire[1]["tool_calls"][0]["function"]["arguments"], str)
    assert (
        json.loads(wire[1]["tool_calls"][0]["function"]["arguments"])
        == last[1]["tool_calls"][0]["function"]["arguments"]
    )
    with pytest.raises(ValueError, match="not training"):
        traj.to_samples()


def test_reading_a_servers_reply() -> None:
    choice = {
        "finish_reason": "tool_calls",
        "message": {
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get", "arguments": '{"id": "p1"}'}},
                {"id": "b", "type": "function", "function": {"name": "get", "arguments": "{not json"}},
                {"id": "c", "type": "function", "function": {"name": "get", "arguments": "[1]"}},
            ],
        },
    }
    reply = reply_from_choice(choice)
    assert [(c.id, c.name, c.arguments) for c in reply.calls] == [("a", "get", {"id": "p1"})]
    assert len(reply.problems) == 2 and "not valid JSON" in reply.problems[0] and reply.text == ""
    assert reply.finish_reason == "tool_calls"
