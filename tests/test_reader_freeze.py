"""`frozen_layers`: the embeddings and the first N layers get no gradient, the rest do; bad values are refused."""

import pytest
import torch
from transformers import BertConfig, BertModel

from drkit.errors import ConfigError
from drkit.reader.train import ReaderTrainConfig, freeze


def _tiny():
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=32), add_pooling_layer=False)


def test_freeze_keeps_the_lower_parts_and_trains_the_rest():
    model = _tiny()
    freeze(model, 2)
    out = model(input_ids=torch.tensor([[1, 5, 7, 2]])).last_hidden_state.sum()
    out.backward()
    for name, p in model.named_parameters():
        lower = name.startswith("embeddings.") or name.startswith(("encoder.layer.0.", "encoder.layer.1."))
        assert p.requires_grad is not lower, name
        assert (p.grad is None) is lower, name
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.named_parameters()
               if n.startswith("encoder.layer.2."))


def test_freeze_zero_trains_everything_and_too_many_is_refused():
    model = _tiny()
    freeze(model, 0)
    assert all(p.requires_grad for p in model.parameters())
    with pytest.raises(ConfigError, match="has 3 layers"):
        freeze(model, 4)
    with pytest.raises(ConfigError, match="no embeddings and encoder.layer stack"):
        freeze(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ConfigError, match="at least 0"):
        ReaderTrainConfig(frozen_layers=-1)
