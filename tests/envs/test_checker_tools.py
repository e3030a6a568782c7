"""``check_env``'s ``tools`` check names the tool env that breaks the tool contract (the env: Lookup, broken)."""

from __future__ import annotations

import pytest

from rockroll.envs import EnvCheckError, check_env
from rockroll.envs.lookup import TOOLS, LookupEnv
from rockroll.envs.tools import Tool


class _NoExamples(LookupEnv):
    def tool_examples(self):
        return []


class _NoAnswerExample(LookupEnv):
    def tool_examples(self):
        return [c for c in super().tool_examples() if c.name != "answer"]


class _BadSchema(LookupEnv):
    tools = (*TOOLS[:2], Tool("answer", "", {"type": "array"}))


class _BrokenGet(LookupEnv):
    def _call(self, name, arguments):
        if name == "get":
            raise KeyError("the database is down")
        return super()._call(name, arguments)


class _RaisesOnUnknownTools(LookupEnv):
    def step(self, action):
        if not isinstance(action, str) and any(c.name not in {t.name for t in self.tools} for c in action.calls):
            raise KeyError("unknown tool")
        return super().step(action)


class _MistakesEnd(LookupEnv):
    def _after_calls(self, results):
        out = super()._after_calls(results)
        out.terminated = out.terminated or all(r.error for r in results)
        return out


class _ForgetfulFork(LookupEnv):
    def _set_state(self, data):
        super()._set_state({**data, "obs": ""})


@pytest.mark.parametrize(
    ("env_cls", "said"),
    [
        (_NoExamples, "no call of ['answer', 'find', 'get']"),
        (_NoAnswerExample, "no call of ['answer']"),
        (_BadSchema, "tools[2].parameters must be a JSON schema of type 'object'"),
        (_BrokenGet, "the example call get"),
        (_RaisesOnUnknownTools, "a call of an unknown tool raised KeyError"),
        (_MistakesEnd, "must not end the episode"),
        (_ForgetfulFork, "the fork renders differently"),
    ],
)
def test_tools_check_names_what_is_broken(env_cls, said: str) -> None:
    with pytest.raises(EnvCheckError) as err:
        check_env(env_cls(difficulty=2), make=lambda: env_cls(difficulty=2))
    assert err.value.check == "tools"
    assert said in str(err.value)


def test_a_tool_env_skips_the_text_only_check_and_may_skip_tools() -> None:
    check_env(_NoExamples(), make=_NoExamples, skip=("tools",))  # its text turns are final answers, not no-ops
