"""The single-turn RLVR section of the rollout config (``rollout.rlvr``, read when ``rollout.mode: rlvr``).

YAML::

    rollout:
      mode: rlvr
      rlvr:
        dataset:                       # where the prompts come from
          source: generator            # generator | jsonl | hf_disk
          generator: arithmetic        # arithmetic | countdown | python_functions
          options: {max_operand: 9}    # the generator's own options
          size: 2000                   # train rows; heldout_size held-out rows (never trained on)
          prompt_template: "{prompt}"  # the row's fields by name
        rewards:                       # tag -> reward (agentrl.rewards.RewardRouterConfig)
          routes: {math: {reward: math}}
        success_threshold: 1.0         # held-out success: reward >= this
        oversample: 1.5                # groups drawn per try: 1.5x the groups still missing
        max_sampling_tries: 4          # draws per batch before it goes with fewer groups
        overlong: filter               # answers that hit max_tokens_per_turn: filter | penalty | none
        ratio: 1.0                     # with rollout.envs: the dataset's share of the groups beside the envs'

Group shape (``rollout.scheduler.num_env_groups``, ``group_size``, ``group_size_redundancy``), sampling
(``rollout.episode.temperature``, ``top_p``, ``max_tokens_per_turn``) and the held-out rows evaluated
(``rollout.eval_episodes``, ``rollout.select_episodes``) are the rollout's settings of those names.
"""

from __future__ import annotations

import inspect
import string
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from rockroll.agentrl.rewards.generators import GENERATORS
from rockroll.agentrl.rewards.router import RewardRouterConfig
from rockroll.envs.config import ConfigModel, OneOf

__all__ = ["RLVRConfig", "RLVRDatasetConfig", "template_fields"]

#: the warm start's answer of each generator's rows (``dataset.demo_template`` empty)
DEMO_TEMPLATES = {
    "arithmetic": "\\boxed{{{answer}}}",
    "countdown": "<answer>{solution}</answer>",
    "python_functions": "```python\n{reference}```",
}


