"""``sft.loss_on``: the warm start's loss on the responses only, or on every token of the demonstration
(``all``: the prompt and the tool results too), never on padding."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rockroll.agentrl.trajectory import TrainSample  # noqa: E402
from rockroll.trainer.config import TrainConfig  # noqa: E402
from rockroll.trainer.learner.sft import sft_train  # noqa: E402


class _Recorder(torch.nn.Module):
    """A bigram model that records which positions' logprobs reach the loss (their gradient is non-zero)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(vocab, vocab)
        self.config = type("C", (), {"model_type": "recorder"})()
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, use_cache: bool = False) -> object:
        logits = self.table(input_ids)
        logits.retain_grad()
        self.seen.append(logits)
        return type("O", (), {"logits": logits})()


@pytest.mark.parametrize("loss_on", ["response", "all"])
def test_the_loss_covers_the_responses_or_every_real_token(loss_on: str) -> None:
    row = TrainSample([3, 4, 5, 6, 7, 8], [0, 0, 1, 1, 0, 1], [0.0] * 6, 0.0, "g", "e", 0)
    short = TrainSample([3, 4, 9], [0, 0, 1], [0.0] * 3, 0.0, "g", "e", 1)
    model = _Recorder(16)
    sft_train(model, [row, short], steps=1, lr=1e-3, batch_size=4, pad_id=0, loss_on=loss_on)
    logits = model.seen[0]
    touched = {tuple((logits.grad[i].abs().sum(-1) > 0).int().tolist()) for i in range(logits.shape[0])}
    # position t predicts token t + 1; the short row is padded to 6
    if loss_on == "response":
        assert touched <= {(0, 1, 1, 0, 1, 0), (0, 1, 0, 0, 0, 0)} and (0, 1, 1, 0, 1, 0) in touched
    else:
        assert touched <= {(1, 1, 1, 1, 1, 0), (1, 1, 0, 0, 0, 0)} and (1, 1, 1, 1, 1, 0) in touched


def test_loss_on_is_a_checked_setting() -> None:
    assert TrainConfig().sft.loss_on == "response"
    with pytest.raises(ValueError, match="loss_on"):
        TrainConfig.model_validate({"sft": {"loss_on": "everything"}})
