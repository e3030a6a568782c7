"""``bench/harness/report.py`` builds REPORT.md and its plots from results (synthetic ones here)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.harness.report import write_report
from bench.sandboxes.chaos import ChaosConfig, ChaosResult


def test_report_from_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    chaos = ChaosResult(config=ChaosConfig().__dict__, groups_requested=32, groups_completed=32, episodes_delivered=256)
    chaos.faults = [{"at": 1.0, "kind": "kill", "sandbox": "sb-1", "recovered_s": 0.8, "recovered_at": 1.8},
                    {"at": 2.0, "kind": "pause", "sandbox": "sb-2", "error": "APIError: cannot freeze"}]  # fmt: skip
    chaos.ready_timeline = [(0.0, 16), (1.1, 15), (1.9, 16)]
    (results / "chaos.json").write_text(json.dumps(chaos.__dict__))
    level = {"sessions": 64, "seconds": 60.0, "steps": 6000, "errors": 0, "p50_ms": 5.0, "p99_ms": 40.0,
             "rss_start_mb": 100.0, "rss_end_mb": 101.0, "error_kinds": {}, "latency_sample_ms": [1.0, 5.0, 9.0],
             "steps_per_s": 100.0}  # fmt: skip
    (results / "load.json").write_text(json.dumps({"levels": [level], "rss_timeline": [[0, 100], [1, 101]]}))
    (results / "fuzz.log").write_text("1234 cases over 31 operations; answers by status: [(200, 1000), (404, 234)]\n")
    runs = {"chaos": {"name": "chaos", "what": "x", "command": "python bench/sandboxes/chaos.py", "rc": 0, "started": 0.0,
                      "wall_s": 20.0, "quick": False}}  # fmt: skip
    (results / "runs.json").write_text(json.dumps(runs))

    path = write_report(results, tmp_path)
    text = path.read_text()
    assert "| chaos: 256 episodes, 1 sandbox faults | 32/32 groups" in text
    assert "1234 cases, 0 server errors" in text
    assert "Command: `python bench/sandboxes/chaos.py`" in text and "_not run yet_" in text
    assert "pause: APIError: cannot freeze" in text
    for png in ("chaos_timeline.png", "load_latency.png", "load_memory.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 1000


def test_a_rewrite_keeps_the_hand_written_sections(tmp_path: Path) -> None:
    from bench.harness.report_keep import MARKER

    results = tmp_path / "results"
    results.mkdir()
    (results / "runs.json").write_text("{}")
    hand = f"{MARKER}\n\n## Data plane (by hand)\n\nA table | measured by hand\n\n### Second pass\n\ntext\n"
    (tmp_path / "REPORT.md").write_text("# old generated part\n\n## Envs\n\nstale\n\n" + hand)
    text = write_report(results, tmp_path).read_text()
    assert text.endswith(hand) and text.count(MARKER) == 1
    assert "stale" not in text and "_not run yet_" in text  # the generated part was rewritten
    again = write_report(results, tmp_path).read_text()  # twice: the hand-written part once, unchanged
    assert again.endswith(hand) and again.count(MARKER) == 1


def test_a_report_from_before_the_marker_keeps_the_sections_it_does_not_generate(tmp_path: Path) -> None:
    from bench.harness.report_keep import MARKER

    results = tmp_path / "results"
    results.mkdir()
    (results / "runs.json").write_text("{}")
    old = "# report\n\n## Envs\n\nstale\n\n## Learning curves\n\nx\n\n## Scale (by hand)\n\nkept\n"
    (tmp_path / "REPORT.md").write_text(old)
    text = write_report(results, tmp_path).read_text()
    assert text.endswith(f"{MARKER}\n\n## Scale (by hand)\n\nkept\n") and "stale" not in text
