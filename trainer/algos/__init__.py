"""Algorithm math as plain tensor functions (advantages, policy losses, KL, aggregation, shaping).

Policy losses and advantage estimators are registries: ``@register_policy_loss("name")`` and
``@register_advantage_estimator("name")`` make a new one selectable as ``algo.pg_variant`` /
``algo.adv_estimator``. Importing this package is light: torch is imported inside the functions.
"""

from rockroll.envs.registries import Registry, UnknownNameError
from rockroll.trainer.algos.advantages import (
    compute_gae,
    discounted_returns,
    group_advantages,
    reinforce_pp_advantages,
    rloo_advantages,
    token_returns,
)
from rockroll.trainer.algos.aggregate import LOSS_AGG_MODES, aggregate_loss
from rockroll.trainer.algos.estimators import (
    ADVANTAGE_ESTIMATORS,
    AdvantageEstimator,
    AdvantageInputs,
    advantage_estimator_names,
    get_advantage_estimator,
    register_advantage_estimator,
)
from rockroll.trainer.algos.kl import KL_ESTIMATORS, entropy_from_logits, kl_estimate, kl_penalized_rewards
from rockroll.trainer.algos.losses import (
    POLICY_LOSSES,
    cispo_loss,
    decoupled_ppo_loss,
    get_policy_loss,
    gspo_loss,
    policy_loss,
    policy_loss_names,
    ppo_clip_loss,
    ratio_stats,
    register_policy_loss,
    tis_weights,
    topr_loss,
    value_loss,
)
from rockroll.trainer.algos.masked import masked_mean, masked_whiten
from rockroll.trainer.algos.normalize import (
    REWARD_NORMS,
    clip_advantages,
    difficulty_mask,
    max_length_mask,
    shape_rewards,
)
from rockroll.trainer.algos.turn_credit import (
    TURN_CREDIT_MODES,
    TurnCredit,
    TurnCreditConfig,
    TurnEpisode,
    continuation_return,
    episode_advantages,
    episode_from_trajectory,
    fork_advantages,
    fork_value,
    gae_turn_advantages,
    gigpo_advantages,
    register_turn_credit,
    turn_advantages,
)

__all__ = [
    "compute_gae",
    "discounted_returns",
    "group_advantages",
    "reinforce_pp_advantages",
    "rloo_advantages",
    "token_returns",
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "AdvantageInputs",
    "advantage_estimator_names",
    "get_advantage_estimator",
    "register_advantage_estimator",
    "LOSS_AGG_MODES",
    "aggregate_loss",
    "KL_ESTIMATORS",
    "entropy_from_logits",
    "kl_estimate",
    "kl_penalized_rewards",
    "POLICY_LOSSES",
    "cispo_loss",
    "get_policy_loss",
    "gspo_loss",
    "decoupled_ppo_loss",
    "policy_loss",
    "policy_loss_names",
    "ppo_clip_loss",
    "ratio_stats",
    "register_policy_loss",
    "tis_weights",
    "topr_loss",
    "value_loss",
    "REWARD_NORMS",
    "clip_advantages",
    "difficulty_mask",
    "masked_mean",
    "masked_whiten",
    "max_length_mask",
    "shape_rewards",
    "Registry",
    "UnknownNameError",
    "TURN_CREDIT_MODES",
    "TurnCredit",
    "TurnCreditConfig",
    "TurnEpisode",
    "continuation_return",
    "episode_advantages",
    "episode_from_trajectory",
    "fork_advantages",
    "fork_value",
    "gae_turn_advantages",
    "gigpo_advantages",
    "register_turn_credit",
    "turn_advantages",
]
