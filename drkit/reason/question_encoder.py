"""The question encoder of the DrKIT model (paper, 2.2 and Appendix A) and its settings, `ModelConfig`.

The question is encoded once by the first `shared_layers` transformer layers; each hop t has its own
`hop_layers` layers on top, its start and end queries, and its condition on Z_{t-1}. `drkit.reason.model`
documents the options (``query_heads``, ``pool``, ``entity_condition``, ``train_word_embeddings``) and
puts the encoder together with the T textual follows. Questions are computed in groups of equal padded
width (`length_groups`), so a question's vectors do not depend on its batch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

from drkit.dense.encoder import mean_pool
from drkit.dense.layers import additive_mask, bert_layer
from drkit.errors import ConfigError
from drkit.util.hardware import Compute

POOLING = ("mean", "cls")
QUERY_HEADS = ("pooled", "paper")
ENTITY_CONDITIONS = ("learned", "paper", "none")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the question encoder."""

    hops: int = field(default=1, metadata={"help": "number of textual follows T"})
    shared_layers: int = field(default=4, metadata={"help": "transformer layers shared by all hops (paper: 4)"})
    hop_layers: int = field(default=2, metadata={"help": "transformer layers of each hop (paper: 2)"})
    pool: str = field(default="mean", metadata={"help": "mean (as pretrained) or cls (paper) pooling of each hop's layers",
                                                "choices": POOLING})
    query_heads: str = field(default="pooled", metadata={
        "help": "pooled: start and end queries are two projections of the hop's last layer, pooled once; paper: "
                "the start query from the first of the hop's two layers, the end query from the second (H_st, H_en)",
        "choices": QUERY_HEADS})
    entity_condition: str = field(default="learned", metadata={
        "help": "what Z_{t-1} adds to hop t's query: learned U_t^T (Z^T X) (zero at start); paper: Z^T E, E the "
                "mean word embeddings of the names through the pretrained query projections, fixed; none "
                "(a bool in an old manifest reads as learned (true) or none (false))",
        "choices": ENTITY_CONDITIONS})
    train_word_embeddings: bool = field(default=False, metadata={
        "help": "train the question encoder's word embeddings (the entity embeddings follow them); else frozen"})
    learn_tfidf_power: bool = field(default=True, metadata={"help": "learn each hop's TF-IDF weight power (else "
                                    "keep the follow's tfidf_power)"})

    def __post_init__(self):
        if isinstance(self.entity_condition, bool):  # manifests written before the three modes
            object.__setattr__(self, "entity_condition", "learned" if self.entity_condition else "none")
        if self.hops < 1:
            raise ConfigError(f"hops must be at least 1, got {self.hops}")
        if self.shared_layers < 0 or self.hop_layers < 1:
            raise ConfigError("shared_layers must be >= 0 and hop_layers >= 1")
        if self.pool not in POOLING:
            raise ConfigError(f"pool must be one of {POOLING}, got {self.pool!r}")
        if self.query_heads not in QUERY_HEADS:
            raise ConfigError(f"query_heads must be one of {QUERY_HEADS}, got {self.query_heads!r}")
        if self.query_heads == "paper" and self.hop_layers != 2:
            raise ConfigError(f"query_heads 'paper' takes the start query after the first of a hop's two layers "
                              f"and the end query after the second: hop_layers must be 2, got {self.hop_layers}")
        if self.entity_condition not in ENTITY_CONDITIONS:
            raise ConfigError(f"entity_condition must be one of {ENTITY_CONDITIONS}, got {self.entity_condition!r}")


MIN_ROWS = 8  # a (B, in) x (in, out) product with fewer rows runs another kernel on some CPUs (AVX2: under 4)


