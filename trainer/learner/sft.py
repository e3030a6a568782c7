"""Supervised warm start on expert demonstrations (cross-entropy on response tokens only).

From random initialisation GRPO gets no reward signal on a tiny model (configs/README.md); a short
SFT phase on solver plans gives it a starting success rate that RL then improves. Demos come from
:meth:`rockroll.trainer.rollout.plan.PlanRollout.demo` on training seeds (held-out seeds are never used).

On a tool env (Lookup-v0) the expert's turns are tool turns (:class:`~rockroll.envs.tools.ToolAction`): the
multi-turn demos write each one in the model's tool-call format (``rollout.episode.tool_call_parser``, default
``hermes``: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks) and step the env with the turn
itself. The calls' results reach the next prompt as the env's observation, a user message (the prompt builder
does not render ``tools=`` or tool messages yet).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import rockroll.envhub as envhub
from rockroll.agentrl.engines.choices import answer_tokens
from rockroll.agentrl.models.chat import format_observation
from rockroll.agentrl.rollout.builders import make_builder
from rockroll.agentrl.rollout.config import EpisodeConfig
from rockroll.agentrl.rollout.scheduler import ratio_slots
from rockroll.agentrl.tools import ToolCallParser, get_parser
from rockroll.agentrl.trajectory import TrainSample, Trajectory, Turn
from rockroll.envs.action_wire import tools_of
from rockroll.envs.experts import expert_for
from rockroll.envs.play import is_tool_env
from rockroll.envs.tools import ToolAction

__all__ = ["build_demos", "build_mixed_turn_demos", "build_turn_demos", "response_tokens", "sft_train"]


def build_demos(rollout: Any, seeds: range | list[int]) -> list[Any]:
    """:class:`TrainSample` rows (response mask on the plan) for every seed the expert solves within the plan cap."""
    out = []
    for seed in seeds:
        demo = rollout.demo(seed)
        if demo is None:
            continue
        prompt, resp = demo
        out.append(
            TrainSample(
                prompt + resp,
                [0] * len(prompt) + [1] * len(resp),
                [0.0] * (len(prompt) + len(resp)),
                0.0,
                f"demo{seed}",
                f"demo{seed}",
                0,
            )
        )
    if not out:
        raise ValueError("no expert demonstration fits rollout.plan.max_actions; raise it")
    return out


def response_tokens(tokenizer: Any, action: str | ToolAction, parser: ToolCallParser | None = None) -> list[int]:
    """The response that plays ``action``, ending in the tokenizer's EOS (the end of a turn): answer text as
    ``<answer>ACTION</answer>``; a tool turn in ``parser``'s format (its text, then its calls), which a tool
    env's demos need (``ValueError`` without one)."""
    if isinstance(action, str):
        return answer_tokens(tokenizer, action)
    if parser is None:
        raise ValueError("a tool-calling turn needs a tool-call parser to be written as the model's text")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("a response needs a tokenizer with an EOS token (the end of a turn)")
    return [*tokenizer.encode(parser.render(action), add_special_tokens=False), int(eos)]


