"""The DrKIT model (paper, 2.2 and Appendix A): a question encoder and T textual follows.

The question is encoded once by the first `shared_layers` transformer layers (initialised from the
pretrained query encoder, as in the paper). Each hop t has its own `hop_layers` layers on top of
that, pooled into a start query and an end query projected by V_t:
``g~_t(q) = [V_st,t^T h_t ; V_en,t^T h_t]``, and the hop is conditioned on where it starts from:
``g_t(q, Z_{t-1}) = g~_t(q) + U_t^T (Z_{t-1}^T E)``, where row e of E is the average of the word
embeddings of entity e's name (frozen, so E costs no parameters) and U_t is learned (zero at start).
Then ``Z_t = follow(Z_{t-1}, g_t)`` (`drkit.reason.follow`); Z_0 is the question entity.

Initialisation: with the pretrained 6-layer query encoder, the shared layers are its layers 1-4 and
every hop's two layers are copies of its layers 5-6, with its start/end projections and its mean
pooling. So before any training each hop's query is exactly the pretrained slot-filling query of the
question text (a test checks this), and training starts from a working single-hop reader. The paper
instead pools [CLS] and takes the start query after the first added layer and the end query after
the second; ``pool="cls"`` gives its pooling.

A model is saved as a directory (format ``drkit.model``): ``model.safetensors``, the transformer's
``config.json``, ``tokenizer/`` and ``manifest.json`` (model and follow settings, and the mention
index and sparse index it was trained with).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drkit.dense.encoder import load_weights, mean_pool
from drkit.errors import ConfigError
from drkit.reason.entity_set import EntitySet, entity_set_mean
from drkit.reason.follow import FollowConfig, FollowTrace, follow
from drkit.util.artifact import ArtifactWriter, read_manifest

FORMAT = "drkit.model"
FORMAT_VERSION = 1
POOLING = ("mean", "cls")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the question encoder."""

    hops: int = field(default=1, metadata={"help": "number of textual follows T"})
    shared_layers: int = field(default=4, metadata={"help": "transformer layers shared by all hops (paper: 4)"})
    hop_layers: int = field(default=2, metadata={"help": "transformer layers of each hop (paper: 2)"})
    pool: str = field(default="mean", metadata={"help": "mean (as pretrained) or cls (paper) pooling of each hop's layers"})
    entity_condition: bool = field(default=True, metadata={"help": "add U_t^T (Z_{t-1}^T E) to each hop's query"})
    learn_tfidf_power: bool = field(default=True, metadata={"help": "learn each hop's TF-IDF weight power (else "
                                    "keep the follow's tfidf_power)"})

    def __post_init__(self):
        if self.hops < 1:
            raise ConfigError(f"hops must be at least 1, got {self.hops}")
        if self.shared_layers < 0 or self.hop_layers < 1:
            raise ConfigError("shared_layers must be >= 0 and hop_layers >= 1")
        if self.pool not in POOLING:
            raise ConfigError(f"pool must be one of {POOLING}, got {self.pool!r}")


def _extended_mask(mask: torch.Tensor) -> torch.Tensor:
    """(B, L) 0/1 -> (B, 1, 1, L) additive mask, as BERT layers take it."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


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
        self.entity = nn.ModuleList(nn.Linear(hidden, dim, bias=False) for _ in range(config.hops))
        for lin in self.entity:
            nn.init.zeros_(lin.weight)

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
        return random

    def encode(self, input_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embeddings(input_ids=input_ids)
        ext = _extended_mask(mask)
        for layer in self.shared:
            h = layer(h, ext)
        return h

    def hop_query(self, h: torch.Tensor, mask: torch.Tensor, t: int, z_embedding: torch.Tensor | None) -> torch.Tensor:
        ext = _extended_mask(mask)
        for layer in self.hop_layers[t]:
            h = layer(h, ext)
        if self.config.pool == "cls":
            pooled = h[:, 0]
        else:
            pooled = mean_pool(h, mask)
        g = torch.cat([self.start[t](pooled), self.end[t](pooled)], dim=-1).float()
        if z_embedding is not None and self.config.entity_condition:
            g = g + self.entity[t](z_embedding.to(self.entity[t].weight.dtype)).float()
        return g


@dataclass
class EncodedQuestions:
    """A batch of questions through the shared layers, in groups of equal padded width (`length_groups`)."""

    hs: list[torch.Tensor]  # per group, (b_g, width_g, hidden)
    masks: list[torch.Tensor]  # per group, (b_g, width_g)
    groups: list[torch.Tensor]  # per group, its batch rows
    inverse: torch.Tensor  # (B,) rows of the concatenated groups -> batch order
    bf16: bool


@dataclass
class HopOutput:
    z: EntitySet  # Z_t
    query: torch.Tensor  # g_t, (B, p)
    trace: FollowTrace | None


PAD_MULTIPLE = 8  # question time pads each question to a multiple of this many pieces, whatever its batch


def length_groups(mask: torch.Tensor, multiple: int = PAD_MULTIPLE) -> tuple[list[torch.Tensor], list[int]]:
    """Rows of a right-padded batch grouped by their length rounded up to `multiple`, and each group's width.

    A row is then computed at a width that depends on the row alone, never on the longest question of
    its batch: in bf16 the width changes the roundings of the attention and so the question's vectors."""
    width = (mask.sum(1) + multiple - 1) // multiple * multiple  # (B,)
    values = torch.unique(width)
    return [torch.nonzero(width == w).squeeze(1) for w in values], [int(w) for w in values]


