"""Conversations with tools through the chat template: the tiny templates render what the parsers read, the
fallback renders as Hugging Face does, and full-history prompts extend each other token for token with tool
messages in between (the assistant's sampled tokens being what the template writes for its turn)."""

from __future__ import annotations

import string
from typing import Any

import pytest

from rockroll.agentrl.models.char_tokenizer import CharTokenizer
from rockroll.agentrl.models.tiny import CHAT_TEMPLATE, TinyModelConfig, build_char_tokenizer, build_tokenizer
from rockroll.agentrl.models.tool_templates import TOOL_TEMPLATES
from rockroll.agentrl.tools import (
    assistant_message,
    chat_template_for,
    completion_text,
    encode_chat,
    get_parser,
    render_chat,
    tool_message,
)
from rockroll.envs.tools import Tool, ToolAction, ToolCall, ToolResult

STYLES = tuple(TOOL_TEMPLATES)
TOOLS = [
    Tool("lookup", "Look up a key in the table.", {"type": "object", "properties": {"key": {"type": "string"}}}),
    Tool(
        "add", "Add two numbers.", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    ),
]
#: the text of the test conversation: every character the tokenizers must know
CORPUS = [string.printable, "é ü → ∑", *TOOL_TEMPLATES.values()]


def _turns(style: str) -> list[ToolAction]:
    """The assistant's turns: several calls, one call, a final answer (no text beside calls for llama3_json)."""
    text = "" if style == "llama3_json" else "Looking both up."
    return [
        ToolAction(text, (ToolCall("call_0_0", "lookup", {"key": "é"}), ToolCall("call_0_1", "lookup", {"key": "b"}))),
        ToolAction("", (ToolCall("call_1_0", "add", {"a": 2, "b": 3.5}),)),
        ToolAction("The sum is 5.5 → <answer>5.5</answer>"),
    ]


def _results(action: ToolAction) -> list[dict[str, Any]]:
    return [tool_message(ToolResult(c.id, c.name, f'{{"value": "{c.name}-{i}"}}')) for i, c in enumerate(action.calls)]


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Any]:
    """The tiny models' character and BPE tokenizers (templates set per test) and the template-less one."""
    return {
        "chars": build_char_tokenizer(CORPUS),
        "bpe": build_tokenizer(CORPUS * 4, vocab_size=400),
        "charclass": CharTokenizer(),
    }


def _with_template(tok: Any, style: str) -> Any:
    if not isinstance(tok, CharTokenizer):
        tok.chat_template = TOOL_TEMPLATES[style]
    return tok


@pytest.mark.parametrize("kind", ["chars", "bpe", "charclass"])
@pytest.mark.parametrize("style", STYLES)
def test_full_history_prompts_extend_each_other_token_for_token(
    tokenizers: dict[str, Any], style: str, kind: str
) -> None:
    tok = _with_template(tokenizers[kind], style)
    parser = get_parser(style)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer with the tools."},
        {"role": "user", "content": "What is table[é] + table[b]?"},
    ]
    previous: list[int] = []
    for k, action in enumerate(_turns(style)):
        prompt = encode_chat(tok, messages, TOOLS, style=style)
        assert prompt[: len(previous)] == previous, f"turn {k}'s prompt does not extend turn {k - 1}'s"
        sampled_text = completion_text(tok, messages, action, TOOLS, style=style)
        assert sampled_text == parser.render(action) + tok.eos_token  # the template writes the turn the parser's way
        sampled = tok.encode(sampled_text, add_special_tokens=False)
        assert tok.decode(sampled) == sampled_text and sampled[-1] == tok.eos_token_id
        parsed = parser.parse(tok.decode(sampled, skip_special_tokens=True), turn=k)
        assert parsed.ok and parsed.action == action  # the ids are call_<turn>_<i>, as in _turns
        previous = prompt + sampled
        messages += [assistant_message(action), *_results(action)]
    whole = encode_chat(tok, messages, TOOLS, style=style, add_generation_prompt=False)
    assert whole[: len(previous)] == previous


@pytest.mark.parametrize("style", STYLES)
def test_the_fallback_renders_as_the_tokenizer_template_does(tokenizers: dict[str, Any], style: str) -> None:
    """A tokenizer without a template (CharTokenizer) gets the style's tiny template: same text as Hugging Face's
    ``apply_chat_template`` with that template, tool results and calls included."""
    hf = _with_template(tokenizers["chars"], style)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for action in _turns(style)[:2]:
        messages += [assistant_message(action), *_results(action)]
    assert chat_template_for(hf, style) == TOOL_TEMPLATES[style]
    assert chat_template_for(tokenizers["charclass"], style) is None
    for gen in (True, False):
        for tools in (TOOLS, None):
            want = hf.apply_chat_template(
                messages, tools=[t.to_openai() for t in tools or []] or None, tokenize=False, add_generation_prompt=gen
            )
            got = render_chat(tokenizers["charclass"], messages, tools, style=style, add_generation_prompt=gen)
            assert got == want


def test_hermes_without_tools_renders_as_the_tiny_chatml_template(tokenizers: dict[str, Any]) -> None:
    """A plain conversation renders the same under ``hermes`` as under ``chatml`` (existing prompts unchanged);
    a ChatML tokenizer asked for tools falls back to the hermes template; arguments sent as JSON text (the
    OpenAI API's way) are written as they are."""
    tok = _with_template(tokenizers["chars"], "hermes")
    plain = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
    ]
    chatml = build_char_tokenizer(CORPUS)
    chatml.chat_template = CHAT_TEMPLATE
    for gen in (True, False):
        assert render_chat(tok, plain, style="hermes", add_generation_prompt=gen) == chatml.apply_chat_template(
            plain, tokenize=False, add_generation_prompt=gen
        )
    assert chat_template_for(chatml, "hermes", tools=False) == CHAT_TEMPLATE
    assert chat_template_for(chatml, "hermes") is None
    assert render_chat(chatml, plain, TOOLS) == render_chat(tok, plain, TOOLS)
    as_text = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "add", "arguments": '{"a":1}'}}],
    }
    assert '<tool_call>\n{"name": "add", "arguments": {"a":1}}\n</tool_call>' in render_chat(tok, [as_text])
    assert TinyModelConfig(chat_template="hermes").chat_template == "hermes"
    with pytest.raises(ValueError, match="tool-call style"):
        render_chat(CharTokenizer(), plain, TOOLS, style="qwen3_xml")