def rows_alike(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` for a row-wise map `fn` (a linear layer, a product with a matrix) of a 2-D `x`, with `x`
    padded with zero rows to at least `MIN_ROWS` rows and the result cut back: a CPU's matrix kernels sum a
    product of one to three rows in another order than of more, so without it a question's fp32 query would
    change in its last bits with its batch size."""
    if x.shape[0] >= MIN_ROWS:
        return fn(x)
    return fn(torch.cat([x, x.new_zeros(MIN_ROWS - x.shape[0], *x.shape[1:])]))[: x.shape[0]]


class QuestionEncoder(nn.Module):
    def __init__(self, bert_config, dim: int, config: ModelConfig):
        super().__init__()
        from transformers import AutoModel

        cfg = copy.deepcopy(bert_config)
        cfg.num_hidden_layers = config.shared_layers + config.hop_layers
        base = AutoModel.from_config(cfg)
        cfg.num_hidden_layers = config.shared_layers
        self.bert_config = cfg
        self.config = config
        self.embeddings = base.embeddings
        layers = list(base.encoder.layer)
        self.shared = nn.ModuleList(layers[: config.shared_layers])
        template = layers[config.shared_layers:]
        self.hop_layers = nn.ModuleList(nn.ModuleList(copy.deepcopy(l) for l in template) for _ in range(config.hops))
        hidden, half = cfg.hidden_size, dim // 2
        self.start = nn.ModuleList(nn.Linear(hidden, half, bias=False) for _ in range(config.hops))
        self.end = nn.ModuleList(nn.Linear(hidden, half, bias=False) for _ in range(config.hops))
        # U_t: kept in every model (a saved model holds it whatever entity_condition says); learned only then
        self.entity = nn.ModuleList(nn.Linear(hidden, dim, bias=False) for _ in range(config.hops))
        for lin in self.entity:
            nn.init.zeros_(lin.weight)
            lin.weight.requires_grad_(config.entity_condition == "learned")
        if config.entity_condition == "paper":
            # P (hidden, p) of E = X P: fixed. A seeded orthonormal map until `init_from` sets the pretrained heads.
            gen = torch.Generator().manual_seed(0)
            proj = torch.linalg.qr(torch.randn(hidden, half, generator=gen))[0]
            self.register_buffer("entity_projection", torch.cat([proj, proj], dim=1))  # (hidden, 2 * half)

    def init_from(self, encoder) -> list[str]:
        """Copy the pretrained query encoder of a `DualEncoder`; returns what stayed randomly initialised."""
        qm = encoder.query_model
        self.embeddings.load_state_dict(qm.embeddings.state_dict())
        source = list(qm.encoder.layer)
        random = []
        for i, layer in enumerate(self.shared):
            if i < len(source):
                layer.load_state_dict(source[i].state_dict())
            else:
                random.append(f"shared layer {i}")
        for t, hop in enumerate(self.hop_layers):
            for j, layer in enumerate(hop):
                k = len(self.shared) + j
                if k < len(source):
                    layer.load_state_dict(source[k].state_dict())
                else:
                    random.append(f"hop {t + 1} layer {j}")
            self.start[t].load_state_dict(encoder.query_start.state_dict())
            self.end[t].load_state_dict(encoder.query_end.state_dict())
        if self.config.entity_condition == "paper":
            with torch.no_grad():  # P = [V_st ; V_en]^T of the pretrained query encoder, fixed from now on
                self.entity_projection.copy_(torch.cat([encoder.query_start.weight, encoder.query_end.weight], 0).T)
        return random

    def encode(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(input_ids=input_ids)
        ext = additive_mask(mask)
        for layer in self.shared:
            h = bert_layer(layer, h, ext)
        return h

    def _pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return h[:, 0] if self.config.pool == "cls" else mean_pool(h, mask)

    def hop_query(self, h: torch.Tensor, mask: torch.Tensor, t: int, z_embedding: torch.Tensor | None) -> torch.Tensor:
        """g_t (B, p) float32 of hop t (0-based) from the shared layers' output h (B, L, hidden), the mask
        (B, L) and ``Z_{t-1}^T X`` (B, hidden), X the entities' mean word embeddings (None: no conditioning)."""
        return self.condition(self.hop_base(h, mask, t), t, z_embedding)

    def hop_base(self, h: torch.Tensor, mask: torch.Tensor, t: int) -> torch.Tensor:
        """The part of g_t that does not depend on Z_{t-1}: hop t's layers over h, pooled, through its start and end
        queries, (B, p) float32 (`hop_query` adds Z_{t-1}'s term to it)."""
        ext = additive_mask(mask)
        after = []  # the output of each of the hop's layers, (B, L, hidden)
        for layer in self.hop_layers[t]:
            h = bert_layer(layer, h, ext)
            after.append(h)
        if self.config.query_heads == "paper":
            start_in, end_in = self._pool(after[0], mask), self._pool(after[1], mask)  # H_st, H_en: (B, hidden)
        else:
            start_in = end_in = self._pool(h, mask)
        return torch.cat([rows_alike(self.start[t], start_in), rows_alike(self.end[t], end_in)], dim=-1).float()  # (B, p)

    def condition(self, g: torch.Tensor, t: int, z_embedding: torch.Tensor | None) -> torch.Tensor:
        """`g` (`hop_base`) plus the term of ``Z_{t-1}^T X`` that ``entity_condition`` says (none: `g` itself)."""
        if z_embedding is not None:
            if self.config.entity_condition == "learned":
                g = g + rows_alike(self.entity[t], z_embedding.to(self.entity[t].weight.dtype)).float()
            elif self.config.entity_condition == "paper":
                g = g + rows_alike(lambda x: x @ self.entity_projection, z_embedding.float()).float()  # Z^T E = (Z^T X) P
        return g


@dataclass
class EncodedQuestions:
    """A batch of questions through the shared layers, in groups of equal padded width (`length_groups`)."""

    hs: list[torch.Tensor]  # per group, (b_g, width_g, hidden)
    masks: list[torch.Tensor]  # per group, (b_g, width_g)
    groups: list[torch.Tensor]  # per group, its batch rows
    inverse: torch.Tensor  # (B,) rows of the concatenated groups -> batch order
    compute: Compute  # drkit.util.hardware: the precision (and device) they were computed in
    # hop t -> each group's `QuestionEncoder.hop_base` (which does not depend on Z_{t-1}): computed once for these
    # questions however many times hop t runs from other entity sets (the entity answer's pass after the
    # passages'); a copy made by dataclasses.replace (other hs) starts empty
    hop_bases: dict = field(default_factory=dict, init=False, repr=False)


PAD_MULTIPLE = 8  # question time pads each question to a multiple of this many pieces, whatever its batch


def length_groups(mask: torch.Tensor, multiple: int = PAD_MULTIPLE) -> tuple[list[torch.Tensor], list[int]]:
    """Rows of a right-padded batch grouped by their length rounded up to `multiple`, and each group's width.

    A row is then computed at a width that depends on the row alone, never on the longest question of
    its batch: the width changes the roundings of the attention (in bf16 most) and so the question's vectors."""
    width = (mask.sum(1) + multiple - 1) // multiple * multiple  # (B,)
    values = torch.unique(width)
    return [torch.nonzero(width == w).squeeze(1) for w in values], [int(w) for w in values]
