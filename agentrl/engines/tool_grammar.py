"""Tool calls kept valid while sampling: a restriction (``SamplingParams.allowed``) backed by xgrammar.

A tool env declares its tools (:class:`rockroll.envs.tools.Tool`, each with a JSON-schema ``parameters``).
With ``rollout.episode.restrict_tool_calls`` the hf engine samples each turn of such an env from the
tokens a grammar allows after what the turn wrote so far (:class:`ToolGrammar`, the same protocol as
:class:`~rockroll.agentrl.engines.choices.AnswerTrie`): free text, and Hermes-style calls
(``<tool_call>\\n{"name": NAME, "arguments": ARGS}\\n</tool_call>``, :mod:`rockroll.agentrl.tools.hermes`)
whose NAME is a declared tool and whose ARGS fit its schema (:func:`hermes_format`, xgrammar's
``triggered_tags`` as in its ``qwen_3`` structural tag, without a reasoning block). Outside a call the
text may not hold a stray ``</tool_call>``; the end of turn (the engine's stop tokens) is allowed where the
grammar may end: outside a call. Every call the parser then reads parses and fits its schema, except one
the token cap cuts (``finish_reason`` "length"): so within the last :data:`CLOSE_MARGIN` tokens of the cap
(at most half of it) a turn that is not inside a call must end there (its only allowed token: the stop). A
call opened before and longer than that margin (long strings spelled in byte tokens) can still be cut.

**Prefix cache.** The engine asks :meth:`ToolGrammar.next_ids` with a prefix one token longer per step, for
many sequences at once. A dict ``prefix -> state`` (LRU, :data:`CACHE_SIZE` entries; the root is kept) holds
each prefix's matcher and its next-token bitmask; a new prefix forks its parent's matcher and accepts one
token: O(1) matcher work per step (a miss replays from the longest cached ancestor). Prefixes are the
turn's response only (each turn starts at the root), so turns and episodes of one env share states. The
engine's thread and the rollout's event loop both use it: a lock guards it.

**Ids outside the grammar.** The bitmask spans the model's logits (``engine.vocab_size``); ids the tokenizer
has no text for are never allowed. A prefix the grammar rejects (an id past the vocabulary, a token that was
not allowed: only a caller other than the engine writes one) is off the grammar: unrestricted from there on,
as a prefix off an AnswerTrie. The tokenizer's special tokens are text to xgrammar; where the grammar
restricts, the non-stop ones are removed from the set (the parser decodes without them: a call's JSON must
not hold one), and so are the tokens Python's ``json``/UTF-8 decoding refuses but xgrammar's JSON strings
take: a raw control byte (tab included), ill-formed UTF-8 (surrogates, overlong forms; across tokens too,
:func:`_byte_rules`). Where the grammar allows every id the position is unrestricted (``()``), specials
included.

**What the trainer records** (:meth:`ToolGrammar.positions`, ``Turn.allowed``; the trainer builds an
``[N, L, K]`` long tensor, ``K`` the widest set of the batch): free text is ``()`` (every id allowed: exact
and free). Inside a call the sets are narrow (punctuation, keys, tool names, digits: tens of ids) except
inside a JSON string, where nearly every id is allowed. Sets up to ``record_cap`` (:data:`RECORD_CAP`,
1024) ids are recorded exactly; a wider one is recorded unrestricted (``()``): there the update's logprob
is ``log p(t)`` where the rollout's was ``log p(t) - log p(S)`` (``S`` the allowed set; the mass outside
``S`` is what the model puts on breaking the JSON), and PPO's ratio is off by ``p(S)`` at those tokens.
For the tiny models (a 516-id vocabulary) no set is wider than the cap: rollout and update agree exactly,
at ``K <= 516``: ``N * L * K * 8`` bytes (the test's 6 Lookup episodes of about 1000 tokens: ``K`` 393,
about 19 MiB; 64 samples of 4096 tokens at ``K`` 516: 1.1 GB). For a 150k vocabulary an exact string
position alone would make ``K`` about 150k (64 x 4096 tokens: 315 GB), hence the cap; at the cap
``K <= 1024`` costs ``N * L * 8`` KB (64 x 4096: 2.1 GB; lower it for large batches). The engine also
builds each restricted row's set as a tuple per step: cheap for the tiny vocabulary, slow for a 150k one
(a bitmask path in the engine is the fix for real models).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

from rockroll.agentrl.tools.hermes import CLOSE, OPEN
from rockroll.envs.tools import Tool

__all__ = ["CACHE_SIZE", "CLOSE_MARGIN", "RECORD_CAP", "ToolGrammar", "hermes_format", "tool_grammar"]

#: positions() records a set with more ids than this as unrestricted (see the module docstring)
RECORD_CAP = 1024
#: the last tokens of the cap in which a turn outside a call may only end (at most half the cap)
CLOSE_MARGIN = 64
#: prefix states kept (the LRU bound of the prefix cache)
CACHE_SIZE = 8192


def hermes_format(tools: Sequence[Tool], *, max_whitespace: int | None = 1) -> dict[str, Any]:
    """The xgrammar structural tag of Hermes-style turns calling ``tools``: any text without a stray
    ``</tool_call>``; after ``<tool_call>``, one declared tool's call written as the Hermes template writes it
    (``<tool_call>\\n{"name": "find", "arguments": {...}}\\n</tool_call>``), the arguments fitting the tool's
    schema (properties in the schema's order), at most ``max_whitespace`` whitespace characters in a row."""
    if not tools:
        raise ValueError("a tool-call grammar needs at least one tool")
    content: dict[str, Any] = {"type": "json_schema", "max_whitespace_cnt": max_whitespace}
    tags = [
        {
            "type": "tag",
            "begin": f'{OPEN}\n{{"name": {json.dumps(t.name)}, "arguments": ',
            "content": {**content, "json_schema": dict(t.parameters)},
            "end": f"}}\n{CLOSE}",
        }
        for t in tools
    ]
    fmt = {"type": "triggered_tags", "triggers": [OPEN], "tags": tags, "excludes": [CLOSE]}
    return {"type": "structural_tag", "format": fmt}


class _State:
    """A prefix's matcher (None: off the grammar, or ended) and next-token bitmask (None: every id)."""

    __slots__ = ("matcher", "mask", "lead", "ids", "tail")

    def __init__(self, matcher: Any, mask: Any, lead: int = 0) -> None:
        self.matcher, self.mask = matcher, mask
        self.lead = lead  # the UTF-8 lead byte the prefix ends on, when it limits the next byte (0: none)
        self.ids: tuple[int, ...] | None = None  # the allowed ids, once asked (see ToolGrammar._ids)
        self.tail: tuple[int, ...] | None = None  # forced_tail, once asked


_OFF = _State(None, None)


class ToolGrammar:
    """The tokens a Hermes-style turn calling ``tools`` may take after each prefix (see the module docstring).

    Args:
        tokenizer: the engine's Hugging Face tokenizer.
        tools: the env's tools.
        stops: the engine's stop tokens (its EOS ids): allowed where the grammar may end.
        vocab_size: the width of the model's logits (None: the tokenizer's size).
        max_tokens: the turn's token cap (None: none): in its last ``min(CLOSE_MARGIN, max_tokens // 2)``
            tokens a turn outside a call may only end.
        record_cap: positions() records a wider set as unrestricted.
        cache_size: prefix states kept.
        max_whitespace: whitespace characters in a row inside a call's JSON (None: any).
    """

    def __init__(
        self,
        tokenizer: Any,
        tools: Sequence[Tool],
        *,
        stops: Collection[int],
        vocab_size: int | None = None,
        max_tokens: int | None = None,
        record_cap: int = RECORD_CAP,
        cache_size: int = CACHE_SIZE,
        max_whitespace: int | None = 1,
    ) -> None:
        import numpy as np

        try:
            import xgrammar as xgr
        except ImportError as e:
            raise ImportError(
                "restrict_tool_calls needs xgrammar: pip install --no-deps xgrammar==0.2.9 apache-tvm-ffi "
                "(scripts/setup.sh does with the train extra)"
            ) from e
        self.stops = tuple(sorted({int(s) for s in stops}))
        if not self.stops:
            raise ValueError("a tool-call grammar needs the engine's stop tokens (the end of a turn)")
        self.vocab_size = int(vocab_size or len(tokenizer))
        self.max_tokens, self.record_cap, self.cache_size = max_tokens, record_cap, cache_size
        self._close_at = None if max_tokens is None else max_tokens - min(CLOSE_MARGIN, max_tokens // 2)
        self.tools = tuple(tools)
        compiler, rules = _compiler(tokenizer, self.vocab_size, self.stops)
        compiled = compiler.compile_structural_tag(json.dumps(hermes_format(self.tools, max_whitespace=max_whitespace)))
        self._np = np
        self._buf = xgr.allocate_token_bitmask(1, self.vocab_size)
        # removed where the grammar restricts: the non-stop special tokens, the tokens with a control byte or
        # ill-formed UTF-8, and after a lead byte the tokens whose first byte cannot follow it (_byte_rules)
        never = (set(getattr(tokenizer, "all_special_ids", ()) or ()) | rules[0]) - set(self.stops)
        self._never = np.array(sorted(i for i in never if 0 <= i < self.vocab_size), dtype=np.int64)
        self._lead_of, self._after_lead = rules[1], rules[2]
        self._lock = threading.Lock()
        self._root = self._fill(xgr.GrammarMatcher(compiled))
        self._cache: OrderedDict[tuple[int, ...], _State] = OrderedDict()

    # ------------------------------------------------------------ the AnswerTrie protocol
    @property
    def max_len(self) -> int:
        """The longest response: the turn's cap (the grammar itself has no bound)."""
        return self.max_tokens or 0

    def next_ids(self, prefix: Sequence[int]) -> tuple[int, ...]:
        """Tokens allowed after ``prefix`` (empty: every id, or ``prefix`` is off the grammar)."""
        key = tuple(prefix)
        with self._lock:
            return self._ids(self._state(key), len(key))

    def forced_tail(self, prefix: Sequence[int]) -> tuple[int, ...]:
        """The tokens that must follow ``prefix`` to a stop token when no choice is left on the way (in the
        close margin: the stop itself); empty otherwise. Each has probability 1 under the restriction."""
        key = tuple(prefix)
        with self._lock:
            state = self._state(key)
            if state.tail is None:
                out: list[int] = []
                cur, limit = key, self.max_tokens or len(key) + 256
                while len(cur) < limit and len(ids := self._ids(self._state(cur), len(cur))) == 1:
                    out.append(ids[0])
                    if ids[0] in self.stops:
                        break
                    cur = (*cur, ids[0])
                state.tail = tuple(out) if out and out[-1] in self.stops else ()
            return state.tail

    def choice_point(self) -> None:
        """None: a grammar has no single choice point (the greedy shortcut of AnswerTrie does not apply)."""
        return None

    def positions(self, tokens: Sequence[int]) -> list[tuple[int, ...]]:
        """The ids recorded for each position of ``tokens``: the allowed set, or ``()`` where every id is
        allowed or the set has more than ``record_cap`` ids (see the module docstring)."""
        toks = tuple(tokens)
        out: list[tuple[int, ...]] = []
        with self._lock:
            for i in range(len(toks)):
                ids = self._ids(self._state(toks[:i]), i)
                out.append(ids if len(ids) <= self.record_cap else ())
        return out

    # ------------------------------------------------------------ prefix states
    def _state(self, key: tuple[int, ...]) -> _State:
        """``key``'s state: cached, or grown from its longest cached ancestor one token at a time."""
        if not key:
            return self._root
        state = self._cache.get(key)
        if state is not None:
            self._cache.move_to_end(key)
            return state
        n = len(key) - 1
        while n > 0 and (state := self._cache.get(key[:n])) is None:
            n -= 1
        state = state if n > 0 and state is not None else self._root
        for i in range(n, len(key)):
            state = self._child(state, key[:i], key[i])
            self._cache[key[: i + 1]] = state
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return state

    def _child(self, state: _State, prefix: tuple[int, ...], tok: int) -> _State:
        """The state after ``prefix + (tok,)``; off the grammar when ``tok`` was not allowed after ``prefix``."""
        if state.matcher is None:
            return _OFF
        ids = self._ids(state, len(prefix))
        if not (0 <= tok < self.vocab_size) or (ids and tok not in ids):
            return _OFF
        matcher = state.matcher.fork()
        if not matcher.accept_token(tok) or matcher.is_terminated():
            return _OFF  # rejected, or the turn ended: nothing left to restrict
        return self._fill(matcher, self._lead_of.get(tok, 0))

    def _fill(self, matcher: Any, lead: int = 0) -> _State:
        if not matcher.fill_next_token_bitmask(self._buf):
            return _State(matcher, None, lead)  # every id allowed
        return _State(matcher, self._buf[0].numpy().copy(), lead)

    def _ids(self, state: _State, depth: int) -> tuple[int, ...]:
        """The allowed ids of ``state`` (a prefix of length ``depth``; ``()``: every id), computed once."""
        if state.matcher is None:
            return ()
        if state.ids is None:
            state.ids = self._allowed(state, self._close_at is not None and depth >= self._close_at)
        return state.ids

    def _allowed(self, state: _State, closing: bool) -> tuple[int, ...]:
        np, mask = self._np, state.mask
        if mask is None:
            bits = np.ones(self.vocab_size, dtype=np.uint8)
        else:
            bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: self.vocab_size]
        ends = tuple(s for s in self.stops if bits[s])
        if closing and ends:  # outside a call near the cap: only the end of turn
            return ends
        if mask is None:
            return ()
        kept = bits.copy()
        kept[self._never] = 0  # a call's JSON holds no special token (decoded away) and no raw control byte
        if state.lead:
            kept[self._after_lead[state.lead]] = 0  # xgrammar takes surrogates and overlong forms; Python does not
        return tuple(np.flatnonzero(kept if kept.any() else bits).tolist())


#: bytes JSON never holds raw (inside a string they must be escaped; outside only space, \\n, \\r, \\t count as
#: whitespace, and \\t is left out too: xgrammar's strings would take it raw)
_CONTROL = frozenset(range(0x20)) - {0x0A, 0x0D}
#: UTF-8 lead bytes that narrow the byte after them (the rest take 0x80-0xBF); and bytes never in UTF-8
_SECOND = {0xE0: range(0xA0, 0xC0), 0xED: range(0x80, 0xA0), 0xF0: range(0x90, 0xC0), 0xF4: range(0x80, 0x90)}
_INVALID = frozenset({0xC0, 0xC1, *range(0xF5, 0x100)})
#: (never allowed where restricted, token -> the narrowing lead byte it ends on, lead byte -> ids it forbids next)
ByteRules = tuple[frozenset[int], dict[int, int], dict[int, Any]]
# per tokenizer, logits width and stops: its compiler (building one reads the whole vocabulary) and byte rules;
# the tokenizer kept, so its id is not reused while cached
_COMPILERS: dict[tuple[int, int, tuple[int, ...]], tuple[Any, Any, ByteRules]] = {}


def _compiler(tokenizer: Any, vocab_size: int, stops: tuple[int, ...]) -> tuple[Any, ByteRules]:
    key = (id(tokenizer), vocab_size, stops)
    if key not in _COMPILERS or _COMPILERS[key][0] is not tokenizer:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=list(stops))
        _COMPILERS[key] = (tokenizer, xgr.GrammarCompiler(info, max_threads=1), _byte_rules(info.decoded_vocab))
    return _COMPILERS[key][1], _COMPILERS[key][2]


