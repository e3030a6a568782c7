"""``rockroll eval`` on a tool env reports the calls next to success: rates per env and overall, the columns in
the markdown, each episode's sums."""

from __future__ import annotations

from pathlib import Path

from bench.tools.expert_engine import ExpertToolEngine
from rockroll.agentrl.eval.run import run_eval
from rockroll.agentrl.models.char_tokenizer import CharTokenizer


def _config(out: Path, seeds: list[int]) -> dict:
    return {
        "name": "tools",
        "source": {"kind": "local"},
        "envs": [{"env": "Lookup-v0", "seeds": seeds}],
        "episode": {"max_turns": 6, "max_tokens_per_turn": 200},
        "concurrency": 4,
        "output_dir": str(out),
    }


def test_eval_reports_tool_call_rates(tmp_path: Path) -> None:
    seeds = [3, 4, 5, 6]
    ids = {f"Lookup-v0/{i}": s for i, s in enumerate(seeds)}  # the episode ids rockroll eval gives
    bad = {0: '<tool_call>\n{"name": "lookup", "arguments": {}}\n</tool_call>'}  # every episode's first turn
    engine = ExpertToolEngine(CharTokenizer(), ids, bad_turns=bad)
    report = run_eval(_config(tmp_path / "out", seeds), engine=engine, progress=False)
    row = report.per_env["Lookup-v0"]
    assert row["success"] == 1.0 and row["parseable_call_rate"] == 1.0 and row["turns_with_call"] == 1.0
    turns = row["mean_turns"] * row["episodes"]
    assert abs(row["unknown_tool_rate"] - 4 / turns) < 1e-9 and row["bad_arguments_rate"] == 0.0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "parseable_call_rate" in md and "unknown_tool_rate" in md
    for episode in report.episodes:
        assert episode["unknown_tools"] == 1 and episode["tool_calls"] == episode["turns"]
    assert report.metrics()["eval/Lookup-v0/calls_per_turn"] == 1.0
