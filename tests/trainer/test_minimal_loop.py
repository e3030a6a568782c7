"""bench/learning/minimal_loop.py: the prompt encoding, the exact evaluation of a known policy against the
reference, shared slips within a group, the merged GRPO loss against one row per turn, and a short run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bench.learning.minimal_loop import main  # noqa: E402
from bench.learning.minimal_loop_core import (  # noqa: E402
    ACTION_IDS,
    VOCAB,
    MapBatch,
    action_logits,
    build_model,
    decode,
    draw_maps,
    encode_prompt,
    exact_success,
    expert_labels,
    grpo_update,
    rollout,
)
from rockroll.envs.frozenlake.exact import map_for_seed, references  # noqa: E402
from rockroll.envs.frozenlake.maps import ACTIONS  # noqa: E402

SEEDS = list(range(1_000_000, 1_000_012))


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def test_prompt_is_the_flag_and_the_grid_the_env_draws() -> None:
    grid = ("SFFH", "FHFF", "FFFF", "HFFG")
    ids = encode_prompt(grid, 1, 2)
    assert decode(ids) == "<bos> <slippery> ___O\n_OP_\n____\nO__G<act> "
    assert len(VOCAB) <= 33 and [VOCAB[i] for i in ACTION_IDS] == list(ACTIONS)
    batch = MapBatch([grid, map_for_seed(SEEDS[0])])
    keys = batch.live_keys()
    got = batch.prompts(keys)
    for key, row in zip(keys, got, strict=True):
        m, s = divmod(int(key), batch.cells)
        assert row.tolist() == encode_prompt(batch.grids[m], *divmod(s, batch.size))


def test_exact_evaluation_of_the_expert_equals_the_reference() -> None:
    grids = [map_for_seed(s) for s in SEEDS]
    batch = MapBatch(grids)
    keys, labels = expert_labels(batch)
    tables: list[dict] = [{} for _ in grids]
    for key in batch.live_keys():  # cells with no path to the goal: Left, as exact.expert_policy does
        m, s = divmod(int(key), batch.cells)
        tables[m][divmod(s, batch.size)] = 0
    for key, a in zip(keys, labels, strict=True):
        m, s = divmod(int(key), batch.cells)
        tables[m][divmod(s, batch.size)] = int(a)
    got = exact_success(tables, batch, (30, 20))
    for k in (30, 20):
        assert got[k] == pytest.approx(np.array(references(SEEDS, steps=k)["expert"]), abs=1e-12)


def test_a_group_shares_its_map_and_its_slips() -> None:
    model = build_model(0)
    batch = MapBatch(draw_maps(np.random.default_rng(0), 6, set()))
    # near-greedy sampling: every member of a group picks the same actions, so with shared slips it
    # walks the same path and gets the same reward
    ro = rollout(model, batch, 4, 30, 1e-4, np.random.default_rng(1))
    assert (ro.reward.reshape(6, 4).std(1) == 0).all()
    assert set(np.unique(ro.reward)) <= {0.0, 1.0}
    assert np.bincount(ro.turn_ep, minlength=24).max() <= 30
    ro = rollout(model, batch, 4, 30, 1.5, np.random.default_rng(1))
    assert ro.prompts <= len(batch.live_keys()) and 0 < ro.entropy <= np.log(4)


def test_merged_loss_has_the_gradient_of_one_row_per_turn() -> None:
    model = build_model(0)
    batch = MapBatch(draw_maps(np.random.default_rng(2), 4, set()))
    ro = rollout(model, batch, 8, 30, 1.5, np.random.default_rng(3))
    ro.reward[:] = np.tile([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], 4)  # variance in every group
    r = ro.reward.reshape(4, 8)
    adv = ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)
    logp = torch.log_softmax(action_logits(model, batch.prompts(ro.turn_key)) / 1.5, -1)
    chosen = logp[torch.arange(len(ro.turn_key)), torch.from_numpy(ro.turn_act)]
    (-(torch.from_numpy(adv[ro.turn_ep]).float() * chosen).mean()).backward()
    norm = float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])))
    scale = min(1.0, 1.0 / (norm + 1e-6))  # grpo_update clips the gradient norm at 1
    want = {n: p.grad.clone() * scale for n, p in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    stats = grpo_update(model, opt, batch, ro, 8, 1.5)
    assert stats["groups_with_variance"] == 1.0 and stats["loss_prompts"] <= ro.prompts
    for n, p in model.named_parameters():
        assert torch.allclose(p.grad, want[n], atol=1e-6, rtol=1e-4), n


def test_a_short_run_writes_the_curve(tmp_path: Path) -> None:
    out = tmp_path / "ml.json"
    main(
        ["--seed", "0", "--updates", "3", "--eval-every", "2", "--eval-maps", "10", "--sft-seconds", "2"]
        + ["--sft-maps", "50", "--maps", "4", "--out", str(out)]
    )
    res = json.loads(out.read_text())
    assert [pt["update"] for pt in res["curve"]] == [0, 2, 3]
    assert res["summary"]["updates"] == 3 and set(res["summary"]) >= {"30", "20", "rl_minutes"}
    for k in ("30", "20"):
        s = res["summary"][k]
        assert 0.0 <= s["warm_start"] <= s["optimal"] and s["best"] >= s["final"] - 1e-12
        assert s["optimal"] == pytest.approx(np.mean(references(SEEDS[:10], steps=int(k))["optimal"]))
    assert res["timing"]["rollout_s"] > 0 and res["timing"]["update_s"] > 0
    assert res["curve"][-1]["train"]["turns"] > 0
