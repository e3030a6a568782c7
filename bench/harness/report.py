"""Build ``bench/REPORT.md`` and its PNG plots from ``bench/results`` (written by bench/run_all.py).

Sections: one per step of :data:`bench.run_all.STEPS`, each with the command that produced it,
when, how long it ran and its exit status, then its table (the bench's own output, or a table
rebuilt from its JSON). Plots (matplotlib, ``bench/plots/``): step-latency distributions under
load, the chaos timeline, control-plane memory over time and learning curves from the newest
``runs/*/metrics.jsonl`` when one exists. Sections written by hand below the report's marker line
are kept as they are (:mod:`bench.harness.report_keep`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.harness.report_keep import hand_written, join
from bench.security.security_report import security_section

ROOT = Path(__file__).resolve().parents[2]


def machine() -> dict[str, Any]:
    """What the benchmarks ran on."""
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        docker = subprocess.run(["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True,
                                text=True, timeout=20).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        docker = "unavailable"
    return {
        "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_gib, 1),
        "kernel": platform.release(), "python": platform.python_version(), "docker": docker or "unavailable",
        "load_avg": [round(x, 2) for x in os.getloadavg()], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }  # fmt: skip


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _log(results: Path, name: str) -> str:
    try:
        return (results / f"{name}.log").read_text(errors="replace")
    except OSError:
        return ""


def _tail_block(text: str, lines: int = 40) -> str:
    body = "\n".join(text.rstrip().splitlines()[-lines:])
    return f"```\n{body}\n```" if body else "_no output_"


# ------------------------------------------------------------------ plots
def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_latency(load: dict[str, Any], out: Path) -> Path | None:
    levels = [lv for lv in load.get("levels", []) if lv.get("latency_sample_ms")]
    if not levels:
        return None
    import numpy as np

    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for lv in levels:
        xs = np.sort(np.array(lv["latency_sample_ms"]))
        ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=f"{lv['sessions']} sessions")
    ax.set_xscale("log")
    ax.set_xlabel("step latency through the API (ms, log scale)")
    ax.set_ylabel("fraction of steps (CDF)")
    ax.set_title("Step latency under load")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_memory(load: dict[str, Any], out: Path) -> Path | None:
    tl = [(t, r) for t, r in load.get("rss_timeline", []) if r > 0]
    if not tl:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot([t for t, _ in tl], [r for _, r in tl])
    ax.set_xlabel("time since the server started (s)")
    ax.set_ylabel("control-plane RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title("Control-plane memory during the load levels")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def plot_chaos(chaos: dict[str, Any], out: Path) -> Path | None:
    tl = chaos.get("ready_timeline") or []
    if not tl:
        return None
    plt = _plt()
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 5), gridspec_kw={"height_ratios": [2, 1]})
    ax.step([t for t, _ in tl], [n for _, n in tl], where="post", color="black", label="ready sandboxes")
    colors = {"kill": "tab:red", "server": "tab:orange", "pause": "tab:purple"}
    for kind, color in colors.items():
        fs = [f for f in chaos.get("faults", []) if f["kind"] == kind and "error" not in f]
        for i, f in enumerate(fs):
            ax.axvline(f["at"], color=color, alpha=0.6, label=f"fault: {kind}" if i == 0 else None)
            if f.get("recovered_at") is not None:
                ax.plot([f["at"], f["recovered_at"]], [0.3, 0.3], color=color, lw=3)
    ax.set_ylabel("sandboxes ready")
    ax.set_xlabel("time since the rollout started (s); bars: fault -> replacement healthy")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Chaos timeline")
    rec = [f["recovered_s"] for f in chaos.get("faults", []) if f.get("recovered_s") is not None]
    if rec:
        ax2.hist(rec, bins=20, color="tab:blue")
        ax2.axvline(3.0, color="red", ls="--", label="goal P95 3 s")
        ax2.legend(fontsize=8)
    ax2.set_xlabel("fault -> replacement healthy (s)")
    ax2.set_ylabel("faults")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def latest_metrics() -> Path | None:
    """The newest ``runs/*/metrics.jsonl`` (None when there is none)."""
    found = sorted((ROOT / "runs").glob("*/metrics.jsonl"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def plot_learning(path: Path, out: Path) -> Path | None:
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    keys = [k for k in (rows[-1] if rows else {}) if re.fullmatch(r"(env|eval)/[^/]+/(success|reward)", k)]
    keys += [k for k in ("rollout/reward_mean",) if rows and k in rows[-1]]
    if not rows or not keys:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in keys:
        pts = [(r.get("step", i), r[k]) for i, r in enumerate(rows) if isinstance(r.get(k), (int, float))]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=k)
    ax.set_xlabel("training step")
    ax.set_title(f"Learning curves: {path.relative_to(ROOT)} ({len(rows)} rows)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


# ---------------------------------------------------------------- sections
def _chaos_section(results: Path) -> str:
    from bench.sandboxes.chaos import ChaosResult, render

    data = _json(results / "chaos.json")
    if not data:
        return _tail_block(_log(results, "chaos"))
    fields = {k: v for k, v in data.items() if k in ChaosResult.__dataclass_fields__}
    return render(ChaosResult(**fields))


def _restart_section(results: Path) -> str:
    from bench.dataplane.cp_restart import RestartResult, render

    data = _json(results / "restart.json")
    if not data:
        return _tail_block(_log(results, "restart"))
    return render(RestartResult(**{k: v for k, v in data.items() if k in RestartResult.__dataclass_fields__}))


def _load_section(results: Path) -> str:
    from bench.dataplane.load import Level, render

    data = _json(results / "load.json")
    if not data:
        return _tail_block(_log(results, "load"))
    levels = [Level(**{k: v for k, v in lv.items() if k in Level.__dataclass_fields__}) for lv in data["levels"]]
    return f"backend: {data.get('backend', '?')}\n\n" + render(levels, [tuple(x) for x in data["rss_timeline"]])


def _verdict(log: str) -> str:
    """pytest's last summary line (``1 passed in 19.2s``), or ``?``."""
    found = re.findall(r"^=*\s*(\d+ (?:passed|failed|error)[^=\n]*?)\s*=*$", log, flags=re.M)
    return found[-1] if found else "?"


def _fuzz_section(results: Path) -> str:
    log = _log(results, "fuzz")
    m = re.search(r"(\d+) cases over (\d+) operations; answers by status: (.*)", log)
    verdict = _verdict(log)
    if not m:
        return _tail_block(log)
    statuses = m.group(3).strip()
    fives = sum(int(n) for code, n in re.findall(r"\((\d+), (\d+)\)", statuses) if int(code) >= 500)
    return (
        f"| cases | operations | 5xx answers | pytest |\n| ---: | ---: | ---: | --- |\n"
        f"| {m.group(1)} | {m.group(2)} | {fives} | {verdict} |\n\n"
        f"answers by status: `{statuses}`"
    )


def _escapes_section(results: Path) -> str:
    log = _log(results, "escapes")
    rows = re.findall(r"^(tests/\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)", log, flags=re.M)
    if not rows:
        return _tail_block(log)
    lines = ["| test | result |", "| --- | --- |"] + [f"| `{t.split('/', 1)[1]}` | {r} |" for t, r in rows]
    return "\n".join(lines) + f"\n\n{_verdict(log)}"


def headline(results: Path) -> list[tuple[str, str]]:
    """The few figures the README quotes, from whichever results exist."""
    rows: list[tuple[str, str]] = []
    chaos = _json(results / "chaos.json")
    if chaos:
        from bench.sandboxes.chaos import ChaosResult

        c = ChaosResult(**{k: v for k, v in chaos.items() if k in ChaosResult.__dataclass_fields__})
        applied = sum("error" not in f for f in c.faults)
        rows.append((
            f"chaos: {c.groups_requested * c.config['group_size']} episodes, {applied} sandbox faults",
            f"{c.groups_completed}/{c.groups_requested} groups, {c.episodes_masked} masked, {c.infra_retries} retries, "
            f"recovery P50/P95 {c.recovery(50):.2f}/{c.recovery(95):.2f} s, {c.containers_leaked} containers leaked",
        ))  # fmt: skip
    restart = _json(results / "restart.json")
    if restart:
        checks = restart.get("checks", {})
        rows.append((
            "control plane SIGKILL mid-rollout",
            f"{restart['groups_completed']}/{restart['groups_requested']} groups, back in {restart['downtime_s']:.1f} s, "
            f"{sum(checks.values())}/{len(checks)} state checks pass",
        ))  # fmt: skip
    m = re.search(r"(\d+) cases over (\d+) operations; answers by status: (.*)", _log(results, "fuzz"))
    if m:
        fives = sum(int(n) for code, n in re.findall(r"\((\d+), (\d+)\)", m.group(3)) if int(code) >= 500)
        rows.append(("API fuzzing (schemathesis, with auth)", f"{m.group(1)} cases, {fives} server errors"))
    esc = re.findall(r"^tests/\S+::\S+ (PASSED|FAILED|SKIPPED|ERROR)", _log(results, "escapes"), flags=re.M)
    if esc:
        rows.append(("escapes, body limits, input fuzzing", f"{esc.count('PASSED')}/{len(esc)} tests pass"))
    load = _json(results / "load.json")
    for lv in (load or {}).get("levels", []):
        rows.append((
            f"load: {lv['sessions']} sessions through the API",
            f"{lv['steps_per_s']:,.0f} steps/s, P50 {lv['p50_ms']:.0f} ms, P99 {lv['p99_ms']:.0f} ms, {lv['errors']} errors",
        ))  # fmt: skip
    return rows


SECTIONS = {
    "chaos": _chaos_section,
    "restart": _restart_section,
    "load": _load_section,
    "fuzz": _fuzz_section,
    "escapes": _escapes_section,
    "security": security_section,
}
TITLES = {
    "envs": "Envs", "sandbox": "Sandboxes", "api": "API", "rollout": "Rollout", "chaos": "Chaos",
    "restart": "Control-plane restart under load", "fuzz": "Fuzzing", "escapes": "Escapes and limits", "load": "Load",
    "security": "Security: two owners on one server",
}  # fmt: skip


def write_report(results: Path, bench_dir: Path) -> Path:
    """Write ``bench_dir/REPORT.md`` (and ``bench_dir/plots/*.png``); returns its path."""
    runs = _json(results / "runs.json") or {}
    plots = bench_dir / "plots"
    plots.mkdir(exist_ok=True)
    m = runs.get("machine") or machine()
    out = [
        "# rockroll: reliability and performance report",
        "",
        "Written by `make bench` (`.venv/bin/python bench/run_all.py`); every section names the command "
        "that produced it. Raw output: `bench/results/`.",
        "",
        f"**Machine:** {m.get('host')}, {m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, "
        f"Linux {m.get('kernel')}, Python {m.get('python')}, Docker {m.get('docker')}; load average at the start "
        f"{m.get('load_avg')} ({m.get('date')}).",
        "",
    ]
    top = headline(results)
    if top:
        out += ["## Headline", "", "| what | measured |", "| --- | --- |"]
        out += [f"| {a} | {b} |" for a, b in top] + [""]
    charts: dict[str, list[tuple[str, Path]]] = {}
    chaos, load = _json(results / "chaos.json"), _json(results / "load.json")
    if chaos and (p := plot_chaos(chaos, plots / "chaos_timeline.png")):
        charts.setdefault("chaos", []).append(("Chaos timeline", p))
    if load and (p := plot_latency(load, plots / "load_latency.png")):
        charts.setdefault("load", []).append(("Step latency distribution under load", p))
    if load and (p := plot_memory(load, plots / "load_memory.png")):
        charts.setdefault("load", []).append(("Control-plane memory over time", p))
    from bench.run_all import STEPS

    for name, (what, *_rest) in STEPS.items():
        rec = runs.get(name)
        out += [f"## {TITLES.get(name, name)}", "", f"_{what}_", ""]
        if not rec:
            out += ["_not run yet_", ""]
            continue
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rec["started"]))
        status = "ok" if rec["rc"] == 0 else f"**exit status {rec['rc']}**"
        quick = " (quick sizes)" if rec.get("quick") else ""
        out += [f"Command: `{rec['command']}`{quick}; {when}, {rec['wall_s']:.0f} s, {status}.", ""]
        section = SECTIONS.get(name)
        out += [section(results) if section else _tail_block(_log(results, name)), ""]
        for title, path in charts.get(name, []):
            out += [f"![{title}](plots/{path.name})", ""]
    metrics = latest_metrics()
    out += ["## Learning curves", ""]
    if metrics and (p := plot_learning(metrics, plots / "learning_curves.png")):
        out += [
            f"From `{metrics.relative_to(ROOT)}` (the newest training run).",
            "",
            f"![Learning curves](plots/{p.name})",
        ]
    else:
        out += ["_no `runs/*/metrics.jsonl` with success or reward metrics yet_"]
    path = bench_dir / "REPORT.md"
    titles = {"Headline", "Learning curves", *(TITLES.get(name, name) for name in STEPS)}
    kept = hand_written(path.read_text(), titles) if path.exists() else ""  # bench/harness/report_keep.py
    path.write_text(join("\n".join(out), kept))
    return path
