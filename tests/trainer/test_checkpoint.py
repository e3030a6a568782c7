"""Checkpoint layout: weights in safetensors (tied tensors once), optimizer/RNG beside them, pruning
that stays within the run's own past, ``latest`` that survives a missing folder, older ``state.pt`` read."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from rockroll.trainer.run import checkpoint as ckpt  # noqa: E402


def _workers(seed: int = 0) -> dict:
    """A workers.state_dict()-shaped mapping: tied weights (lm_head = embedding), an AdamW state, a schedule."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied, as in Qwen2's small models
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.tensor([[1, 2]])).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()}


def test_round_trip_safetensors_and_no_pickled_weights(tmp_path: Path) -> None:
    from safetensors import safe_open

    workers = _workers()
    buffer = [("a trajectory", 1)]  # not JSON: goes to extra.pt
    state = {"workers": workers, "version": 3, "buffer": buffer, "summary": {"success_start": 0.25}}
    path = ckpt.save_checkpoint(tmp_path, 7, state)
    assert path == tmp_path / "checkpoints" / "step-7"
    names = {p.name for p in path.iterdir()}
    assert names == {"model.safetensors", "optimizer.pt", "rng_state.pt", "trainer_state.json", "extra.pt"}
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        assert set(f.keys()) == {"0.weight"}  # the tied 1.weight is an alias, stored once
    meta = json.loads((path / "trainer_state.json").read_text())
    assert meta["step"] == 7 and meta["state"]["version"] == 3 and meta["weights"] == ["model"]
    # no pickle needed for the optimizer and RNG state
    opt = torch.load(path / "optimizer.pt", weights_only=True)
    assert set(opt) == {"opt", "sched"}
    torch.load(path / "rng_state.pt", weights_only=True)

    back = ckpt.load_latest(tmp_path)
    assert back["step"] == 7 and back["version"] == 3 and back["buffer"] == buffer
    assert back["summary"] == {"success_start": 0.25}
    assert list(back["workers"]["model"]) == list(workers["model"])  # key order kept
    for k, v in workers["model"].items():
        assert torch.equal(back["workers"]["model"][k], v), k
    m = back["workers"]["model"]
    assert m["1.weight"] is m["0.weight"]  # still tied after loading
    exp_avg = workers["opt"]["state"][0]["exp_avg"]
    assert torch.equal(back["workers"]["opt"]["state"][0]["exp_avg"], exp_avg)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model.load_state_dict(m)  # strict: every key present


def test_rng_state_is_restored_exactly(tmp_path: Path) -> None:
    import numpy as np

    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    ckpt.save_checkpoint(tmp_path, 0, {"workers": _workers()})
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    ckpt.restore_rng(ckpt.load_latest(tmp_path)["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_pruning_keeps_the_newest_of_this_run_and_never_a_later_step(tmp_path: Path) -> None:
    # a checkpoint of a later step left in the folder (another run of this name): never pruned, never "latest"
    ckpt.save_checkpoint(tmp_path, 99, {"workers": _workers(1), "version": 99})
    for step in range(4):
        ckpt.save_checkpoint(tmp_path, step, {"workers": _workers(), "version": step + 1}, keep=2)
        assert ckpt.latest_step(tmp_path) == step
    assert sorted(ckpt.list_checkpoints(tmp_path)) == [2, 3, 99]
    assert ckpt.load_latest(tmp_path)["version"] == 4
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp")]


def test_latest_marker_naming_a_missing_folder_falls_back_to_the_newest(tmp_path: Path) -> None:
    ckpt.save_checkpoint(tmp_path, 1, {"workers": _workers(), "version": 1}, keep=5)
    ckpt.save_checkpoint(tmp_path, 2, {"workers": _workers(), "version": 2}, keep=5)
    (tmp_path / "checkpoints" / "latest").write_text("step-5\n")  # what the old cross-run pruning left
    assert ckpt.latest_step(tmp_path) == 2 and ckpt.load_latest(tmp_path)["version"] == 2
    assert ckpt.load_latest(tmp_path / "nothing") is None and ckpt.latest_step(tmp_path / "nothing") is None


def test_older_state_pt_checkpoints_still_load(tmp_path: Path) -> None:
    workers = _workers()
    old = tmp_path / "checkpoints" / "step_0000004"
    old.mkdir(parents=True)
    torch.save({"workers": workers, "version": 5, "step": 4, "rng": ckpt.rng_state()}, old / "state.pt")
    (tmp_path / "checkpoints" / "latest").write_text("step_0000004")
    assert ckpt.latest_step(tmp_path) == 4
    assert ckpt.load_latest(tmp_path)["version"] == 5
    weights = ckpt.load_weights(old)
    assert all(torch.equal(weights[k], v) for k, v in workers["model"].items())
