"""Algorithm math as plain tensor functions (advantages, policy losses, KL, aggregation, shaping).

Importing this package is light: torch is imported inside the functions.
"""

from rockroll.trainer.algos.advantages import (
    compute_gae,
    discounted_returns,
    group_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
    token_returns,
)
from rockroll.trainer.algos.aggregate import LOSS_AGG_MODES, aggregate_loss
from rockroll.trainer.algos.kl import KL_ESTIMATORS, entropy_from_logits, kl_estimate, kl_penalized_rewards
from rockroll.trainer.algos.losses import (
    PG_VARIANTS,
    cispo_loss,
    gspo_loss,
    policy_loss,
    ppo_clip_loss,
    tis_weights,
    topr_loss,
    value_loss,
)
from rockroll.trainer.algos.normalize import (
    clip_advantages,
    difficulty_mask,
    masked_mean,
    masked_whiten,
    max_length_mask,
    shape_rewards,
)

__all__ = [
    "compute_gae",
    "discounted_returns",
    "group_advantages",
    "reinforce_pp_advantages",
    "rloo_advantages",
    "token_returns",
    "LOSS_AGG_MODES",
    "aggregate_loss",
    "KL_ESTIMATORS",
    "entropy_from_logits",
    "kl_estimate",
    "kl_penalized_rewards",
    "PG_VARIANTS",
    "cispo_loss",
    "gspo_loss",
    "policy_loss",
    "ppo_clip_loss",
    "tis_weights",
    "topr_loss",
    "value_loss",
    "clip_advantages",
    "difficulty_mask",
    "masked_mean",
    "masked_whiten",
    "max_length_mask",
    "shape_rewards",
]
