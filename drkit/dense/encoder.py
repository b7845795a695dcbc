"""The mention encoder f(m) and the slot-filling query encoder g(q), pretrained together (paper, 2.3).

Mention side: a transformer over each passage (``[CLS] pieces [SEP]``), then two linear maps of
its hidden states, ``f_st(i) = W_st^T H_i`` and ``f_en(j) = W_en^T H_j``; a mention spanning word
pieces i..j is ``f(m) = [f_st(i) ; f_en(j)]`` (the paper's ``W^T [H_i ; H_j]`` with a block-diagonal
W). Query side: a second transformer (its first `query_layers` layers are what the DrKIT question
encoder starts from), mean-pooled, then two linear maps to a start query and an end query,
``g(q) = [g_st ; g_en]``. So ``f(m) . g(q) = f_st(i) . g_st + f_en(j) . g_en``: a span's start
score plus its end score, which is what pretraining optimises and what MIPS ranks.

Both projections start from one random orthogonal matrix P (hidden -> dim/2), so the encoder before
pretraining scores ``pool(q)^T P P^T (H_i + H_j)``: the base model's own similarity, seen through a
random projection. That is the "not pretrained" baseline.

An encoder is saved as a directory (format ``drkit.encoder``): ``model.safetensors`` (all weights),
the two transformers' ``config.json`` files, the tokenizer files, and ``manifest.json``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drkit.data.tokenizer import DEFAULT_ENCODER, encoder_path
from drkit.dense.layers import hidden_states
from drkit.errors import ArtifactError, ConfigError
from drkit.util.artifact import ArtifactWriter, read_manifest
from drkit.util.hardware import choose

FORMAT = "drkit.encoder"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class EncoderConfig:
    """Shape of the mention and query encoders."""

    base: str = field(default=DEFAULT_ENCODER, metadata={"help": "pretrained transformer: the packaged "
                      "all-MiniLM-L6-v2 or a folder with config.json, weights and tokenizer"})
    dim: int = field(default=256, metadata={"help": "size p of f(m) and g(q); half for the start, half for the end"})
    query_layers: int = field(default=0, metadata={"help": "transformer layers of the query encoder (0: all of the base model's)"})
    max_query_pieces: int = field(default=48, metadata={"help": "longest query in word pieces (longer ones are cut)"})
    init_seed: int = field(default=0, metadata={"help": "seed of the initial projections"})

    def __post_init__(self):
        if self.dim < 2 or self.dim % 2:
            raise ConfigError(f"dim must be a positive even number (start half + end half), got {self.dim}")
        if self.query_layers < 0 or self.max_query_pieces < 3:
            raise ConfigError("query_layers must be >= 0 and max_query_pieces >= 3")


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of each row's unmasked vectors: hidden (B, L, H), mask (B, L) 0/1 -> (B, H).

    ``pooled[b] = sum_l mask[b, l] hidden[b, l] / max(1, sum_l mask[b, l])`` (a fully masked row gives 0).
    The query encoder's pooling, and the question encoder's (``drkit.reason.model``) that starts from it."""
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, L, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1)


def load_transformer(path: Path, **overrides):
    """The safetensors transformer in `path`; `overrides`: settings of its config to change (e.g. a dropout)."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # drkit shows its own progress
    try:
        # safetensors only: a folder holding just pytorch_model.bin (a pickle) is refused, not unpickled
        return AutoModel.from_pretrained(str(path), local_files_only=True, use_safetensors=True, **overrides)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load a transformer from {path}: {exc}") from exc


def unset_weights():
    """A context in which transformers and torch layers are built without their random initial weights,
    for a module whose every weight `load_weights` then replaces (drawing them costs about 0.3 s a MiniLM
    on 2 cores, for nothing); transformers' `no_init_weights`."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


