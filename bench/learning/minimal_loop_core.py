"""The pieces of ``bench/learning/minimal_loop.py``: vocabulary, model, batched maps, rollout, update, exact evaluation.

One output token per turn: the prompt is the slippery flag and the current grid (no history: the grid is
the whole state), the policy is the model's next-token logits restricted to the four action tokens, in
rollout, update and evaluation alike (masking only the sampling lets the off-action mass drift:
configs/README.md, facts section). Because the prompt is the grid alone, the policy is a function of
(map, cell): a rollout asks the model once for each distinct (map, cell) its live episodes stand on
(one batched forward per turn, for the cells not asked yet), and the update runs one forward over the
distinct (map, cell) prompts of the turns that carry advantage, with the advantages of identical
(map, cell, action) turns summed, which gives the same gradient as one row per turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rockroll.envs.frozenlake.env import FrozenLakeEnv
from rockroll.envs.frozenlake.exact import policy_success
from rockroll.envs.frozenlake.expert import next_action
from rockroll.envs.frozenlake.maps import ACTIONS, MOVES, generate_map

# ------------------------------------------------------------------------------------------ vocabulary
SPECIALS = ["<pad>", "<bos>", "<eos>", "<act>"]
FLAGS = ["<slippery>", "<solid>"]
SYMBOLS = ["_", "O", "G", "P", "X", "√", "\n"]  # the env's agent-facing symbols (envs/frozenlake/env.py)
DIGITS = [str(d) for d in range(10)]
VOCAB = SPECIALS + FLAGS + SYMBOLS + list(ACTIONS) + DIGITS
TOKEN = {t: i for i, t in enumerate(VOCAB)}
ACTION_IDS = [TOKEN[a] for a in ACTIONS]
_SHOW = {"S": "_", "F": "_", "H": "O", "G": "G"}  # storage letter -> symbol, player absent (env.py)
FROZEN, HOLE, GOAL = 0, 1, 2


def encode_prompt(grid: tuple[str, ...], row: int, col: int, slippery: bool = True) -> list[int]:
    """``<bos> <slippery|solid>`` + the grid as the env draws it (player ``P``, rows split by newlines) + ``<act>``."""
    ids = [TOKEN["<bos>"], TOKEN["<slippery>" if slippery else "<solid>"]]
    for r, line in enumerate(grid):
        if r:
            ids.append(TOKEN["\n"])
        ids += [TOKEN["P"] if (r, c) == (row, col) else TOKEN[_SHOW[ch]] for c, ch in enumerate(line)]
    return ids + [TOKEN["<act>"]]


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] if VOCAB[i] in SYMBOLS else f"{VOCAB[i]} " for i in ids)


def build_model(seed: int, hidden: int = 128, layers: int = 2) -> Any:
    """A randomly initialised Qwen2-shaped causal LM over :data:`VOCAB` (hidden 128, 2 layers: ~0.3M parameters)."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(
        vocab_size=len(VOCAB),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=TOKEN["<pad>"],
        bos_token_id=TOKEN["<bos>"],
        eos_token_id=TOKEN["<eos>"],
        use_sliding_window=False,
    )
    torch.manual_seed(seed)
    # eager attention: 10-30% faster than sdpa for these 22-token prompts on one CPU thread
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)


def action_logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """(B, 4) logits of the four action tokens after each prompt (equal-length prompts, no padding)."""
    hidden = model.model(input_ids=ids).last_hidden_state[:, -1]
    return hidden @ model.lm_head.weight[ACTION_IDS].T


