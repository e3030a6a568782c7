"""Tool-call parsers: round trips render -> parse for each style, several calls a turn, malformed output as
problems (never an exception), deterministic ids, and the registry's names."""

from __future__ import annotations

import pytest

from rockroll.agentrl.tools import TOOL_PARSERS, ParsedTurn, get_parser
from rockroll.envs.registries import UnknownNameError
from rockroll.envs.tools import ToolAction, ToolCall

STYLES = ("hermes", "llama3_json", "mistral")
CALLS = (
    ToolCall("x", "lookup", {"key": "alpha", "limit": 3}),
    ToolCall("y", "calc", {"expr": "2 * (3 + 4)", "nested": {"list": [1, 2.5, None, True], "é": "ü → ∑"}}),
    ToolCall("z", "submit", {}),
)


def _ids(turn: int, n: int, prefix: str = "call") -> list[str]:
    return [f"{prefix}_{turn}_{i}" for i in range(n)]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("n_calls", [1, 3])
def test_render_then_parse_gives_the_turn_back(style: str, n_calls: int) -> None:
    parser = get_parser(style)
    text = "" if style == "llama3_json" else "Let me check."  # llama3_json writes no text beside calls
    action = ToolAction(text, CALLS[:n_calls])
    parsed = parser.parse(parser.render(action), turn=4)
    assert isinstance(parsed, ParsedTurn) and parsed.ok and parsed.problems == ()
    assert parsed.text == text
    assert [c.id for c in parsed.calls] == _ids(4, n_calls)
    assert [(c.name, c.arguments) for c in parsed.calls] == [(c.name, c.arguments) for c in action.calls]
    assert parsed.action == ToolAction(text, parsed.calls)
    text_out, calls, problems = parsed  # unpacks as (text, calls, problems)
    assert (text_out, calls, problems) == (parsed.text, parsed.calls, ())


@pytest.mark.parametrize("style", STYLES)
def test_a_turn_without_calls_is_its_text_exactly(style: str) -> None:
    parser = get_parser(style)
    for text in ["", "  <answer>Left</answer>\n", "I think the answer is 42."]:
        assert parser.render(ToolAction(text)) == text
        assert parser.parse(text) == ParsedTurn(text, (), ())


@pytest.mark.parametrize("style", STYLES)
def test_ids_are_deterministic_and_take_a_prefix(style: str) -> None:
    parser = get_parser(style)
    out = parser.render(ToolAction("", CALLS))
    assert parser.parse(out, turn=2) == parser.parse(out, turn=2)
    assert [c.id for c in parser.parse(out, turn=7, prefix="ep3").calls] == _ids(7, 3, "ep3")
    assert parser.render_call(CALLS[0]) == parser.render(ToolAction("", CALLS[:1]))


def test_hermes_keeps_the_text_around_and_between_calls() -> None:
    parser = get_parser("hermes")
    out = (
        'First.\n<tool_call>\n{"name": "a", "arguments": {"k": 1}}\n</tool_call>\nthen'
        '<tool_call>{"name":"b","arguments":{}}</tool_call>  last  '
    )
    parsed = parser.parse(out, turn=1)
    assert parsed.ok and parsed.text == "First.\nthen\nlast"
    assert [(c.id, c.name, c.arguments) for c in parsed.calls] == [("call_1_0", "a", {"k": 1}), ("call_1_1", "b", {})]
    assert parser.parse('<tool_call>{"name": "noargs"}</tool_call>').calls[0].arguments == {}


