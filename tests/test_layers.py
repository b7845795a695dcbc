"""The lean BERT layer (`drkit.dense.layers`) against transformers' own layers: the same values, bit for bit
where its products are `F.linear`'s, and within fp32's rounding where a small fp32 product uses the weight
stored transposed (`drkit.dense.layers._transposed`)."""

import pytest
import torch

import drkit.dense.layers as layers
from drkit.dense.encoder import load_transformer
from drkit.dense.layers import _lean, _linear, _transposed, additive_mask, bert_layer, hidden_states


@pytest.fixture(params=["F.linear", "transposed"])
def products(request, monkeypatch):
    """The lean path's fp32 products as `F.linear` (no product uses the transposed weight: the values must be
    transformers' own, bit for bit) or with the weight stored transposed (within rounding)."""
    if request.param == "F.linear":
        monkeypatch.setattr(layers, "TRANSPOSED_ROWS", (1, 0))
    return request.param


def _same(got: torch.Tensor, want: torch.Tensor, products: str) -> bool:
    if products == "F.linear":
        return torch.equal(got, want)
    return torch.allclose(got, want, rtol=1e-5, atol=1e-5)


def _batch(vocab: int, lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(1000, vocab, (len(lengths), width), generator=gen)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


@pytest.fixture(scope="module")
def minilm():
    """The packaged all-MiniLM-L6-v2, as drkit loads it."""
    from drkit.data.tokenizer import DEFAULT_ENCODER, encoder_path

    return load_transformer(encoder_path(DEFAULT_ENCODER)).eval()


def test_the_packaged_encoder_takes_the_lean_path(minilm):
    # without this the tests below could pass by falling back to transformers everywhere
    assert all(_lean(layer) for layer in minilm.encoder.layer)
    minilm.train()
    try:
        assert not any(_lean(layer) for layer in minilm.encoder.layer)  # dropout: transformers' own layer
    finally:
        minilm.eval()


@pytest.mark.parametrize("lengths", [[9], [40], [24, 7, 16], [3, 3]])
def test_a_lean_layer_is_the_layer(minilm, lengths, products):
    for layer in minilm.encoder.layer:
        vars(layer.intermediate.dense).pop("_drkit_transposed", None)  # from an earlier test
    ids, mask = _batch(minilm.config.vocab_size, lengths)
    with torch.no_grad():
        h = minilm.embeddings(input_ids=ids)
        ext = additive_mask(mask)
        for layer in minilm.encoder.layer:
            want = layer(h, ext)
            got = bert_layer(layer, h, ext)
            assert _same(got, want, products)
            h = want
    # the transposed weights were used where asked for (8 to 48 rows), and only there
    rows = len(lengths) * max(lengths)
    used = products == "transposed" and layers.TRANSPOSED_ROWS[0] <= rows <= layers.TRANSPOSED_ROWS[1]
    assert ("_drkit_transposed" in vars(minilm.encoder.layer[0].intermediate.dense)) == used


@pytest.mark.parametrize("lengths", [[31], [12, 40, 5]])
def test_hidden_states_are_the_models_own_padding_included(minilm, lengths, products):
    ids, mask = _batch(minilm.config.vocab_size, lengths, seed=1)
    with torch.no_grad():
        want = minilm(input_ids=ids, attention_mask=mask).last_hidden_state
        assert _same(hidden_states(minilm, ids, mask), want, products)


@pytest.mark.parametrize("shape", [(8, 384), (9, 384), (2, 24, 384), (48, 384)])
@pytest.mark.parametrize("bias", [True, False])
def test_a_product_with_the_transposed_weight_is_the_linear_layer(shape, bias):
    torch.manual_seed(0)
    lin = torch.nn.Linear(384, 1536, bias=bias)
    x = torch.randn(*shape)
    with torch.no_grad():
        assert _transposed(lin, x) is not None
        got = _linear(lin, x)
        want = torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_transposed_weight_follows_a_changed_weight():
    torch.manual_seed(1)
    lin = torch.nn.Linear(16, 8)
    x = torch.randn(12, 16)
    with torch.no_grad():
        _linear(lin, x)
        lin.weight.mul_(2.0)  # in place: a new version of the same storage
        torch.testing.assert_close(_linear(lin, x), torch.nn.functional.linear(x, lin.weight, lin.bias))
        lin.weight = torch.nn.Parameter(torch.randn(8, 16))  # another tensor
        torch.testing.assert_close(_linear(lin, x), torch.nn.functional.linear(x, lin.weight, lin.bias))
        lin.weight.data = torch.randn(8, 16)  # the same tensor, another storage (as Module.to does)
        torch.testing.assert_close(_linear(lin, x), torch.nn.functional.linear(x, lin.weight, lin.bias))
        lin.load_state_dict({"weight": torch.randn(8, 16), "bias": torch.randn(8)})  # copied in place
        torch.testing.assert_close(_linear(lin, x), torch.nn.functional.linear(x, lin.weight, lin.bias))


def test_f_linear_is_kept_where_the_transposed_weight_does_not_apply():
    lin = torch.nn.Linear(16, 8)
    small = torch.randn(12, 16)
    assert _transposed(lin, small) is None  # autograd on: the copy would carry no gradient to the weight
    with torch.no_grad():
        assert _transposed(lin, small) is not None
        assert _transposed(lin, torch.randn(layers.TRANSPOSED_ROWS[1] + 1, 16)) is None  # many rows: F.linear's
        assert _transposed(lin, torch.randn(1, 16)) is None  # one row: F.linear's
        assert _transposed(lin, small.bfloat16()) is None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert _transposed(lin, small) is None
    with torch.inference_mode():
        assert _transposed(lin, small) is not None
        torch.testing.assert_close(_linear(lin, small), torch.nn.functional.linear(small, lin.weight, lin.bias))


def test_hidden_states_under_autocast_and_with_gradients(minilm):
    ids, mask = _batch(minilm.config.vocab_size, [10, 6], seed=2)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        want = minilm(input_ids=ids, attention_mask=mask).last_hidden_state
        assert torch.equal(hidden_states(minilm, ids, mask), want)
    # eval() with autograd on (a frozen encoder inside a trained model): the same values and gradients
    x = minilm.embeddings(input_ids=ids).detach().requires_grad_(True)
    ext = additive_mask(mask)
    layer = minilm.encoder.layer[0]
    (g_want,) = torch.autograd.grad(layer(x, ext).sum(), x)
    (g_got,) = torch.autograd.grad(bert_layer(layer, x, ext).sum(), x)
    assert torch.equal(g_got, g_want)


def test_int8_linears_inside_the_lean_layer(minilm):
    import copy

    from drkit.dense.quantize import quantize_transformer

    model = copy.deepcopy(minilm)
    quantize_transformer(model, "fp32")
    layer = model.encoder.layer[0]
    assert type(layer.attention.self.query) is not torch.nn.Linear
    ids, mask = _batch(model.config.vocab_size, [14, 9], seed=3)
    with torch.no_grad():
        h = model.embeddings(input_ids=ids)
        ext = additive_mask(mask)
        assert torch.equal(bert_layer(layer, h, ext), layer(h, ext))
        assert torch.equal(hidden_states(model, ids, mask), model(input_ids=ids, attention_mask=mask).last_hidden_state)


def test_a_layer_without_what_the_lean_path_reads_runs_as_itself(tiny_base):
    layer = load_transformer(tiny_base).eval().encoder.layer[0]
    assert _lean(layer)
    fresh = load_transformer(tiny_base).eval().encoder.layer[0]
    del fresh.attention.self.scaling  # as in a transformers 4 layer, which computes its scale where it uses it
    assert not _lean(fresh)


def test_other_layers_run_as_themselves(tiny_base):
    from transformers import AutoModel

    eager = AutoModel.from_pretrained(str(tiny_base), attn_implementation="eager").eval()
    assert not any(_lean(layer) for layer in eager.encoder.layer)  # eager attention: another computation
    ids, mask = _batch(eager.config.vocab_size, [8, 5], seed=4)
    with torch.no_grad():
        assert torch.equal(hidden_states(eager, ids, mask), eager(input_ids=ids, attention_mask=mask).last_hidden_state)
    train = load_transformer(tiny_base).train()  # dropout on: transformers' layer, the same random draws
    torch.manual_seed(5)
    got = hidden_states(train, ids, mask)
    torch.manual_seed(5)
    want = train(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.equal(got, want)
