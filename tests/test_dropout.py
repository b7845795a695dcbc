"""drkit.dense.dropout: the cheap mask against plain references, and the swap that puts everything back."""

import copy
import math

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel

from drkit.dense.dropout import ATTENTION, CheapDropout, _attention, cheap_dropout, keep_mask, mask_dropout


def test_keep_mask_keeps_one_minus_p_and_repeats_with_the_seed():
    for p in (0.1, 0.5, 0.9):
        torch.manual_seed(0)
        mask = keep_mask((1000, 1003), p)
        n = mask.numel()
        assert mask.shape == (1000, 1003) and mask.dtype == torch.bool
        sd = math.sqrt(n * p * (1 - p))
        assert abs(int(mask.sum()) - n * (1 - p)) < 5 * sd  # binomial: 5 standard deviations
        # no lane is stuck: each of the four int16 lanes of a draw keeps about 1 - p as well
        lanes = mask.flatten()[: n - n % 4].view(-1, 4).float().mean(0)
        assert torch.all((lanes - (1 - p)).abs() < 0.01)
        torch.manual_seed(0)
        assert torch.equal(keep_mask((1000, 1003), p), mask)
    # neighbouring elements are not correlated (the lanes of one 64-bit draw are independent bits)
    torch.manual_seed(1)
    m = keep_mask((2_000_000,), 0.5).float()
    assert abs(float(torch.corrcoef(torch.stack([m[:-1], m[1:]]))[0, 1])) < 0.01


def test_mask_dropout_is_dropout_with_that_mask_forward_and_backward():
    x = torch.randn(7, 13, 5, requires_grad=True)
    torch.manual_seed(3)
    y = mask_dropout(x, 0.25)
    torch.manual_seed(3)
    keep = keep_mask((7, 13, 5), 0.25)
    assert torch.allclose(y, torch.where(keep, x / 0.75, torch.zeros(())), rtol=1e-6, atol=0)
    y.sum().backward()
    assert torch.allclose(x.grad, keep.float() / 0.75)
    assert mask_dropout(x, 0.0) is x
    assert torch.equal(mask_dropout(x, 1.0), torch.zeros_like(x))


def test_cheap_dropout_module_is_identity_in_eval():
    d = CheapDropout(0.3)
    x = torch.randn(4, 9)
    assert torch.equal(d.eval()(x), x)
    torch.manual_seed(5)
    y = d.train()(x)
    assert ((y == 0) | torch.isclose(y, x / 0.7)).all()


def _attention_reference(q, k, v, mask, p, scaling):
    """transformers' eager attention, written out, with `keep_mask`'s draw as its dropout."""
    w = q @ k.transpose(2, 3) * scaling
    w = w.masked_fill(~mask, torch.finfo(w.dtype).min) if mask.dtype == torch.bool else w + mask
    w = torch.softmax(w, -1)
    w = torch.where(keep_mask(tuple(w.shape), p), w / (1 - p), torch.zeros(()))
    return (w @ v).transpose(1, 2)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_training_attention_against_the_written_out_reference(kind):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    attend = torch.ones(2, 1, 6, 6, dtype=torch.bool)
    attend[1, :, :, 4:] = False  # the second sequence's last two positions are padding
    mask = attend if kind == "bool" else (~attend).float() * torch.finfo(torch.float32).min
    module = nn.Module().train()
    torch.manual_seed(9)
    out, weights = _attention(module, q, k, v, mask, dropout=0.2, scaling=0.5)
    torch.manual_seed(9)
    assert weights is None
    assert torch.allclose(out, _attention_reference(q, k, v, mask, 0.2, 0.5), atol=1e-6)
    # not training, or no dropout: transformers' sdpa attention itself
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    for training, p in ((False, 0.2), (True, 0.0)):
        module.train(training)
        mine, _ = _attention(module, q, k, v, mask, dropout=p if training else 0.0, scaling=0.5)
        theirs, _ = sdpa_attention_forward(module, q, k, v, mask, dropout=0.0, scaling=0.5)
        assert torch.equal(mine, theirs)


def _tiny_bert(dropout=0.1):
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=32, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout))