#: (style, model output, calls still made, words each problem must contain (in order))
MALFORMED = [
    ("hermes", '<tool_call>{"name": "a", "arguments": {"k": 1}</tool_call>', 0, ["tool call 1", "not valid JSON"]),
    ("hermes", "<tool_call>not json</tool_call>", 0, ["not valid JSON"]),
    (
        "hermes",
        '<tool_call>{"name": "a", "arguments": [1, 2]}</tool_call>',
        0,
        ['"arguments" must be a JSON object, got a list'],
    ),
    (
        "hermes",
        '<tool_call>{"name": "a", "arguments": "{\\"k\\": 1}"}</tool_call>',
        0,
        ["must be a JSON object, got text"],
    ),
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>', 0, ['"name" must be', "got null"]),
    ("hermes", '<tool_call>{"name": "", "arguments": {}}</tool_call>', 0, ['"name" must be']),
    ("hermes", '<tool_call>{"name": 3, "arguments": {}}</tool_call>', 0, ["got a number"]),
    ("hermes", '<tool_call>{"name": "a", "arguments": {}, "why": 1}</tool_call>', 0, ["unknown key(s) 'why'"]),
    ("hermes", '<tool_call>["a"]</tool_call>', 0, ["expected a JSON object", "got a list"]),
    ("hermes", '<tool_call>{"name": "a", "arguments": {"x": NaN}}</tool_call>', 0, ["not valid JSON"]),
    ("hermes", 'ok <tool_call>{"name": "a", "arguments": {}}', 0, ["tool call 1", "not closed"]),
    (
        "hermes",
        '<tool_call>{"name": "a"\n<tool_call>{"name": "b", "arguments": {}}</tool_call>',
        1,
        ["tool call 1", "not closed"],
    ),
    ("hermes", 'x</tool_call><tool_call>{"name": "a", "arguments": {}}</tool_call>', 1, ["closes no <tool_call>"]),
    (
        "hermes",
        '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": 5}</tool_call>',
        1,
        ["tool call 2", "got a number"],
    ),
    ("llama3_json", '{"name": "a", "parameters": {"k": 1}', 0, ["tool call 1", "not valid JSON"]),
    ("llama3_json", '{"name": "a", "parameters": {}} and then some', 1, ["text after tool call 1"]),
    (
        "llama3_json",
        '{"name": "a", "parameters": {}}; {"name": "b", "parameters": []}',
        1,
        ["tool call 2", "got a list"],
    ),
    ("llama3_json", '{"name": "a", "parameters": {}, "arguments": {}}', 0, ["arguments given twice"]),
    ("llama3_json", '{"function": "a", "parameters": {}}', 0, ["unknown key(s) 'function'"]),
    ("llama3_json", "{}", 0, ['"name" must be']),
    ("mistral", 'Sure.[TOOL_CALLS][{"name": "a", "arguments": {}', 0, ["not valid JSON"]),
    ("mistral", '[TOOL_CALLS]{"name": "a", "arguments": {}}', 0, ["expected a JSON list", "an object"]),
    ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": 1}, {"name": "b", "arguments": {}}]', 1, ["tool call 1"]),
    ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": {}}] trailing', 1, ["text after the list"]),
    ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": {}}][TOOL_CALLS][]', 1, ["more than once"]),
    ("mistral", '[TOOL_CALLS][{"name": "a", "arguments": {}, "type": "function"}]', 0, ["unknown key(s) 'type'"]),
]


@pytest.mark.parametrize(("style", "output", "n_calls", "words"), MALFORMED)
def test_malformed_output_gives_problems_not_exceptions(
    style: str, output: str, n_calls: int, words: list[str]
) -> None:
    parsed = get_parser(style).parse(output, turn=0)
    assert len(parsed.calls) == n_calls and not parsed.ok
    problem = parsed.problems[0]
    assert all(w in problem for w in words), problem
    assert all(isinstance(p, str) and p for p in parsed.problems)


def test_a_malformed_call_keeps_its_number_in_the_ids() -> None:
    out = '[TOOL_CALLS][{"name": "a", "arguments": 1}, {"name": "b", "arguments": {}, "id": "abcdefghi"}]'
    parsed = get_parser("mistral").parse(out, turn=5)
    assert [(c.id, c.name) for c in parsed.calls] == [("call_5_1", "b")]  # the model's id is not used


def test_llama3_json_reads_the_python_tag_and_arguments_and_leaves_plain_text() -> None:
    parser = get_parser("llama3_json")
    parsed = parser.parse('<|python_tag|>{"name": "a", "arguments": {"k": 1}};{"name": "b", "parameters": {}};')
    assert parsed.ok and parsed.text == "" and [c.name for c in parsed.calls] == ["a", "b"]
    assert parser.render(ToolAction("dropped beside calls", CALLS[:1])) == parser.render_call(CALLS[0])


@pytest.mark.parametrize("style", STYLES)
def test_no_output_raises(style: str) -> None:
    parser = get_parser(style)
    for junk in [
        "{",
        "[TOOL_CALLS]",
        "<tool_call>",
        "</tool_call>",
        '{"name": "a"};;',
        "[TOOL_CALLS][1, null]",
        "\x00{",
    ]:
        parsed = parser.parse(junk)
        assert isinstance(parsed, ParsedTurn)


def test_the_registry_names_the_styles_and_suggests_close_ones() -> None:
    assert set(STYLES) <= set(TOOL_PARSERS)
    assert all(get_parser(s).name == s for s in STYLES)
    with pytest.raises(UnknownNameError, match="Did you mean 'hermes'") as err:
        get_parser("hermess")
    assert err.value.field == "tool_call_parser" and isinstance(err.value, ValueError)