def load_weights(module: nn.Module, file: Path, what: str) -> None:
    """Load a safetensors state dict into `module`; any missing or unexpected tensor is an error
    (BERT's position_ids buffer, which some versions do not save, excepted)."""
    from safetensors.torch import load_file

    missing, unexpected = module.load_state_dict(load_file(str(file)), strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise ArtifactError(f"{file} does not match {what}: missing {missing[:5]}, unexpected {unexpected[:5]}")


class DualEncoder(nn.Module):
    """Mention encoder and query encoder, with the learned "no answer" logits used in pretraining."""

    def __init__(self, config: EncoderConfig, passage_model: nn.Module, query_model: nn.Module, tokenizer):
        super().__init__()
        self.config = config
        self.passage_model = passage_model
        self.query_model = query_model
        self.tokenizer = tokenizer
        hidden = passage_model.config.hidden_size
        half = config.dim // 2
        if half > hidden:
            raise ConfigError(f"dim/2 = {half} exceeds the transformer's hidden size {hidden}")
        self.mention_start = nn.Linear(hidden, half, bias=False)
        self.mention_end = nn.Linear(hidden, half, bias=False)
        self.query_start = nn.Linear(hidden, half, bias=False)
        self.query_end = nn.Linear(hidden, half, bias=False)
        # A span outscores "no answer" when its start (end) logit beats these, whatever the passage.
        self.null_start = nn.Parameter(torch.zeros(()))
        self.null_end = nn.Parameter(torch.zeros(()))
        gen = torch.Generator().manual_seed(config.init_seed)
        proj = torch.linalg.qr(torch.randn(hidden, half, generator=gen))[0]  # orthonormal columns
        with torch.no_grad():
            for lin in (self.mention_start, self.mention_end, self.query_start, self.query_end):
                lin.weight.copy_(proj.T)

    # -- construction and persistence -------------------------------------------------------
    @classmethod
    def from_base(cls, config: EncoderConfig = EncoderConfig(), **overrides) -> "DualEncoder":
        """A new (not pretrained) encoder from the base transformer; `overrides`: settings of the base's config to
        change (`load_transformer`), in both transformers."""
        from drkit.data.tokenizer import load_tokenizer

        path = encoder_path(config.base)
        passage_model = load_transformer(path, **overrides)
        query_model = copy.deepcopy(passage_model)
        n_layers = query_model.config.num_hidden_layers
        if config.query_layers:
            if config.query_layers > n_layers:
                raise ConfigError(f"query_layers={config.query_layers} but the base model has {n_layers} layers")
            query_model.encoder.layer = query_model.encoder.layer[: config.query_layers]
            query_model.config.num_hidden_layers = config.query_layers
        return cls(config, passage_model, query_model, load_tokenizer(config.base))

    def save(self, out: str | Path, overwrite: bool = False, extra_manifest: dict | None = None) -> None:
        from safetensors.torch import save_file

        from drkit.data.tokenizer import tokenizer_fingerprint

        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            state = {k: v.detach().contiguous().clone() for k, v in self.state_dict().items()}
            save_file(state, str(w.path("model.safetensors")))
            for name, model in (("passage", self.passage_model), ("query", self.query_model)):
                w.path(name).mkdir()
                model.config.to_json_file(str(w.path(f"{name}/config.json")))
            self.tokenizer.save_pretrained(str(w.path("tokenizer")))
            w.manifest.update(config=asdict(self.config), tokenizer=tokenizer_fingerprint(self.config.base),
                              parameters=sum(p.numel() for p in self.parameters()), **(extra_manifest or {}))

    @classmethod
    def load(cls, path: str | Path) -> "DualEncoder":
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        path = Path(path)
        manifest = read_manifest(path, FORMAT, FORMAT_VERSION)
        config = EncoderConfig(**manifest["config"])
        models = []
        for name in ("passage", "query"):
            cfg = AutoConfig.from_pretrained(str(path / name), local_files_only=True)
            with unset_weights():
                models.append(AutoModel.from_config(cfg))
        tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"), local_files_only=True)
        enc = cls(config, models[0], models[1], tokenizer)
        load_weights(enc, path / "model.safetensors", "the encoder")
        enc.manifest = manifest
        return enc.eval()

    # -- encoding -----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where the weights are (inputs are moved there; vectors come back on the CPU)."""
        return self.mention_start.weight.device

    def passage_batch(self, pieces: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """``[CLS] pieces [SEP]`` for each passage, right-padded: (input_ids, attention_mask), (P, L+2).

        Word piece k of a passage is at position k + 1."""
        tok = self.tokenizer
        longest = max((len(p) for p in pieces), default=0) + 2
        limit = self.passage_model.config.max_position_embeddings
        if longest > limit:
            raise ConfigError(f"a passage has {longest - 2} word pieces; the encoder takes at most {limit - 2}")
        ids = torch.full((len(pieces), longest), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(pieces), longest), dtype=torch.long)
        for r, p in enumerate(pieces):
            n = len(p)
            ids[r, 0] = tok.cls_token_id
            ids[r, 1 : n + 1] = torch.from_numpy(np.asarray(p, dtype=np.int64))
            ids[r, n + 1] = tok.sep_token_id
            mask[r, : n + 2] = 1
        return ids, mask

    def encode_passages(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Start and end vectors of every position: two (P, L, dim/2) tensors."""
        h = hidden_states(self.passage_model, input_ids.to(self.device), attention_mask.to(self.device))
        return self.mention_start(h), self.mention_end(h)

    def encode_passages_grouped(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                group_tokens: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
        """`encode_passages` of a right-padded batch, computed over groups of passages of similar length, each
        group cut to its own longest passage: two (P, L, dim/2) tensors in the batch's order, zero past each
        group's width (positions the mask leaves out either way). A batch whose passages differ in length (a
        pretraining step's: most of its positions were padding) costs the transformer its real tokens, not
        P x L. A group holds at most `group_tokens` padded positions (at least one passage)."""
        lengths = attention_mask.sum(1)
        order = torch.argsort(lengths, stable=True)
        groups, group, width = [], [], 0
        for p in order.tolist():
            w = max(width, int(lengths[p]))
            if group and w * (len(group) + 1) > group_tokens:
                groups.append((group, width))
                group, w = [], int(lengths[p])
            group.append(p)
            width = w
        if group:
            groups.append((group, width))
        L = input_ids.shape[1]
        starts, ends = [], []
        for rows, w in groups:
            s, e = self.encode_passages(input_ids[rows, :w], attention_mask[rows, :w])
            starts.append(torch.nn.functional.pad(s, (0, 0, 0, L - w)))
            ends.append(torch.nn.functional.pad(e, (0, 0, 0, L - w)))
        back = torch.argsort(torch.tensor([p for rows, _ in groups for p in rows])).to(self.device)  # batch order
        return torch.cat(starts)[back], torch.cat(ends)[back]

    def query_batch(self, texts: list[str]) -> dict:
        return self.tokenizer(texts, padding=True, truncation=True, max_length=self.config.max_query_pieces,
                              return_tensors="pt", return_token_type_ids=False)

    def encode_queries(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Start and end queries: two (Q, dim/2) tensors, from the mean of the query's hidden states."""
        attention_mask = attention_mask.to(self.device)
        h = hidden_states(self.query_model, input_ids.to(self.device), attention_mask)
        pooled = mean_pool(h, attention_mask)
        return self.query_start(pooled), self.query_end(pooled)

    @torch.no_grad()
    def embed_queries(self, texts: list[str], precision: str = "auto") -> np.ndarray:
        """``g(q) = [g_st ; g_en]`` for each text: (Q, dim) float32. `precision`: `drkit.util.hardware.PRECISIONS`."""
        batch = self.query_batch(list(texts))
        with choose(precision, self.device.type).autocast():
            qs, qe = self.encode_queries(batch["input_ids"], batch["attention_mask"])
        return torch.cat([qs, qe], dim=-1).float().cpu().numpy()

    @torch.no_grad()
    def embed_mentions(self, pieces: list[np.ndarray], starts: list[np.ndarray], ends: list[np.ndarray],
                       precision: str = "auto") -> list[np.ndarray]:
        """``f(m)`` for the mentions of a batch of passages: for passage r, (len(starts[r]), dim) float32.

        `starts[r]` / `ends[r]` are word-piece positions within the passage (without [CLS]), inclusive."""
        ids, mask = self.passage_batch(pieces)
        with choose(precision, self.device.type).autocast():
            fs, fe = self.encode_passages(ids, mask)
        fs, fe = fs.float().cpu(), fe.float().cpu()
        out = []
        for r, (s, e) in enumerate(zip(starts, ends)):
            s = torch.as_tensor(np.asarray(s, dtype=np.int64)) + 1
            e = torch.as_tensor(np.asarray(e, dtype=np.int64)) + 1
            out.append(torch.cat([fs[r, s], fe[r, e]], dim=-1).numpy())
        return out

