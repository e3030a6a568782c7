"""Exact reference success rates on slippery FrozenLake maps, split by no-slip shortest-path length.

    .venv/bin/python bench/learning/frozenlake_refs.py [--seeds 1000000:1000500] [--steps 20] [--size 4]
                                              [--p 0.8] [--beam 128] [--no-slip] [--json PATH]

The maps are those ``envhub.make("FrozenLake-v0", size=...)`` draws at ``reset(seed=s)`` for each
seed in ``A:B`` (the default starts at 1_000_000, the trainer's held-out ``eval_seed_offset``).
Every number is exact (dynamic programming over the slip distribution, see
``rockroll.envs.frozenlake.exact``); the best blind plan is a beam search, so a lower bound.
Columns: value-iteration optimum, the re-planning no-slip shortest-path expert, the best blind
sequence found, the no-slip plan played blindly, uniformly random actions.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rockroll.envs.frozenlake.exact import DEFAULT_BEAM, REFERENCE_KEYS, references

COLUMNS = {
    "optimal": "optimum (VI)",
    "expert": "re-plan expert",
    "best_blind": "best blind (beam, ≥)",
    "noslip_blind": "no-slip plan blind",
    "random": "random",
}
#: configs/README.md (facts section), slippery 4x4, default generator, 500 held-out maps (seeds not recorded)
NOTES = {20: (74.2, 48.2, 58.8, 14.1, None), 30: (82.3, 47.4, 60.4, 13.2, 29.5)}


def _seed_range(text: str) -> range:
    try:
        start, stop = (int(x) for x in text.split(":"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected A:B (two ints), got {text!r}") from e
    if not 0 <= start < stop:
        raise argparse.ArgumentTypeError(f"need 0 <= A < B, got {text!r}")
    return range(start, stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--seeds", type=_seed_range, default=range(1_000_000, 1_000_500), help="A:B, maps of seeds A..B-1"
    )
    parser.add_argument("--steps", type=int, default=20, help="step limit (FrozenLake-v0: 20)")
    parser.add_argument("--size", type=int, default=4, help="side of the map")
    parser.add_argument("--p", type=float, default=0.8, help="probability that a tile is frozen")
    parser.add_argument("--beam", type=int, default=DEFAULT_BEAM, help="beam width of the blind-plan search")
    parser.add_argument("--no-slip", action="store_true", help="non-slippery ice (every column but random is 100%%)")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-map results here")
    args = parser.parse_args()

    t0 = time.perf_counter()
    refs = references(args.seeds, size=args.size, p=args.p, steps=args.steps, beam=args.beam, slippery=not args.no_slip)
    elapsed = time.perf_counter() - t0

    slip = "non-slippery" if args.no_slip else "slippery"
    title = (
        f"FrozenLake {args.size}x{args.size} {slip}, p={args.p}, {args.steps} steps, "
        f"seeds {args.seeds.start}:{args.seeds.stop} ({len(args.seeds)} maps), beam {args.beam}"
    )
    table = Table(title=title)
    table.add_column("shortest path", justify="right")
    table.add_column("maps", justify="right")
    for key in REFERENCE_KEYS:
        table.add_column(COLUMNS[key], justify="right")
    for length, row in refs["by_path_len"].items():
        table.add_row(str(length), str(row["maps"]), *(f"{100 * row[k]:.1f}%" for k in REFERENCE_KEYS))
    table.add_section()
    table.add_row("all", str(len(refs["seeds"])), *(f"{100 * refs['mean'][k]:.1f}%" for k in REFERENCE_KEYS))
    if args.size == 4 and args.p == 0.8 and not args.no_slip and args.steps in NOTES:
        notes = NOTES[args.steps]
        table.add_row("configs/README.md", "500", *("" if v is None else f"{v:.1f}%" for v in notes), style="dim")
    console = Console()
    console.print(table)
    console.print(f"computed in {elapsed:.2f} s (exact DP; best blind is a lower bound)")
    if args.json is not None:
        args.json.write_text(json.dumps(refs, indent=1))
        console.print(f"per-map results written to {args.json}")


if __name__ == "__main__":
    main()