def model_dir_of(path: str | Path) -> Path:
    """A model directory, or a ``drkit train`` run directory holding its best model in ``model/``."""
    path = Path(path)
    if not (path / "model.safetensors").exists() and (path / "model" / "model.safetensors").exists():
        return path / "model"
    return path


class MultiHopModel(nn.Module):
    """Question encoder + textual follows. `forward` needs a `drkit.reason.vkb.VirtualKB` to follow in."""

    def __init__(self, config: ModelConfig, follow_config: FollowConfig, bert_config, dim: int, tokenizer,
                 max_question_pieces: int = 48):
        super().__init__()
        self.config = config
        self.follow_config = follow_config
        self.dim = dim
        self.tokenizer = tokenizer
        self.max_question_pieces = max_question_pieces
        self.encoder = QuestionEncoder(bert_config, dim, config)
        self.encoder.embeddings.word_embeddings.weight.requires_grad_(False)  # E is built from them
        self.tfidf_power = nn.Parameter(torch.full((config.hops,), float(follow_config.tfidf_power)),
                                        requires_grad=config.learn_tfidf_power)
        self.register_buffer("entity_table", torch.zeros(0, bert_config.hidden_size), persistent=False)
        self.manifest: dict = {}

    @classmethod
    def from_encoder(cls, encoder, config: ModelConfig = ModelConfig(), follow_config: FollowConfig = FollowConfig()):
        """A new model whose question encoder starts from a pretrained `DualEncoder`'s query encoder."""
        model = cls(config, follow_config, encoder.query_model.config, encoder.config.dim, encoder.tokenizer,
                    encoder.config.max_query_pieces)
        model.random_init = model.encoder.init_from(encoder)
        return model

    def init_from_model(self, other: "MultiHopModel") -> list[str]:
        """Warm start from a trained model with the same encoder shape (a curriculum: a 2-hop model from a
        1-hop one, a 3-hop model from a 2-hop one). Embeddings and shared layers are copied; hop t copies
        the other model's hop t, or its last hop where it has fewer. Returns, per hop, where it came from."""
        mine, theirs = self.encoder, other.encoder
        if (self.dim, self.config.shared_layers, self.config.hop_layers) != (other.dim, other.config.shared_layers,
                                                                              other.config.hop_layers):
            raise ConfigError(f"cannot start from a model of another shape: dim/shared/hop layers "
                              f"{other.dim}/{other.config.shared_layers}/{other.config.hop_layers}, this model "
                              f"{self.dim}/{self.config.shared_layers}/{self.config.hop_layers}")
        if other.tokenizer.get_vocab() != self.tokenizer.get_vocab():
            raise ConfigError("cannot start from a model with another tokenizer vocabulary")
        mine.embeddings.load_state_dict(theirs.embeddings.state_dict())
        mine.shared.load_state_dict(theirs.shared.state_dict())
        sources = []
        for t in range(self.config.hops):
            s = min(t, other.config.hops - 1)
            for part in ("hop_layers", "start", "end", "entity"):
                getattr(mine, part)[t].load_state_dict(getattr(theirs, part)[s].state_dict())
            with torch.no_grad():
                self.tfidf_power[t] = other.tfidf_power[s]
            sources.append(f"hop {t + 1} <- hop {s + 1}")
        return sources

    def set_entities(self, names: list[str]) -> None:
        """E: row e is the mean word embedding of the pieces of entity e's name (zero for an empty name)."""
        pieces = self.tokenizer(list(names), add_special_tokens=False)["input_ids"]
        lengths = torch.tensor([len(p) for p in pieces])
        flat = torch.tensor([i for p in pieces for i in p], dtype=torch.long)
        rows = torch.repeat_interleave(torch.arange(len(pieces)), lengths)
        with torch.no_grad():
            words = self.encoder.embeddings.word_embeddings.weight
            table = torch.zeros(len(pieces), words.shape[1]).index_add(0, rows, words[flat].float())
            self.entity_table = table / lengths.clamp_min(1).unsqueeze(1).float()

    def tokenize(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_question_pieces,
                           pad_to_multiple_of=PAD_MULTIPLE, return_tensors="pt", return_token_type_ids=False)
        return b["input_ids"], b["attention_mask"]

    def encode(self, texts: list[str], bf16: bool = True) -> "EncodedQuestions":
        """The shared layers over a batch of questions, computed once for all hops."""
        ids, mask = self.tokenize(texts)
        # At question time each question is padded to its own length rounded up to PAD_MULTIPLE, not to the
        # longest of its batch: its bf16 vectors would otherwise change with the batch (other shapes, roundings).
        if self.tokenizer.padding_side != "right":
            raise ConfigError(f"the question tokenizer pads on the {self.tokenizer.padding_side}; drkit needs right padding")
        groups, width = length_groups(mask) if not self.training else ([torch.arange(len(texts))], [mask.shape[1]])
        inverse = torch.argsort(torch.cat(groups))  # rows of the concatenated groups -> batch rows
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            hs = [self.encoder.encode(ids[g, :w], mask[g, :w]) for g, w in zip(groups, width)]
        return EncodedQuestions(hs, [mask[g, :w] for g, w in zip(groups, width)], groups, inverse, bf16)

    def pooled(self, enc: "EncodedQuestions") -> torch.Tensor:
        """(B, hidden) float32: the mean of each question's shared-layer outputs over its pieces, batch order."""
        return torch.cat([mean_pool(h, m).float() for h, m in zip(enc.hs, enc.masks)])[enc.inverse]

    def hop_queries(self, enc: "EncodedQuestions", t: int, z: EntitySet) -> torch.Tensor:
        """g_t(q, Z_{t-1}): (B, p) float32 queries of hop t (0-based) from the encoded questions and Z_{t-1}."""
        z_emb = entity_set_mean(z, self.entity_table) if self.config.entity_condition else None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enc.bf16):
            q = torch.cat([self.encoder.hop_query(h, m, t, None if z_emb is None else z_emb[g])
                           for h, m, g in zip(enc.hs, enc.masks, enc.groups)])[enc.inverse]
        return q.float()

    def removed_at(self, t: int, hops: int, topic: np.ndarray, fc: FollowConfig) -> np.ndarray | None:
        """The question entities hop t (0-based) of `hops` drops from its output, as `fc.remove_topic` says."""
        if fc.remove_topic == "every" or (fc.remove_topic == "last" and t == hops - 1):
            return topic
        return None

    def forward(self, texts: list[str], topic: np.ndarray, vkb, hops: int | None = None, trace: bool = False,
                bf16: bool = True, follow_config: FollowConfig | None = None, z0: EntitySet | None = None) -> list[HopOutput]:
        """Answer a batch: `texts` (questions), `topic[b]` the entity id of Z_0 for row b (-1: none).

        `z0`, when given, is Z_0 instead of the one-hot `topic` (a weighted set of linked entities, say);
        `topic` then only names the entity each row's hops drop (``remove_topic``), -1 for none.
        Returns one `HopOutput` per hop; the last one's ``z`` is the answer distribution."""
        hops = hops or self.config.hops
        if hops > self.config.hops:
            raise ConfigError(f"this model has {self.config.hops} trained hops; cannot run {hops}")
        if len(self.entity_table) != vkb.graph.n_entities:
            raise ConfigError(f"the model's entity table has {len(self.entity_table)} rows but the index has "
                              f"{vkb.graph.n_entities} entities; call set_entities with the index's names")
        fc = follow_config or self.follow_config
        topic = np.asarray(topic, dtype=np.int64)
        enc = self.encode(texts, bf16)
        z = EntitySet.one_hot(topic) if z0 is None else z0
        out = []
        for t in range(hops):
            q = self.hop_queries(enc, t, z)  # (B, p)
            power = self.tfidf_power[t].clamp_min(0) if self.config.learn_tfidf_power else None
            result = follow(z, q, vkb.graph, vkb.search, fc, self.removed_at(t, hops, topic, fc), trace=trace,
                            tfidf_power=power)
            z, tr = result if trace else (result, None)
            out.append(HopOutput(z, q, tr))
        return out

    # -- persistence ------------------------------------------------------------------------
    def save(self, out: str | Path, overwrite: bool = False, extra_manifest: dict | None = None) -> None:
        from safetensors.torch import save_file

        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            state = {k: v.detach().contiguous().clone() for k, v in self.state_dict().items()}
            save_file(state, str(w.path("model.safetensors")))
            self.encoder.bert_config.to_json_file(str(w.path("config.json")))
            self.tokenizer.save_pretrained(str(w.path("tokenizer")))
            w.manifest.update(model=asdict(self.config), follow=asdict(self.follow_config), dim=self.dim,
                              max_question_pieces=self.max_question_pieces,
                              parameters=sum(p.numel() for p in self.parameters()), **(extra_manifest or {}))

    @classmethod
    def load(cls, path: str | Path) -> "MultiHopModel":
        from transformers import AutoConfig, AutoTokenizer

        path = Path(path)
        manifest = read_manifest(path, FORMAT, FORMAT_VERSION)
        bert_config = AutoConfig.from_pretrained(str(path), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"), local_files_only=True)
        model = cls(ModelConfig(**manifest["model"]), FollowConfig(**manifest["follow"]), bert_config,
                    manifest["dim"], tokenizer, manifest["max_question_pieces"])
        load_weights(model, path / "model.safetensors", "the model")
        model.manifest = manifest
        return model.eval()