# ---------------------------------------------------------------------------------------- maps
class MapBatch:
    """Maps of one size as arrays; a (map, cell) pair is the key ``map * cells + cell``."""

    def __init__(self, grids: list[tuple[str, ...]], slippery: bool = True) -> None:
        self.grids = [tuple(g) for g in grids]
        self.n, self.size = len(grids), len(grids[0])
        self.cells = self.size * self.size
        letters = np.array([list("".join(g)) for g in self.grids])
        self.tile = np.where(letters == "H", HOLE, np.where(letters == "G", GOAL, FROZEN))
        self.start = np.argmax(letters == "S", axis=1)
        rows, cols = np.divmod(np.arange(self.cells), self.size)
        self.nb = np.empty((4, self.cells), dtype=np.int64)
        for d, (dr, dc) in enumerate(MOVES):
            r, c = rows + dr, cols + dc
            inside = (r >= 0) & (r < self.size) & (c >= 0) & (c < self.size)
            self.nb[d] = np.where(inside, r * self.size + c, np.arange(self.cells))
        self.base = torch.tensor([encode_prompt(g, -1, -1, slippery) for g in self.grids])
        # prompt position of each cell: 2 leading tokens, one newline before every row but the first
        self.pos = torch.tensor([2 + r * (self.size + 1) + c for r, c in zip(rows, cols, strict=True)])

    def prompts(self, keys: np.ndarray) -> torch.Tensor:
        m, s = np.divmod(np.asarray(keys), self.cells)
        ids = self.base[torch.from_numpy(m)].clone()
        ids[torch.arange(len(ids)), self.pos[torch.from_numpy(s)]] = TOKEN["P"]
        return ids

    def live_keys(self) -> np.ndarray:
        """Every (map, cell) that is neither a hole nor the goal."""
        return np.flatnonzero(self.tile.reshape(-1) == FROZEN)


def draw_maps(rng: np.random.Generator, count: int, exclude: set[tuple[str, ...]], size: int = 4) -> list:
    """``count`` random solvable maps (envs/frozenlake/maps.py), none of them in ``exclude`` (the held-out maps)."""
    out: list[tuple[str, ...]] = []
    while len(out) < count:
        grid = generate_map(size, 0.8, rng)
        if grid not in exclude:
            out.append(grid)
    return out


def expert_labels(batch: MapBatch) -> tuple[np.ndarray, np.ndarray]:
    """Keys and actions of the re-planning no-slip expert (envs/frozenlake/expert.py) at every live cell
    with a hole-free path to the goal (cells without one have no expert action and are left out)."""
    probe = FrozenLakeEnv(size=batch.size, is_slippery=False)
    keys, labels = [], []
    for key in batch.live_keys():
        m, s = divmod(int(key), batch.cells)
        probe.grid = batch.grids[m]
        probe.row, probe.col = divmod(s, batch.size)
        action = next_action(probe)
        if action is not None:
            keys.append(key)
            labels.append(ACTIONS.index(action))
    return np.array(keys), np.array(labels)


# ------------------------------------------------------------------------------------------- rollout
@dataclass
class Rollout:
    reward: np.ndarray  # (episodes,) 1 at the goal
    turn_ep: np.ndarray  # per turn: its episode
    turn_key: np.ndarray  # per turn: its (map, cell) key
    turn_act: np.ndarray  # per turn: the sampled action
    entropy: float  # mean entropy (nats) of the sampling distribution over the turns
    forwards: int  # batched forwards (turns that met a new (map, cell))
    prompts: int  # distinct (map, cell) prompts computed
    stats: dict[str, float] = field(default_factory=dict)


def rollout(model: Any, batch: MapBatch, group: int, steps: int, temp: float, rng: np.random.Generator) -> Rollout:
    """``group`` episodes per map, all at once; a group shares its map and its slip draws (the t-th step of
    every member slips the same way). One batched forward per turn, for the (map, cell) keys not met yet."""
    n_ep = batch.n * group
    map_of = np.repeat(np.arange(batch.n), group)
    cell = batch.start[map_of].copy()
    slips = rng.integers(-1, 2, size=(batch.n, steps))  # gymnasium's rule: chosen, or one perpendicular
    alive, reward = np.ones(n_ep, dtype=bool), np.zeros(n_ep)
    probs = np.zeros((batch.n * batch.cells, 4))
    known = np.zeros(batch.n * batch.cells, dtype=bool)
    eps, keys_t, acts, forwards = [], [], [], 0
    for t in range(steps):
        live = np.flatnonzero(alive)
        if not live.size:
            break
        keys = map_of[live] * batch.cells + cell[live]
        new = np.unique(keys[~known[keys]])
        if new.size:
            with torch.no_grad():
                probs[new] = torch.softmax(action_logits(model, batch.prompts(new)) / temp, -1).numpy()
            known[new] = True
            forwards += 1
        cum = probs[keys].cumsum(1)
        act = np.minimum((cum < rng.random(live.size)[:, None] * cum[:, -1:]).sum(1), 3)
        eps.append(live), keys_t.append(keys), acts.append(act)
        nxt = batch.nb[(act + slips[map_of[live], t]) % 4, cell[live]]
        cell[live] = nxt
        tile = batch.tile[map_of[live], nxt]
        reward[live[tile == GOAL]] = 1.0
        alive[live[tile != FROZEN]] = False
    turn_key = np.concatenate(keys_t)
    p = probs[turn_key]
    entropy = float(-(p * np.log(np.maximum(p, 1e-12))).sum(1).mean())
    return Rollout(reward, np.concatenate(eps), turn_key, np.concatenate(acts), entropy, forwards, int(known.sum()))


