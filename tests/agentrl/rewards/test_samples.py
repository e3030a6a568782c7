"""Single-turn datasets: JSONL and Hugging Face folders checked at load time, generators and their held-out split."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockroll.agentrl.rewards import (
    DatasetRowError,
    RewardRouter,
    Sample,
    generate,
    load_hf_disk,
    load_jsonl,
    split_samples,
)
from rockroll.agentrl.rewards.code import CodeConfig, CodeReward
from rockroll.envs.registries import UnknownNameError

ROUTES = {"math": {"reward": "math"}, "code": {"reward": "code"}, "countdown": {"reward": "countdown"}}


@pytest.fixture(scope="module")
def router() -> Iterator[RewardRouter]:
    r = RewardRouter({"routes": ROUTES})
    yield r
    r.close()


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_jsonl_rows_become_samples(tmp_path: Path, router: RewardRouter) -> None:
    rows = [
        {"prompt": "1+1?", "tag": "math", "answer": "2", "id": "a"},
        {"prompt": "add", "tag": "code", "metadata": {"tests": ["assert add(1, 1) == 2"]}, "source": "mbpp"},
    ]
    samples = load_jsonl(write_jsonl(tmp_path / "d.jsonl", rows), requires=router.required_fields)
    assert samples[0] == Sample("1+1?", "math", {"answer": "2"}, "a")
    assert samples[1].metadata == {"tests": ["assert add(1, 1) == 2"], "source": "mbpp"} and len(samples[1].id) == 16


@pytest.mark.parametrize(
    ("row", "message", "missing"),
    [
        ({"prompt": "1+1?", "tag": "math"}, "tag 'math' needs answer", ("answer",)),
        ({"prompt": "f", "tag": "code", "answer": "x"}, "needs tests", ("tests",)),
        ({"prompt": "", "tag": "math", "answer": "1"}, "no 'prompt' text", ("prompt",)),
        ({"prompt": "q", "answer": "1"}, "no 'tag'", ("tag",)),
        ({"prompt": "q", "tag": "gsm", "answer": "1"}, "unknown reward tag 'gsm'", ()),
    ],
)
def test_a_row_missing_what_its_reward_needs_fails_at_load(
    tmp_path: Path, router: RewardRouter, row: dict, message: str, missing: tuple[str, ...]
) -> None:
    good = {"prompt": "2+2?", "tag": "math", "answer": "4"}
    path = write_jsonl(tmp_path / "d.jsonl", [good, good, row])
    with pytest.raises(DatasetRowError) as e:
        load_jsonl(path, requires=router.required_fields)
    assert e.value.row == 2 and e.value.missing == missing and isinstance(e.value, ValueError)
    assert f"{path}: row 2: " in str(e.value) and message in str(e.value)


def test_bad_json_and_a_default_tag(tmp_path: Path, router: RewardRouter) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "q", "answer": "1"}\n{oops\n')
    with pytest.raises(DatasetRowError, match="row 1: not JSON"):
        load_jsonl(path, tag="math", requires=router.required_fields)
    path.write_text('{"prompt": "q", "answer": "1"}\n')
    assert load_jsonl(path, tag="math", requires=router.required_fields)[0].tag == "math"
    with pytest.raises(FileNotFoundError):
        load_jsonl(tmp_path / "none.jsonl")


def test_a_hugging_face_folder(tmp_path: Path, router: RewardRouter) -> None:
    datasets = pytest.importorskip("datasets")
    rows = {"question": ["1+1?", "2+3?"], "answer": ["2", "5"]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "hf"))
    samples = load_hf_disk(tmp_path / "hf", tag="math", prompt_field="question", requires=router.required_fields)
    assert [(s.prompt, s.metadata["answer"]) for s in samples] == [("1+1?", "2"), ("2+3?", "5")]
    with pytest.raises(DatasetRowError, match="no split 'test'"):
        load_hf_disk(tmp_path / "hf", split="test", tag="math", prompt_field="question")
    datasets.Dataset.from_dict({"question": ["3+3?"]}).save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(DatasetRowError, match="row 0: tag 'math' needs answer"):
        load_hf_disk(tmp_path / "bad", tag="math", prompt_field="question", requires=router.required_fields)


@pytest.mark.parametrize("name", ["arithmetic", "countdown", "python_functions"])
def test_generators_are_seeded_and_their_splits_disjoint(name: str, router: RewardRouter) -> None:
    train = generate(name, 200, seed=1)
    assert train == generate(name, 200, seed=1) and train != generate(name, 200, seed=2)
    heldout = generate(name, 30, seed=1, split="heldout") + generate(name, 30, seed=7, split="heldout")
    train_prompts = {s.prompt for s in train + generate(name, 200, seed=5)}
    assert not train_prompts & {s.prompt for s in heldout}
    assert len({s.prompt for s in train}) == 200
    router.check(train)  # every tag is routed
    for s in train[:5]:
        assert all(s.metadata.get(f) is not None for f in router.required_fields(s.tag))
    tr, ho = split_samples(train + heldout)
    assert {s.prompt for s in ho} == {s.prompt for s in heldout} and len(tr) == 200


def test_generated_tasks_are_solvable(router: RewardRouter) -> None:
    math = generate("arithmetic", 20, seed=3)
    assert all(router.rewards["math"]("", f"\\boxed{{{s.metadata['answer']}}}", s.metadata).score == 1 for s in math)
    cd = generate("countdown", 20, seed=3)
    assert all(
        router.rewards["countdown"]("", f"<answer>{s.metadata['solution']}</answer>", s.metadata).score == 1 for s in cd
    )
    code = generate("python_functions", 6, seed=3)
    reward = CodeReward(CodeConfig(sandboxes=1))
    try:
        assert [reward("", s.metadata["reference"], s.metadata).score for s in code] == [1.0] * 6
    finally:
        reward.close()


def test_an_unknown_generator_is_named() -> None:
    with pytest.raises(UnknownNameError, match="arithmetic"):
        generate("arith", 3)