def template_fields(template: str, key: str) -> list[str]:
    """The field names of a ``str.format`` template; ``ValueError`` naming ``key`` when it does not parse."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        raise ValueError(f"{key}: {e} in {template!r} (write a literal brace as {{{{ or }}}})") from e
    if any(not n or not n.isidentifier() for n in names):
        raise ValueError(f"{key}: every {{field}} of {template!r} must name a row field, e.g. {{prompt}}")
    return names


def _generator_options(name: str) -> list[str]:
    params = inspect.signature(GENERATORS.get(name)).parameters
    shared = {"n", "seed", "split", "heldout_frac", "split_seed"}
    return [p for p in params if p not in shared]


class RLVRDatasetConfig(ConfigModel):
    """Where the RLVR prompts come from and how they are shown to the policy (``rollout.rlvr.dataset``)."""

    source: Literal["generator", "jsonl", "hf_disk"] = Field(
        "generator",
        description="generator: rows drawn by a procedural generator (size, heldout_size, seed); jsonl: a local "
        "JSONL file (path); hf_disk: a local Hugging Face datasets folder saved with save_to_disk (path)",
    )
    generator: Annotated[str, OneOf(GENERATORS)] = Field("arithmetic", description="source: generator: which one")
    options: dict[str, Any] = Field(
        {}, description="source: generator: the generator's own options (arithmetic: max_operand, ops...)"
    )
    size: int = Field(2000, ge=1, description="source: generator: training rows drawn")
    heldout_size: int = Field(
        256, ge=0, description="source: generator: held-out rows drawn (prompts the training rows never hold)"
    )
    seed: int = Field(0, description="source: generator: the draw's seed")
    path: str = Field("", validate_default=True, description="source: jsonl / hf_disk: the file or folder of the rows")
    heldout_path: str = Field(
        "", description="jsonl / hf_disk: a separate file or folder of held-out rows (empty: split by heldout_frac)"
    )
    hf_split: str = Field("train", description="source: hf_disk: the split of a DatasetDict folder")
    tag: str = Field("", description="reward tag of rows without a 'tag' field (empty: each row must have one)")
    prompt_field: str = Field("prompt", description="the row field holding the prompt text")
    heldout_frac: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="share of prompts kept apart for evaluation, chosen by a hash of the prompt (the generator's "
        "split too); 0 with no heldout_path: no held-out rows (set rollout.eval_episodes: 0)",
    )
    split_seed: int = Field(0, description="seed of the held-out hash")
    prompt_template: str = Field(
        "{prompt}", description="the user message, a str.format template over the row's fields ({prompt}, {answer}...)"
    )
    system_prompt: str = Field("", description="a system message before every prompt (empty: none)")
    demo_template: str = Field(
        "",
        description="the warm start's answer (sft.steps > 0) from the row's fields, e.g. '\\boxed{{{answer}}}'; "
        "empty: the generator's own (arithmetic, countdown, python_functions)",
    )

    @field_validator("path", mode="after")
    @classmethod
    def _path_given(cls, path: str, info: ValidationInfo) -> str:
        source = info.data.get("source")
        if source in ("jsonl", "hf_disk") and not path:
            what = "file" if source == "jsonl" else "folder"
            raise ValueError(f"rollout.rlvr.dataset.path: source {source} reads a local {what}; set path")
        return path

    @field_validator("options", mode="after")
    @classmethod
    def _known_options(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        generator = info.data.get("generator")
        if info.data.get("source") == "generator" and generator is not None:
            known = _generator_options(generator)
            unknown = sorted(set(options) - set(known))
            if unknown:
                raise ValueError(
                    f"rollout.rlvr.dataset.options: generator {generator} has no option {unknown[0]!r}; "
                    f"it takes {', '.join(known) or 'none'}"
                )
        return options

    @field_validator("prompt_template", "demo_template", mode="after")
    @classmethod
    def _template(cls, template: str, info: ValidationInfo) -> str:
        template_fields(template, f"rollout.rlvr.dataset.{info.field_name}")
        return template

    def demo_format(self) -> str:
        """The warm start's answer template: ``demo_template``, else the generator's; ``""`` when neither."""
        if self.demo_template:
            return self.demo_template
        return DEMO_TEMPLATES.get(self.generator, "") if self.source == "generator" else ""


def _default_rewards() -> RewardRouterConfig:
    return RewardRouterConfig.model_validate({"routes": {"math": {"reward": "math"}}})


def _default_dataset() -> RLVRDatasetConfig:
    return RLVRDatasetConfig.model_validate({})


class RLVRConfig(ConfigModel):
    """Single-turn RLVR (``rollout.rlvr``): one answer per prompt, scored by a verifiable reward."""

    dataset: RLVRDatasetConfig = Field(default_factory=_default_dataset, description="the prompts")
    rewards: RewardRouterConfig = Field(
        default_factory=_default_rewards,
        description="the rewards by row tag: routes {tag: {reward, options}}, timeout_s, max_workers, "
        "infra_retries (agentrl.rewards; a reward that fails masks the answer, never scores it 0)",
    )
    success_threshold: float = Field(
        1.0, description="an answer succeeds when its reward is at least this (held-out success, env/<tag>/success)"
    )
    oversample: float = Field(
        1.5,
        ge=1,
        le=16,
        description="groups drawn per try: this many times the groups the batch still misses (rounded up)",
    )
    max_sampling_tries: int = Field(
        4,
        ge=1,
        le=64,
        description="draws per batch: with algo.dynamic_sampling, groups whose rewards are all equal are dropped "
        "and more are drawn until num_env_groups are kept or this many tries were made "
        "(rollout/sampling_tries, rollout/kept_share); 1: one draw, no refill",
    )
    overlap_chunks: int = Field(
        1,
        ge=1,
        le=64,
        description="generate a draw in this many batched calls of whole groups, each scored while the next "
        "generates (rewards off the step's critical path; smaller batches); 1: one call, then every score",
    )
    overlong: Literal["filter", "penalty", "none"] = Field(
        "filter",
        description="answers that hit rollout.episode.max_tokens_per_turn: filter (never trained on; the group "
        "takes another answer or is dropped), penalty (reward minus overlong_penalty), none (scored as they are); "
        "counted in rollout/overlong_share",
    )
    overlong_penalty: float = Field(1.0, ge=0, description="overlong: penalty: subtracted from the reward")
    ratio: float = Field(
        1.0,
        gt=0,
        description="with rollout.envs (agentic envs in the same run): the dataset's share of each batch's groups, "
        "relative to each env entry's ratio (ratio 3 beside one env of ratio 1: three quarters of the groups)",
    )