# -------------------------------------------------------------------------------------------- update
def grpo_update(
    model: Any, opt: Any, batch: MapBatch, ro: Rollout, group: int, temp: float, std_norm: bool = True
) -> dict[str, float]:
    """One GRPO step on one batch (no KL, no clip: one pass is on-policy). Episode advantage = the reward
    minus its group's mean (divided by the group's std unless ``std_norm`` is off), spread over the
    episode's turns; loss = -mean over all turns of advantage x log-prob at the sampling temperature."""
    r = ro.reward.reshape(batch.n, group)
    adv = r - r.mean(1, keepdims=True)
    if std_norm:
        adv = adv / (r.std(1, ddof=1, keepdims=True) + 1e-6)
    weight = adv.reshape(-1)[ro.turn_ep] / len(ro.turn_ep)
    out = {"groups_with_variance": float((r.std(1) > 0).mean()), "loss_prompts": 0.0, "grad_norm": 0.0}
    nz = weight != 0
    if not nz.any():
        return out  # no group has reward variance: a zero gradient, no step
    pair = ro.turn_key[nz] * 4 + ro.turn_act[nz]
    pairs, inv = np.unique(pair, return_inverse=True)
    wsum = torch.from_numpy(np.bincount(inv, weights=weight[nz])).float()
    keys, key_inv = np.unique(pairs // 4, return_inverse=True)
    logp = torch.log_softmax(action_logits(model, batch.prompts(keys)) / temp, -1)
    chosen = logp[torch.from_numpy(key_inv), torch.from_numpy(pairs % 4)]
    loss = -(wsum * chosen).sum()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    out["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    opt.step()
    out["loss_prompts"] = float(len(keys))
    return out


# ------------------------------------------------------------------------------------ warm start (SFT)
def sft(
    model: Any, batch: MapBatch, seconds: float, max_steps: int, lr: float, bs: int, rng: np.random.Generator
) -> dict[str, float]:
    """Cross-entropy on the expert's action at every live cell of the training maps (restricted to the four
    action tokens), Adam at ``lr``, until ``seconds`` or ``max_steps``."""
    keys, labels = expert_labels(batch)
    target = torch.from_numpy(labels)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    t0, step, losses = time.perf_counter(), 0, []
    model.train()
    while step < max_steps and time.perf_counter() - t0 < seconds:
        idx = rng.choice(len(keys), size=min(bs, len(keys)), replace=False)
        loss = torch.nn.functional.cross_entropy(action_logits(model, batch.prompts(keys[idx])), target[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        step += 1
    seconds = time.perf_counter() - t0
    sample = rng.choice(len(keys), size=min(4096, len(keys)), replace=False)
    return {
        "steps": step,
        "seconds": seconds,
        "examples": len(keys),
        "loss_last50": float(np.mean(losses[-50:])) if losses else float("nan"),
        "train_agreement": float((greedy(model, batch, keys[sample]) == labels[sample]).mean()),
    }


# ------------------------------------------------------------------------------------ exact evaluation
def greedy(model: Any, batch: MapBatch, keys: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return action_logits(model, batch.prompts(keys)).argmax(-1).numpy()


def greedy_tables(model: Any, batch: MapBatch, chunk: int = 2048) -> list[dict[tuple[int, int], int]]:
    """The greedy action at every live cell of every map: ``[{(row, col): action}, ...]``."""
    keys = batch.live_keys()
    acts = np.concatenate([greedy(model, batch, keys[i : i + chunk]) for i in range(0, len(keys), chunk)])
    tables: list[dict[tuple[int, int], int]] = [{} for _ in range(batch.n)]
    for key, a in zip(keys, acts, strict=True):
        m, s = divmod(int(key), batch.cells)
        tables[m][divmod(s, batch.size)] = int(a)
    return tables


def exact_success(tables: list, batch: MapBatch, limits: tuple[int, ...]) -> dict[int, np.ndarray]:
    """Per map, the exact success of a table policy within each step limit (envs/frozenlake/exact.py)."""
    return {k: np.array([policy_success(g, k, t) for g, t in zip(batch.grids, tables, strict=True)]) for k in limits}