def _byte_rules(vocab: Sequence[bytes]) -> ByteRules:
    """What a call's JSON may not hold, by token bytes: a control byte, ill-formed UTF-8 inside a token, and a
    first byte that cannot follow the previous token's last (a lead byte of :data:`_SECOND`)."""
    import numpy as np

    never: set[int] = set()
    lead_of: dict[int, int] = {}
    after: dict[int, list[int]] = {lead: [] for lead in _SECOND}
    for i, b in enumerate(vocab):
        if not b:
            continue
        pairs = zip(b, b[1:], strict=False)
        if (
            _CONTROL.intersection(b)
            or _INVALID.intersection(b)
            or any(x in _SECOND and y not in _SECOND[x] and 0x80 <= y < 0xC0 for x, y in pairs)
        ):
            never.add(i)
        if b[-1] in _SECOND:
            lead_of[i] = b[-1]
        for lead, ok in _SECOND.items():
            if 0x80 <= b[0] < 0xC0 and b[0] not in ok:
                after[lead].append(i)
    return frozenset(never), lead_of, {k: np.array(v, dtype=np.int64) for k, v in after.items()}


def tool_grammar(engine: Any, tools: Sequence[Tool], *, max_tokens: int | None = None, **kw: Any) -> ToolGrammar:
    """A :class:`ToolGrammar` for ``engine``'s tokenizer, stop tokens and logits width."""
    tok = engine.tokenizer
    stops = getattr(engine, "eos_token_ids", None) or {tok.eos_token_id}
    return ToolGrammar(
        tok, tools, stops=stops, vocab_size=getattr(engine, "vocab_size", None), max_tokens=max_tokens, **kw
    )