def test_cheap_dropout_swaps_and_puts_everything_back():
    model = _tiny_bert()
    ids = torch.randint(0, 50, (3, 8))
    attention_mask = torch.ones(3, 8, dtype=torch.long)
    attention_mask[2, 5:] = 0
    before = {n: t.clone() for n, t in model.state_dict().items()}
    eval_out = model.eval()(input_ids=ids, attention_mask=attention_mask).last_hidden_state
    dropouts = [m for m in model.modules() if type(m) is nn.Dropout]
    assert dropouts
    with cheap_dropout(model, "cpu"):
        assert not any(type(m) is nn.Dropout for m in model.modules())
        assert model.config._attn_implementation == ATTENTION
        # in eval: the same values as without it
        assert torch.equal(model(input_ids=ids, attention_mask=attention_mask).last_hidden_state, eval_out)
        model.train()
        out = model(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        out.sum().backward()  # trains: gradients reach the embeddings
        assert model.embeddings.word_embeddings.weight.grad is not None
        assert not torch.allclose(out, eval_out)  # dropout acted
    assert [m for m in model.modules() if type(m) is nn.Dropout] == dropouts
    assert all(m.training for m in dropouts)  # the mode set inside the block carries over
    assert model.config._attn_implementation == "sdpa"
    assert set(model.state_dict()) == set(before)


def test_cheap_dropout_without_dropout_trains_exactly_as_without_it():
    """With p = 0 the training forward and its gradients are the plain model's, bit for bit."""
    model = _tiny_bert(dropout=0.0).train()
    twin = copy.deepcopy(model)
    ids = torch.randint(0, 50, (2, 7))
    attention_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    plain = twin(input_ids=ids, attention_mask=attention_mask).last_hidden_state
    plain.square().sum().backward()
    with cheap_dropout(model, "cpu"):
        mine = model(input_ids=ids, attention_mask=attention_mask).last_hidden_state
        mine.square().sum().backward()
    assert torch.equal(mine, plain)
    grads = [(n, a.grad, b.grad) for (n, a), (_, b) in zip(model.named_parameters(), twin.named_parameters())]
    assert sum(a is not None for _, a, _ in grads) > 10
    for n, a, b in grads:  # the pooler, which last_hidden_state does not use, has none in either
        assert (a is None and b is None) or torch.equal(a, b), n


def test_a_copied_layer_with_its_own_config_is_switched_too():
    """The question encoder's hop layers are deep copies, each with a config of its own."""
    model = _tiny_bert()
    holder = nn.Module()
    holder.layer = copy.deepcopy(model.encoder.layer[0])
    holder.base = model
    with cheap_dropout(holder, "cpu"):
        assert holder.layer.attention.self.config._attn_implementation == ATTENTION
        assert model.config._attn_implementation == ATTENTION
    assert holder.layer.attention.self.config._attn_implementation == "sdpa"


def test_on_another_device_nothing_changes():
    model = _tiny_bert()
    with cheap_dropout(model, "cuda"):  # only the device's type is read: no GPU is needed
        assert any(type(m) is nn.Dropout for m in model.modules())
        assert model.config._attn_implementation == "sdpa"


def test_a_bert_in_training_draws_every_mask_through_the_cheap_path(monkeypatch):
    """Inside the block, a training BERT's every dropout, its attention weights' included, is `keep_mask`'s:
    the embeddings' one, and per layer the attention weights' and the two residual branches'."""
    import drkit.dense.dropout as dropout

    draws, real = [], dropout.keep_mask
    monkeypatch.setattr(dropout, "keep_mask", lambda shape, p, device="cpu": draws.append(shape) or real(shape, p, device))
    model = _tiny_bert().train()  # 2 layers, 2 heads, hidden 16
    ids = torch.randint(0, 50, (3, 8))
    with cheap_dropout(model, "cpu"):
        model(input_ids=ids, attention_mask=torch.ones(3, 8, dtype=torch.long))
    assert len(draws) == 1 + 2 * 3
    assert draws.count((3, 2, 8, 8)) == 2  # the attention weights, one draw a layer
    draws.clear()
    model(input_ids=ids, attention_mask=torch.ones(3, 8, dtype=torch.long))  # outside it: torch's own
    assert draws == []


def test_keep_mask_keeps_everything_below_its_resolution():
    assert keep_mask((5, 3), 1e-9).all()
    x = torch.randn(4, 4, dtype=torch.bfloat16)
    torch.manual_seed(2)
    y = mask_dropout(x, 0.1)
    torch.manual_seed(2)
    keep = keep_mask((4, 4), 0.1)
    # the scale applied as a double (torch's dropout does so too), not rounded to bf16 first
    assert torch.equal(y, torch.where(keep, (x.double() / 0.9).to(torch.bfloat16), torch.zeros((), dtype=torch.bfloat16)))
