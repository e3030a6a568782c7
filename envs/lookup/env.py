"""Lookup as a tool env: answer a multi-hop question by calling ``find``, ``get`` and ``answer``."""

from __future__ import annotations

import json
from typing import Any

from rockroll.envs.core import StepOutcome, parse_answer
from rockroll.envs.errors import EnvConfigError
from rockroll.envs.lookup.world import MAX_HOPS, World, generate_world, record_text
from rockroll.envs.tool_env import ToolEnv, render_results
from rockroll.envs.tools import Tool, ToolAction, ToolCall, ToolResult, one_string

__all__ = ["LookupEnv", "TOOLS"]


#: the schemas bound each string by a pattern and hold no number after a ``": "``: a record's field is
#: written that way (``"age": 47``), and the tiny model copies the number after the right ``": "`` from a
#: tool result (a ``"maximum": 999`` in the tools block gave it candidates that are never the answer)
TOOLS = (
    Tool(
        "find",
        "The id of the record (person, company or city) with this name.",
        one_string("name", "a name from the question or a record", pattern="^[A-Za-z]{1,16}$"),
    ),
    Tool(
        "get",
        "The record with this id, as JSON.",
        one_string("id", "an id that find or a record gave", pattern="^[a-z][0-9]{1,3}$"),
    ),
    Tool(
        "answer",
        "Give your final answer, the number asked for (ends the episode).",
        {
            "type": "object",
            "properties": {"value": {"type": "integer", "description": "the number asked for"}},
            "required": ["value"],
            "additionalProperties": False,
        },
    ),
)


def _normal(value: str) -> str:
    return value.strip().strip("\"'").rstrip(".").strip().lower()


class LookupEnv(ToolEnv):
    """A small generated database (people, companies, cities) and a question that takes several lookups.

    Args:
        difficulty: links between the person the question names and the number it asks for: 1 (the
            person's age: ``find`` + 1 ``get``), 2 (their employer's staff: + 2 ``get``), 3 (the population
            of the employer's city: + 3 ``get``); 0: each episode draws 1, 2 or 3 from its seed.
        format_penalty: reward added for a turn with a bad call (unknown tool, arguments failing the schema).

    A turn without a call is the final answer (the content of its last ``<answer>`` block when it has one,
    else its whole text), as is an ``answer`` call. Reward 1 for the right answer, else 0; the episode ends
    with the answer (step limits come from ``MaxSteps``).
    """

    tools = TOOLS
    instructions = (
        "Answer a question about a small database by looking records up with tools.\n"
        "Tables: people (name, age, employer: a company id), companies (name, staff, city: a city id), "
        "cities (name, population). An id is a letter and a number: p (people), c (companies), t (cities).\n"
        "Reward: 1 for the right answer, else 0. A bad call costs a penalty."
    )
    action_format = (
        "Tools: find(name) gives the id of the record with that name; get(id) gives the record; "
        "answer(value) gives your final answer (a number). One call per turn is enough. "
        "A reply without a call is taken as your final answer."
    )

    def __init__(self, *, difficulty: int = 0, format_penalty: float = -0.1, render_mode: str | None = None) -> None:
        super().__init__(format_penalty=format_penalty, render_mode=render_mode)
        if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 0 <= difficulty <= MAX_HOPS:
            raise EnvConfigError(
                f"difficulty must be 0 (mixed) or 1 to {MAX_HOPS} (links to follow), got {difficulty!r}",
                env="Lookup",
                param="difficulty",
            )
        self.level = difficulty
        self.world: World | None = None
        self.found: list[str] = []  # ids that find() returned
        self.fetched: list[str] = []  # ids that get() returned, first fetch order
        self.calls = 0  # valid calls run this episode
        self.final: str | None = None  # the answer given
        self._obs = ""

    # ----------------------------------------------------------------- hooks
    def _reset(self, options: dict[str, Any]) -> dict[str, Any]:
        hops = self.level or 1 + int(self.np_random.integers(MAX_HOPS))
        self.world = generate_world(self.np_random, hops)
        self.found, self.fetched, self.calls, self.final = [], [], 0, None
        self._obs = f"Question: {self.world.question}"
        return {"hops": hops}

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        world = self._world()
        if self.final is not None:
            return "not run: you have answered already"
        self.calls += 1
        if name == "answer":
            self.final = str(arguments["value"])
            return "answer received"
        if name == "find":
            rid = world.find(str(arguments["name"]))
            if rid is None:
                return f"no record named {json.dumps(arguments['name'])}"
            self.found.append(rid)
            return json.dumps({"id": rid})
        if name == "get":
            rid = str(arguments["id"]).strip()
            if rid not in world.records:
                return f"no record with id {json.dumps(rid)}"
            if rid not in self.fetched:
                self.fetched.append(rid)
            return record_text(world.records[rid])
        raise LookupError(f"LookupEnv declares no tool {name!r}")  # check_call keeps undeclared names out

    def _after_calls(self, results: list[ToolResult]) -> StepOutcome[ToolAction]:
        if self.final is not None:
            return self._finish(self.final)
        effective = any(not r.error for r in results)
        return StepOutcome(render_results(results), 0.0, False, effective=effective, success=False)

    def _no_call(self, text: str) -> StepOutcome[ToolAction]:
        self._world()
        tagged = parse_answer(text)
        self.final = tagged if tagged is not None else text.strip()
        return self._finish(self.final)

    def _render(self) -> str:
        return self._obs

    def _get_state(self) -> dict[str, Any]:
        return {
            "world": None if self.world is None else self.world.to_dict(),
            "found": list(self.found),
            "fetched": list(self.fetched),
            "calls": self.calls,
            "final": self.final,
            "obs": self._obs,
        }

    def _set_state(self, data: dict[str, Any]) -> None:
        world = None if data["world"] is None else World.from_dict(data["world"])
        if world is not None and self.level and world.hops != self.level:
            raise ValueError(f"snapshot is of a {world.hops}-link question, this env has difficulty {self.level}")
        self.world = world
        self.found = [str(i) for i in data["found"]]
        self.fetched = [str(i) for i in data["fetched"]]
        self.calls = int(data["calls"])
        self.final = None if data["final"] is None else str(data["final"])
        self._obs = str(data["obs"])

    # ------------------------------------------------------------ public API
    def tool_examples(self) -> list[ToolCall]:
        """One valid call of each tool in the current episode (none before ``reset``)."""
        if self.world is None:
            return []
        return [
            ToolCall("example-find", "find", {"name": self.world.name}),
            ToolCall("example-get", "get", {"id": self.world.chain()[0]}),
            ToolCall("example-answer", "answer", {"value": 0}),
        ]

    def difficulty(self) -> int:
        """The episode's difficulty: links from the person named to the number asked for (1 to 3)."""
        return self._world().hops

    # --------------------------------------------------------------- helpers
    def _world(self) -> World:
        if self.world is None:
            raise RuntimeError("LookupEnv has no episode: call reset() first")
        return self.world

    def _finish(self, given: str) -> StepOutcome[ToolAction]:
        correct = _normal(given) == _normal(self._world().answer())
        verdict = "right" if correct else "wrong"
        return StepOutcome(
            f"Your answer {json.dumps(given)} is {verdict}.",
            1.0 if correct else 0.0,
            True,
            effective=True,
            success=correct,
            info={"answer": given},
        )
