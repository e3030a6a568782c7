r"""Procedural single-turn tasks: ``arithmetic`` (tag ``math``), ``countdown`` and ``python_functions`` (tag ``code``).

Each generator is ``fn(n, *, seed, split, heldout_frac, split_seed, **options) -> list[Sample]``: ``n``
samples of the asked-for split (``arithmetic`` takes options of its difficulty: ``min_operand``,
``max_operand``, ``min_terms``, ``max_terms``, ``ops``). Candidates come from ``random.Random(seed)``; each goes to the split that
:func:`~rockroll.agentrl.rewards.samples.split_of` gives its prompt (with ``split_seed``), and only
those of the asked-for split are kept, so the ``train`` and ``heldout`` sets are disjoint whatever
seeds draw them, and a seed always gives the same samples. Duplicated prompts are dropped.

The tags match the built-in rewards: ``math`` (``metadata["answer"]``), ``countdown``
(``numbers``, ``target``), ``code`` (``tests``; a ``reference`` solution is kept in the metadata).
:data:`GENERATORS` is their registry; :func:`generate` looks one up by name.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from rockroll.agentrl.rewards.samples import Sample, Split, split_of
from rockroll.envs.registries import Registry

__all__ = ["GENERATORS", "generate", "arithmetic", "countdown", "python_functions"]

Draw = Callable[[random.Random], Sample]


def _collect(draw: Draw, n: int, seed: int, split: Split, heldout_frac: float, split_seed: int) -> list[Sample]:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if split == "heldout" and heldout_frac <= 0 or split == "train" and heldout_frac >= 1:
        raise ValueError(f"split {split!r} is empty with heldout_frac={heldout_frac}")
    rng, seen, out = random.Random(seed), set(), []
    for _ in range(max(1000, 200 * n)):
        if len(out) == n:
            return out
        s = draw(rng)
        if s.prompt in seen or split_of(s.prompt, heldout_frac, split_seed) != split:
            continue
        seen.add(s.prompt)
        out.append(s)
    raise ValueError(f"only {len(out)} distinct {split} samples of {n} asked; the generator's space is too small")


def _expression(rng: random.Random, numbers: list[int], ops: str) -> str:
    """A random bracketed expression over ``numbers`` (in order), e.g. ``(3 + 4) * 5``."""
    terms = [str(x) for x in numbers]
    while len(terms) > 1:
        i = rng.randrange(len(terms) - 1)
        op = rng.choice(ops)
        joined = f"{terms[i]} {op} {terms[i + 1]}"
        terms[i : i + 2] = [f"({joined})" if len(terms) > 2 else joined]
    return terms[0]


def _eval_int(expr: str) -> float:
    return eval(expr, {"__builtins__": {}}, {})  # noqa: S307 - our own expression of digits and + - * /


def _arithmetic_draw(min_operand: int, max_operand: int, min_terms: int, max_terms: int, ops: str) -> Draw:
    def draw(rng: random.Random) -> Sample:
        numbers = [rng.randint(min_operand, max_operand) for _ in range(rng.randint(min_terms, max_terms))]
        expr = _expression(rng, numbers, ops)
        prompt = f"Compute {expr}. Put the final answer in \\boxed{{}}."
        return Sample(prompt, "math", {"answer": str(int(_eval_int(expr)))})

    return draw


def _check_arithmetic(min_operand: int, max_operand: int, min_terms: int, max_terms: int, ops: str) -> None:
    if not 0 <= min_operand <= max_operand:
        raise ValueError(f"arithmetic needs 0 <= min_operand <= max_operand, got {min_operand} and {max_operand}")
    if not 2 <= min_terms <= max_terms:
        raise ValueError(f"arithmetic needs 2 <= min_terms <= max_terms, got {min_terms} and {max_terms}")
    if not ops or set(ops) - set("+-*"):
        raise ValueError(f"arithmetic ops must be a non-empty string of + - *, got {ops!r}")


def _countdown(rng: random.Random) -> Sample:
    while True:
        numbers = [rng.randint(1, 50) for _ in range(rng.randint(3, 4))]
        order = rng.sample(numbers, len(numbers))
        expr = _expression(rng, order, "+-*/")
        try:
            value = _eval_int(expr)
        except ZeroDivisionError:
            continue
        if value == int(value) and 1 <= value <= 1000:
            break
    target = int(value)
    prompt = (
        f"Using the numbers {numbers}, each exactly once, and + - * / with parentheses, make {target}. "
        "Give the equation in <answer></answer>, e.g. <answer>(1 + 2) * 3</answer>."
    )
    return Sample(prompt, "countdown", {"numbers": numbers, "target": target, "solution": expr})


#: (name, signature, description with {a} {b}, reference body, test inputs) of the small functions
_FUNCTIONS: list[tuple[str, str, str, str, Callable[[random.Random], list[Any]]]] = [
    ("affine", "x", "returns x * {a} + {b}", "return x * {a} + {b}", lambda r: [r.randint(-50, 50) for _ in range(4)]),
    ("count_multiples", "xs", "returns how many items of the list xs are multiples of {a}",
     "return sum(1 for v in xs if v % {a} == 0)", lambda r: [[r.randint(0, 60) for _ in range(r.randint(0, 8))]
                                                               for _ in range(4)]),
    ("shift_letters", "s", "shifts each lowercase letter of s by {a} places in the alphabet (wrapping), "
     "leaving other characters unchanged",
     "return ''.join(chr((ord(c) - 97 + {a}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)",
     lambda r: ["".join(r.choice("abcxyz -!") for _ in range(r.randint(0, 10))) for _ in range(4)]),
    ("sum_digits_plus", "n", "returns the sum of the decimal digits of the non-negative integer n, plus {b}",
     "return sum(int(d) for d in str(n)) + {b}", lambda r: [r.randint(0, 10**6) for _ in range(4)]),
    ("clip", "x", "returns x clipped to the range [{b}, {b} + {a}]", "return min(max(x, {b}), {b} + {a})",
     lambda r: [r.randint(-100, 100) for _ in range(4)]),
    ("every_kth", "xs", "returns every {a}-th item of the list xs, starting with the first", "return xs[::{a}]",
     lambda r: [[r.randint(0, 9) for _ in range(r.randint(0, 12))] for _ in range(4)]),
]  # fmt: skip


def _python_function(rng: random.Random) -> Sample:
    name, arg, describe, body, inputs = rng.choice(_FUNCTIONS)
    a, b = rng.randint(2, 9), rng.randint(-20, 20)
    reference = f"def {name}({arg}):\n    {body.format(a=a, b=b)}\n"
    scope: dict[str, Any] = {}
    exec(reference, scope)  # noqa: S102 - our own reference solution, to compute the expected outputs
    tests = [f"assert {name}({x!r}) == {scope[name](x)!r}" for x in inputs(rng)]
    prompt = (
        f"Write a Python function `{name}({arg})` that {describe.format(a=a, b=b)}. "
        "Answer with the code in one ```python block."
    )
    meta = {"tests": tests, "reference": reference, "task_id": f"{name}-{a}-{b}"}
    return Sample(prompt, "code", meta)


def arithmetic(
    n: int,
    *,
    seed: int = 0,
    split: Split = "train",
    heldout_frac: float = 0.1,
    split_seed: int = 0,
    min_operand: int = 1,
    max_operand: int = 99,
    min_terms: int = 2,
    max_terms: int = 4,
    ops: str = "+-*",
) -> list[Sample]:
    """Integer expressions of ``min_terms``-``max_terms`` numbers in ``[min_operand, max_operand]`` joined by
    ``ops`` (brackets where there are more than two); the answer goes in ``\\boxed{}``. The defaults (2-4
    numbers of 1-99, ``+ - *``) are hard; ``max_operand: 9, max_terms: 2, ops: "+"`` suits a tiny model."""
    _check_arithmetic(min_operand, max_operand, min_terms, max_terms, ops)
    draw = _arithmetic_draw(min_operand, max_operand, min_terms, max_terms, ops)
    return _collect(draw, n, seed, split, heldout_frac, split_seed)


def countdown(
    n: int, *, seed: int = 0, split: Split = "train", heldout_frac: float = 0.1, split_seed: int = 0
) -> list[Sample]:
    """Countdown: reach the target with 3-4 numbers, each once; always solvable."""
    return _collect(_countdown, n, seed, split, heldout_frac, split_seed)


def python_functions(
    n: int, *, seed: int = 0, split: Split = "train", heldout_frac: float = 0.1, split_seed: int = 0
) -> list[Sample]:
    """Small Python functions with four ``assert`` tests each (from a reference solution)."""
    return _collect(_python_function, n, seed, split, heldout_frac, split_seed)


GENERATORS: Registry[Callable[..., list[Sample]]] = Registry(
    "sample generator",
    "generator",
    entries={"arithmetic": arithmetic, "countdown": countdown, "python_functions": python_functions},
)


def generate(name: str, n: int, **kwargs: Any) -> list[Sample]:
    """``n`` samples of the generator ``name`` (see :data:`GENERATORS`); kwargs as the generators take."""
    return GENERATORS.get(name)(n, **kwargs)
