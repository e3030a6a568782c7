"""The Lookup game's data: a small generated database and a question that takes several lookups to answer.

A world holds three tables, each record keyed by a short id:

* people ``p1``..``p6``: ``name``, ``age``, ``employer`` (a company id);
* companies ``c1``..``c3``: ``name``, ``staff``, ``city`` (a city id);
* cities ``t1``..``t3``: ``name``, ``population``.

Names are drawn without replacement from small pools (so a name names one record), numbers from 10 to 99.
The question names one person and asks for a number ``hops`` links away: ``1`` the person's age, ``2`` the
staff of the person's employer, ``3`` the population of the employer's city. Answering it takes
``find(name)`` and then one ``get(id)`` per hop: ``hops + 1`` lookups. Everything here is pure and depends
only on the generator it is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["World", "generate_world", "QUESTIONS", "MAX_HOPS", "record_text"]

PEOPLE = ("Ann", "Bob", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ida", "Jon", "Kim", "Lou")
COMPANIES = ("Acme", "Bolt", "Crux", "Dyna", "Echo", "Flux")
CITIES = ("Oslo", "Rome", "Lima", "Kyiv", "Riga", "Bern")
N_PEOPLE, N_COMPANIES, N_CITIES = 6, 3, 3
MAX_HOPS = 3
#: hops -> the question's template (``{name}``: the person asked about, quoted: so that the name is the same
#: token in the question as in a ``find`` call's JSON string, which the tiny model copies)
QUESTIONS = {
    1: 'What is the age of "{name}"?',
    2: 'How many staff work at the employer of "{name}"?',
    3: 'What is the population of the city where the employer of "{name}" is based?',
}
#: hops -> the field each hop follows, then the field that is the answer
_PATH = {1: ("age",), 2: ("employer", "staff"), 3: ("employer", "city", "population")}


@dataclass(frozen=True)
class World:
    """One episode's database and question (see the module docstring)."""

    records: dict[str, dict[str, Any]]
    name: str
    hops: int

    @property
    def question(self) -> str:
        return QUESTIONS[self.hops].format(name=self.name)

    def find(self, name: str) -> str | None:
        """The id of the record named ``name`` (case and surrounding space ignored), or None."""
        wanted = name.strip().lower()
        return next((rid for rid, rec in self.records.items() if str(rec["name"]).lower() == wanted), None)

    def chain(self) -> list[str]:
        """The ids the question's lookups fetch, in order (the person first)."""
        rid = self.find(self.name)
        if rid is None:
            raise ValueError(f"the question names {self.name!r}, which no record has")
        ids = [rid]
        for link in _PATH[self.hops][:-1]:
            ids.append(str(self.records[ids[-1]][link]))
        return ids

    def answer(self) -> str:
        """The question's answer, as text."""
        return str(self.records[self.chain()[-1]][_PATH[self.hops][-1]])

    def to_dict(self) -> dict[str, Any]:
        return {"records": {k: dict(v) for k, v in self.records.items()}, "name": self.name, "hops": self.hops}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> World:
        hops = int(data["hops"])
        if hops not in QUESTIONS:
            raise ValueError(f"hops must be 1 to {MAX_HOPS}, got {hops}")
        records = {str(k): dict(v) for k, v in data["records"].items()}
        return cls(records, str(data["name"]), hops)


def _pick(rng: np.random.Generator, pool: tuple[str, ...], n: int) -> list[str]:
    return [pool[int(i)] for i in rng.choice(len(pool), size=n, replace=False)]


def _number(rng: np.random.Generator) -> int:
    return int(rng.integers(10, 100))


def generate_world(rng: np.random.Generator, hops: int) -> World:
    """A random world whose question takes ``hops`` links (1 to :data:`MAX_HOPS`)."""
    if hops not in QUESTIONS:
        raise ValueError(f"hops must be 1 to {MAX_HOPS}, got {hops}")
    records: dict[str, dict[str, Any]] = {}
    cities = [f"t{i + 1}" for i in range(N_CITIES)]
    companies = [f"c{i + 1}" for i in range(N_COMPANIES)]
    for rid, name in zip(cities, _pick(rng, CITIES, N_CITIES), strict=True):
        records[rid] = {"id": rid, "name": name, "population": _number(rng)}
    for rid, name in zip(companies, _pick(rng, COMPANIES, N_COMPANIES), strict=True):
        records[rid] = {"id": rid, "name": name, "staff": _number(rng), "city": cities[int(rng.integers(N_CITIES))]}
    for i, name in enumerate(_pick(rng, PEOPLE, N_PEOPLE)):
        rid = f"p{i + 1}"
        records[rid] = {
            "id": rid,
            "name": name,
            "age": _number(rng),
            "employer": companies[int(rng.integers(N_COMPANIES))],
        }
    asked = str(records[f"p{int(rng.integers(N_PEOPLE)) + 1}"]["name"])
    return World(records, asked, hops)


def record_text(record: dict[str, Any]) -> str:
    """A record as a ``get`` result: one line of JSON, fields in their stored order."""
    return json.dumps(record, separators=(", ", ": "))
