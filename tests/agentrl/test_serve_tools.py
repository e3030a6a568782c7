"""Tool calls in ``rockroll serve-model``: the streaming splitter on fixed text, then a real server driven by the
official ``openai`` client through a two-turn tool conversation.

The served model is the tiny hermes-template model taught (a few seconds of teacher forcing) to answer the
weather question with a ``<tool_call>`` block and the tool result with a sentence, so greedy decoding writes
real calls: ``auto`` parses the model's own call, ``required`` and a named ``tool_choice`` prefill its opening
and get the same call, streamed or not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rockroll.agentrl.serving.tool_calls import (
    EXPORT_FILE,
    ToolPlan,
    ToolStream,
    prefill_text,
    recorded_parser,
    split_turn,
    tool_call_deltas,
)
from rockroll.agentrl.tools import get_parser

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TEXTS = {
    "hermes": [
        CALL,
        "Let me look.\n" + CALL + "\nDone.",
        "  spaced \n\n" + CALL + "\n" + CALL,
        "no call at all, <tool_ almost",
        "unclosed " + CALL[:-3],
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',  # malformed: raw text
        "ends on a partial marker <tool_ca",
    ],
    "llama3_json": ['{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "f"}', "use {x} here"],
    "mistral": ['Sure [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]', "plain text"],
}


def _stream(style: str, text: str, cuts: list[int], plan: ToolPlan | None = None) -> tuple[str, tuple]:
    s = ToolStream(get_parser(style), prefix="call_t", plan=plan)
    bounds = [0, *cuts, len(text)]
    sent = "".join(s.feed(text[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
    tail, calls = s.finish()
    return sent + tail, calls


@pytest.mark.parametrize("style", list(TEXTS))
def test_the_stream_says_what_the_answer_says_at_every_split(style: str) -> None:
    parser = get_parser(style)
    for text in TEXTS[style]:
        want = split_turn(parser, text, prefix="call_t")
        for i in range(len(text) + 1):
            for cuts in ([i], [i // 2, i]):
                content, calls = _stream(style, text, cuts)
                assert (content or None, calls) == (want.content, want.calls), (text, cuts)


def test_split_turn_and_what_the_stream_holds_back() -> None:
    hermes = get_parser("hermes")
    split = split_turn(hermes, "Let me look.\n" + CALL + "\nDone.", prefix="call_x")
    assert split.content == "Let me look.\nDone." and [c.id for c in split.calls] == ["call_x_0_0"]
    assert split_turn(hermes, CALL, prefix="p").content is None
    bad = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    assert split_turn(hermes, bad, prefix="p") == split_turn(hermes, bad, prefix="p", index=1)  # raw: no calls
    assert split_turn(hermes, bad, prefix="p").content == bad
    assert len(split_turn(hermes, CALL + CALL, prefix="p", parallel=False).calls) == 1
    s = ToolStream(hermes, prefix="p")
    assert [s.feed(x) for x in ("Hi", " there \n", "<tool", "_call>", "{}")] == ["Hi", " there", "", "", ""]
    assert s.finish() == (" \n<tool_call>{}", ())  # unclosed: the held text goes out as content
    off = ToolStream(hermes, prefix="p", plan=ToolPlan(parse=False))
    assert off.feed(CALL) == CALL and off.finish() == ("", ())
    pre = prefill_text(hermes, "get_weather")
    assert pre == '<tool_call>\n{"name": "get_weather", "arguments": '
    content, calls = _stream("hermes", CALL[len(pre) :], [5], ToolPlan(parse=True, prefill=pre))
    assert content == "" and calls[0].arguments == {"city": "Paris"}
    assert prefill_text(hermes) == '<tool_call>\n{"name": "'
    assert prefill_text(get_parser("mistral"), "f") == '[TOOL_CALLS][{"name": "f", "arguments": '
    assert prefill_text(get_parser("llama3_json")) == '{"name": "'
    deltas = tool_call_deltas(calls)
    assert deltas[0]["function"] == {"name": "get_weather", "arguments": ""} and deltas[0]["type"] == "function"
    assert json.loads(deltas[1]["function"]["arguments"]) == {"city": "Paris"} and deltas[1]["index"] == 0


def test_recorded_parser(tmp_path: Path) -> None:
    from rockroll.trainer.run.export import EXPORT_MARKER

    assert EXPORT_MARKER == EXPORT_FILE and recorded_parser(tmp_path) is None
    (tmp_path / EXPORT_FILE).write_text(json.dumps({"tool_call_parser": "mistral"}))
    assert recorded_parser(tmp_path) == "mistral"
    (tmp_path / "rockroll_episode.json").write_text(json.dumps({"tool_call_parser": "llama3_json"}))
    assert recorded_parser(tmp_path) == "llama3_json"  # the episode file first


def test_serve_model_refuses_an_unknown_parser(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rockroll.cli.main import app

    (tmp_path / "config.json").write_text("{}")
    result = CliRunner().invoke(app, ["serve-model", str(tmp_path), "--tool-call-parser", "nope"])
    assert result.exit_code == 2 and "unknown tool-call parser 'nope'" in result.output


# ---------------------------------------------------------------------------------------------- the server
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
RESULT, REPLY = "sunny, 24 C", "It is sunny in Paris."


def _second_turn(call_id: str, arguments: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": RESULT},
    ]


def _teach(model_dir: Path) -> None:
    """Teacher-force the tiny model on the two turns until greedy decoding writes them."""
    import torch

    from rockroll.agentrl.models.tiny import load_model_and_tokenizer
    from rockroll.agentrl.tools import render_chat

    model, tok = load_model_and_tokenizer(model_dir)
    eos = tok.eos_token
    turns = [(ASK, CALL + eos), (_second_turn("call_1", '{"city": "Paris"}'), REPLY + eos)]
    seqs = []
    for messages, answer in turns:
        prompt = render_chat(tok, _template_messages(messages), TOOLS)
        ids = tok.encode(prompt + answer, add_special_tokens=False)
        seqs.append((torch.tensor([ids]), len(tok.encode(prompt, add_special_tokens=False))))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, more only fight the other tests' processes
    torch.manual_seed(0)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        losses, exact = [], True
        for ids, n in seqs:
            logits, labels = model(input_ids=ids).logits[0, n - 1 : -1], ids[0, n:]
            exact = exact and bool((logits.argmax(-1) == labels).all())
            losses.append(torch.nn.functional.cross_entropy(logits, labels))
        loss = sum(losses)
        if exact and loss.item() < 0.2:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.set_num_threads(threads)
    assert exact, f"the tiny model did not learn the two turns (loss {loss.item():.3f})"
    model.save_pretrained(model_dir)


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from rockroll.agentrl.serving.protocol import ChatMessage
    from rockroll.agentrl.serving.tool_calls import chat_messages

    return chat_messages([ChatMessage.model_validate(m) for m in messages])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    openai = pytest.importorskip("openai")
    from rockroll.agentrl.models.tiny import TinyModelConfig, build_tiny_model
    from tests.agentrl.model_server import model_server

    model = build_tiny_model(
        tmp_path_factory.mktemp("tools") / "model", TinyModelConfig(chat_template="hermes", episodes_per_env=3)
    )
    _teach(Path(model))
    with model_server(Path(model)) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def _ask(client: Any, messages: list[dict[str, Any]], **kw: Any) -> Any:
    return client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=64, **kw
    ).choices[0]


def _streamed(client: Any, messages: list[dict[str, Any]], **kw: Any) -> tuple[Any, list[Any]]:
    """The answer the official client's stream helper puts together, and the raw chunks' choices."""
    chunks: list[Any] = []
    with client.chat.completions.stream(
        model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=64, **kw
    ) as stream:
        for event in stream:
            if event.type == "chunk" and event.chunk.choices:
                chunks.append(event.chunk.choices[0])
        return stream.get_final_completion().choices[0], chunks


def _calls(choice: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]


WEATHER = [("get_weather", {"city": "Paris"})]


@pytest.mark.slow  # the module's server: a tiny model built, taught and served (about 10 s)
def test_a_tool_conversation_through_the_openai_client(client: Any) -> None:
    first = _ask(client, ASK)
    assert (first.finish_reason, first.message.content, _calls(first)) == ("tool_calls", None, WEATHER)
    call = first.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    streamed, chunks = _streamed(client, ASK)
    assert (streamed.finish_reason, _calls(streamed)) == ("tool_calls", WEATHER)
    assert not streamed.message.content
    deltas = [c.delta.tool_calls[0] for c in chunks if c.delta.tool_calls]
    assert deltas[0].id and deltas[0].function.name == "get_weather" and deltas[1].function.arguments
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["tool_calls"] and chunks[-1].finish_reason
    second = _ask(client, _second_turn(call.id, call.function.arguments))
    assert (second.finish_reason, second.message.content, second.message.tool_calls) == ("stop", REPLY, None)
    again, _ = _streamed(client, _second_turn(call.id, call.function.arguments))
    assert (again.message.content, again.finish_reason, again.message.tool_calls) == (REPLY, "stop", None)


@pytest.mark.slow  # the module's server: a tiny model built, taught and served (about 10 s)
def test_required_and_named_tool_choice_prefill_the_call(client: Any) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    ids = {"return_token_ids": True}
    auto = _ask(client, ASK, extra_body=ids).model_dump()
    for choice in ("required", named):
        got = _ask(client, ASK, tool_choice=choice, extra_body=ids)
        assert (got.finish_reason, got.message.content, _calls(got)) == ("tool_calls", None, WEATHER), choice
        forced = got.model_dump()  # the prefilled opening is prompt, not sampled: the same tokens in all
        assert len(forced["prompt_token_ids"]) > len(auto["prompt_token_ids"])
        assert forced["prompt_token_ids"] + forced["token_ids"] == auto["prompt_token_ids"] + auto["token_ids"]
        streamed, chunks = _streamed(client, ASK, tool_choice=choice, extra_body=ids)
        assert (streamed.finish_reason, _calls(streamed)) == ("tool_calls", WEATHER), choice
        assert [t for c in chunks for t in (c.model_extra or {}).get("token_ids", [])] == forced["token_ids"]
    none = _ask(client, ASK, tool_choice="none")  # tools in the prompt, the answer never parsed
    assert (none.finish_reason, none.message.content, none.message.tool_calls) == ("stop", CALL, None)
    one = _ask(client, ASK, parallel_tool_calls=False)
    assert _calls(one) == WEATHER


@pytest.mark.slow  # the module's server: a tiny model built, taught and served (about 10 s)
def test_malformed_tools_and_tool_choice_are_400s_naming_the_param(client: Any) -> None:
    import openai

    fn = TOOLS[0]["function"]
    bad = [
        (dict(tools=[{"type": "function", "function": {**fn, "parameters": {"type": "x"}}}]), "tools", "parameters"),
        (dict(tools=[{"type": "function", "function": {**fn, "name": "get weather"}}]), "tools", "function.name"),
        (dict(tools=[{"type": "custom", "custom": {"name": "x"}}]), "tools", "tools[0]"),
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice", "'nope'"),
        (dict(tool_choice="required"), "tool_choice", "needs tools"),
        (dict(functions=[fn]), "functions", "tools and tool_choice"),
    ]
    for kw, param, words in bad:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="tiny", messages=ASK, **kw)
        assert e.value.param == param and words in e.value.message, (kw, e.value.body)
    broken = _second_turn("call_1", "{not json")
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="tiny", messages=broken, tools=TOOLS)
    assert e.value.param == "messages.1.tool_calls.0.function.arguments"