def expert_trajectory(
    env_id: str,
    env_kwargs: dict[str, Any],
    tokenizer: Any,
    episode: EpisodeConfig,
    seed: int,
    *,
    explore: float = 0.0,
    expert: str = "",
    label: str = "taken",
) -> Trajectory:
    """The env's expert playing one episode, rendered turn by turn exactly as the multi-turn rollout
    renders the policy's episodes (the same :class:`PromptBuilder`, history window and chat template).

    Each response is ``<answer>ACTION</answer>`` plus the tokenizer's end-of-turn token, which is what
    the policy generates; on a tool env, a tool turn of the expert's is written in the
    ``episode.tool_call_parser`` format instead (:func:`response_tokens`) and the env steps on the turn
    itself. The expert re-plans from every state the env answers with (slips included).
    With ``explore`` > 0 each turn takes, with that chance, an action drawn uniformly from the env's
    ``action_candidates()`` (a tool env: its ``tool_examples()``, one call a turn) instead (the draw is seeded
    by ``seed``): a policy imitating such play keeps about ``explore / k`` of its mass on each of the ``k``
    actions, where RL can find better ones.
    ``expert``: ``"module:factory"`` of another demonstrator than the env spec's. ``label``: what each turn's
    response is: ``taken`` (the action played, random or the expert's) or ``expert`` (the expert's action in
    that state while the episode goes on with the action played: the random turns reach states the expert's
    own play rarely visits, and each is labelled with the expert's move there, as in DAgger).
    """
    if not 0.0 <= explore <= 1.0:
        raise ValueError(f"explore must be in [0, 1], got {explore}")
    if label not in ("taken", "expert"):
        raise ValueError(f"label must be 'taken' or 'expert', got {label!r}")
    rng = random.Random(seed * 1_000_003 + 17)
    env = envhub.make(env_id, **env_kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        demonstrator = expert_for(env, expert or None)
        parser = get_parser(episode.tool_call_parser) if is_tool_env(env) else None
        system = env.system_prompt() if episode.system_prompt == "env" else ""
        builder = make_builder(tokenizer, system, tools_of(env), episode)  # the rollout's own (tools rendered)
        traj = Trajectory(f"demo{seed}", f"demo{seed}", env_id, seed)
        prompt = builder.first_prompt(format_observation(obs, episode.observation_format))
        for turn in range(episode.max_turns):
            best = demonstrator()
            if best is None:
                break
            action = rng.choice(_candidates(env)) if explore and rng.random() < explore else best
            state_key = builder.pending_obs
            response = response_tokens(tokenizer, action, parser)
            builder.add_response(response)
            text = builder.last_text
            target = response_tokens(tokenizer, best, parser) if label == "expert" and best != action else response
            step = env.step(action if isinstance(action, ToolAction) else text)
            obs, reward, terminated, truncated, info = step
            traj.turns.append(
                Turn(prompt, target, [0.0] * len(target), 0, action_text=text, observation=obs,
                     reward=float(reward), state_key=state_key)
            )  # fmt: skip
            traj.success = bool(info.get("success", False))
            if terminated or truncated:
                traj.terminated, traj.truncated = bool(terminated), bool(truncated)
                break
            if turn + 1 < episode.max_turns:
                prompt = builder.after_step(step, episode.observation_format)  # results as tool messages
        traj.final_reward = traj.total_reward
        return traj
    finally:
        env.close()


def _candidates(env: Any) -> list[str | ToolAction]:
    if is_tool_env(env):
        return [ToolAction("", (call,)) for call in env.unwrapped.tool_examples()]
    fn = getattr(env.unwrapped, "action_candidates", None) or getattr(env, "action_candidates", None)
    actions: list[str | ToolAction] = list(fn()) if fn else []
    if not actions:
        raise ValueError(f"{type(env.unwrapped).__name__} lists no action_candidates(): sft.explore needs them")
    return actions


def build_turn_demos(
    env_id: str,
    env_kwargs: dict[str, Any],
    tokenizer: Any,
    episode: EpisodeConfig,
    seeds: range | list[int],
    *,
    successful_only: bool = True,
    explore: float = 0.0,
    expert: str = "",
    label: str = "taken",
) -> list[TrainSample]:
    """Multi-turn SFT rows from expert episodes on ``seeds`` (loss on the assistant's tokens only).

    ``history: full`` gives one concatenated row per episode, ``last_k`` one row per turn, as the
    rollout's own samples. With ``successful_only`` (default) episodes the expert failed (a slip
    into a hole) are left out: their moves are as good, but the imitation target is the winning play.
    With ``label: expert`` (see :func:`expert_trajectory`) every episode is kept: each turn's target is the
    expert's move whatever was played.
    Raises ``ValueError`` when no expert exists for the env or a prompt overflows the context budget.
    """
    layout = "concat" if episode.history == "full" else "per_turn"
    rows: list[TrainSample] = []
    for seed in seeds:
        traj = expert_trajectory(
            env_id, env_kwargs, tokenizer, episode, seed, explore=explore, expert=expert, label=label
        )
        if traj.turns and (traj.success or not successful_only or label == "expert"):
            rows += traj.to_samples(layout)
    if not rows:
        raise ValueError(f"the {env_id} expert produced no usable demonstration on {len(seeds)} seeds")
    return rows


def build_mixed_turn_demos(
    envs: list[Any],
    tokenizer: Any,
    episode: EpisodeConfig,
    seeds: list[int],
    *,
    explore: float = 0.0,
    label: str = "taken",
) -> tuple[list[TrainSample], dict[str, float]]:
    """Multi-turn SFT rows for a mix of envs (``rollout.envs``): the demo episodes split among the envs by
    their ratios (the scheduler's slot stream, so 2:1 over 30 seeds is 20 + 10), each env's expert playing
    the first seeds of its share. Returns the rows and ``sft/<tag>/demo_episodes`` per env.

    The split is by episodes; rows follow (a ``last_k`` history gives one row per turn, so an env with
    longer episodes contributes more rows per episode).
    """
    slots = ratio_slots([e.ratio for e in envs], 0, len(seeds))
    rows: list[TrainSample] = []
    metrics: dict[str, float] = {}
    for i, e in enumerate(envs):
        n = slots.count(i)
        metrics[f"sft/{e.tag}/demo_episodes"] = float(n)
        if n:
            rows += build_turn_demos(
                e.env_id,
                e.env_kwargs,
                tokenizer,
                episode,
                list(seeds[:n]),
                explore=explore,
                expert=e.expert,
                label=label,
            )
    return rows, metrics


def sft_train(
    model: Any,
    demos: list[Any],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int = 0,
    pad_id: int = 0,
    loss_on: str = "response",
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    validate: Callable[[int], bool] | None = None,
    validate_every: int = 0,
) -> dict[str, float]:
    """Train ``model`` for ``steps`` AdamW steps on random minibatches of ``demos``; return final metrics.

    ``loss_on``: ``response`` (the rows' response masks) or ``all`` (every real token but the first: the
    prompt, observations and tool results too; no prefix is then shared between rows). ``validate(steps_done)``
    runs every ``validate_every`` steps with the model in eval mode; it returning True ends the warm start there
    (``sft/steps``: the steps taken)."""
    import torch

    from rockroll.trainer.learner.batch import collate, module_device, token_logprobs

    gen = torch.Generator().manual_seed(seed)
    device = module_device(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    t0 = time.perf_counter()
    tokens = 0
    metrics: dict[str, float] = {}
    done = 0
    for step in range(steps):
        rows = torch.randint(len(demos), (batch_size,), generator=gen).tolist()
        batch = collate([demos[i] for i in rows], pad_id).to(device)
        mask = batch.response_mask
        if loss_on == "all":
            mask = batch.attention_mask.to(mask.dtype)
            mask[:, 0] = 0  # the first token has nothing to be predicted from
        # logprobs only where the loss is, a prefix the rows share (a tool env's system prompt) computed once
        lp, _ = token_logprobs(model, batch.input_ids, batch.attention_mask, need=mask)
        loss = -(lp * mask).sum() / mask.sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int(batch.attention_mask.sum())
        metrics = {"sft/loss": loss.item(), "sft/tokens_per_s": tokens / max(time.perf_counter() - t0, 1e-9)}
        done = step + 1
        if on_step is not None:
            on_step(step, metrics)
        if validate is not None and validate_every and done % validate_every == 0:
            model.eval()
            stop = validate(done)
            model.train()
            if stop:
                break
    metrics["sft/steps"] = float(done)
    metrics["sft/time"] = time.perf_counter() - t0
    return metrics
