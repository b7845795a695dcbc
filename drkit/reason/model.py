"""The DrKIT model (paper, 2.2 and Appendix A): a question encoder and T textual follows.

The question is encoded once by the first `shared_layers` transformer layers (initialised from the
pretrained query encoder, as in the paper). Each hop t has its own `hop_layers` layers on top of
that, and its start and end queries come from them (``query_heads``):

* ``pooled`` (default): the output of the hop's last layer is pooled once (``pool``: mean, as pretrained,
  or [CLS]) and projected twice, ``g~_t(q) = [V_st,t^T h_t ; V_en,t^T h_t]``.
* ``paper``: the paper's heads. The hop has two layers; the pooled output after the first is ``H_st``,
  the pooled output after the second (on top of the first) is ``H_en``, and
  ``g~_t(q) = V^T [H_st ; H_en] = [V_st,t^T H_st ; V_en,t^T H_en]`` (V block-diagonal: start and end
  halves, as the mention side's W). With ``pool="cls"`` this is the paper's encoder exactly. (The
  released TensorFlow code puts the two layers side by side, each on H^q; the paper's text and this
  option stack them.)

The hop is conditioned on where it starts from (``entity_condition``), through ``Z_{t-1}^T X`` where
row e of X (|E| x hidden) is the average of the word embeddings of the pieces of entity e's name:

* ``learned`` (default): ``g_t = g~_t + U_t^T (Z_{t-1}^T X)``, U_t (hidden x p) learned, zero at start.
* ``paper``: ``g_t = g~_t + Z_{t-1}^T E`` with ``E = X P`` in R^{|E| x p}: the paper's entity embeddings
  when the encoder's hidden size is not p. P (hidden x p) is fixed, not learned: ``[V_st ; V_en]^T`` of the
  pretrained query encoder, frozen at their pretrained values (a buffer saved with the model). So E
  costs no parameters, as the paper wants, and before training (``pooled`` heads) the query is
  ``V^T (h + Z^T X)``: the entity's name embedding added to the pooled question state.
* ``none``: ``g_t = g~_t``.

Word embeddings are frozen by default. With ``train_word_embeddings`` they train with the encoder
(the paper does not say they are frozen), and X follows them: in training it is recomputed from the
current word embeddings at every forward pass (differentiable: its gradient reaches the word
embeddings of the entities' names). X is never stored whole (|E| x hidden floats: 8 GB at the paper's
5.2M entities): the rows of Z's entities are computed when read, from the current word embeddings and
the pieces of the names (`set_entities`). Then ``Z_t = follow(Z_{t-1}, g_t)``
(`drkit.reason.follow`); Z_0 is the question entity.

Initialisation: with the pretrained 6-layer query encoder, the shared layers are its layers 1-4 and
every hop's two layers are copies of its layers 5-6, with its start/end projections and its mean
pooling. So before any training each hop's ``pooled`` query is exactly the pretrained slot-filling
query of the question text (a test checks this), and training starts from a working single-hop
reader. With ``paper`` heads that cannot hold: the end query starts as the pretrained end query (mean
pooling) while the start query starts as the pretrained start projection of the mean output of layer
5, not 6; with ``pool="cls"`` both halves start from [CLS] states the query encoder was never trained
to pool (tests check what each starts as).

A model is saved as a directory (format ``drkit.model``): ``model.safetensors``, the transformer's
``config.json``, ``tokenizer/`` and ``manifest.json`` (model and follow settings, and the mention
index and sparse index it was trained with). A manifest written before the options above loads as
the model it was: ``entity_condition`` true -> learned, false -> none; missing fields take their
defaults (the behaviour of that time).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drkit.dense.encoder import load_weights, mean_pool, unset_weights
from drkit.errors import ConfigError
from drkit.index.csr import concat_ranges
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig, FollowTrace, follow
from drkit.reason.question_encoder import (  # noqa: F401  (ModelConfig is imported from here too)
    PAD_MULTIPLE,
    EncodedQuestions,
    ModelConfig,
    QuestionEncoder,
    length_groups,
)
from drkit.util.artifact import ArtifactWriter, read_manifest
from drkit.util.hardware import choose

FORMAT = "drkit.model"
FORMAT_VERSION = 1
NAME_BLOCK = 1 << 16  # entity names tokenized at a time (`set_entities`)
DENSE_NAME_PIECES = 100  # Z^T X as (Z^T N) W once Z's names hold more than B x V / this many pieces (`entity_embedding`)
@dataclass
class HopOutput:
    z: EntitySet  # Z_t
    query: torch.Tensor  # g_t, (B, p)
    trace: FollowTrace | None


def model_dir_of(path: str | Path) -> Path:
    """A model directory, or a ``drkit train`` run directory holding its best model in ``model/``."""
    path = Path(path)
    if not (path / "model.safetensors").exists() and (path / "model" / "model.safetensors").exists():
        return path / "model"
    return path


def _plain_backend(tokenizer):
    """A copy of a fast tokenizer's backend that neither truncates nor pads (the state the tokenizer's own call
    sets for ``add_special_tokens=False`` without truncation); its `encode_batch` gives the same pieces without
    the call's per-text Python conversions. None for a slow tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is None:
        return None
    from tokenizers import Tokenizer

    plain = Tokenizer.from_str(backend.to_str())
    plain.no_truncation()
    plain.no_padding()
    return plain


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
        self.encoder.embeddings.word_embeddings.weight.requires_grad_(config.train_word_embeddings)
        self.tfidf_power = nn.Parameter(torch.full((config.hops,), float(follow_config.tfidf_power)),
                                        requires_grad=config.learn_tfidf_power)
        # the word pieces of each entity's name (CSR); X (|E|, hidden), their mean word embeddings, is never
        # stored: the rows of the entities a question touches are computed when read (`entity_rows`)
        self.register_buffer("entity_pieces", torch.zeros(0, dtype=torch.long), persistent=False)
        self.register_buffer("entity_piece_indptr", torch.zeros(1, dtype=torch.long), persistent=False)
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
        if self.config.entity_condition == "paper" and other.config.entity_condition == "paper":
            with torch.no_grad():
                mine.entity_projection.copy_(theirs.entity_projection)
        return sources

    def set_entities(self, names: list[str]) -> None:
        """The entities of the index, by name: X's row e is the mean word embedding of the pieces of entity e's
        name (zero for an empty name). Only the pieces are kept (about 4 integers an entity), not X."""
        names = list(names)
        backend = _plain_backend(self.tokenizer)
        lengths, flat = [], []
        for lo in range(0, len(names), NAME_BLOCK):  # in blocks: the tokenizer's lists of a block at a time
            block = names[lo : lo + NAME_BLOCK]
            pieces = [e.ids for e in backend.encode_batch(block, add_special_tokens=False)] if backend is not None \
                else self.tokenizer(block, add_special_tokens=False)["input_ids"]
            lengths.append(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
            flat.append(np.fromiter(itertools.chain.from_iterable(pieces), dtype=np.int64, count=int(lengths[-1].sum())))
        lengths = torch.from_numpy(np.concatenate(lengths)) if lengths else torch.zeros(0, dtype=torch.long)
        pieces = torch.from_numpy(np.concatenate(flat)) if flat else torch.zeros(0, dtype=torch.long)
        self.entity_pieces = pieces.to(self.device)  # on the model's device, wherever it is when this is called
        self.entity_piece_indptr = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)]).to(self.device)

    @property
    def device(self) -> torch.device:
        """Where the question encoder computes (the follow's sparse part runs on the CPU, its scores on the
        virtual KB's device: `drkit.reason.graph`)."""
        return self.tfidf_power.device

    @property
    def n_entities(self) -> int:
        """Entities given to `set_entities` (0 before)."""
        return len(self.entity_piece_indptr) - 1

    def entity_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """X[ids]: (N, hidden) float32, each entity's mean name-piece embedding from the current word
        embeddings, computed for these entities only (O(N hidden) memory, whatever |E| is). No gradient."""
        with torch.no_grad():
            words = self.encoder.embeddings.word_embeddings.weight
            ids = torch.as_tensor(ids, dtype=torch.long, device=words.device)
            n, slot, piece = self._name_pieces(ids)
            sums = torch.zeros(len(ids), words.shape[1], device=words.device).index_add(0, slot, words[piece].float())
            return sums / n.clamp_min(1).unsqueeze(1).float()

    def _name_pieces(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For entities `ids`: the pieces in each name (N,), and per piece of all their names its position
        in `ids` and its word-piece id (S,) each."""
        lo = self.entity_piece_indptr[ids]
        n = self.entity_piece_indptr[ids + 1] - lo
        slot = torch.repeat_interleave(torch.arange(len(ids), device=ids.device), n)
        at = torch.from_numpy(concat_ranges(lo.cpu().numpy(), n.cpu().numpy())).to(ids.device)
        return n, slot, self.entity_pieces[at]

    @property
    def entity_table(self) -> torch.Tensor:
        """X, all |E| rows (for analysis and tests: question time and training read `entity_rows`)."""
        return self.entity_rows(torch.arange(self.n_entities))

    def entity_embedding(self, z: EntitySet) -> torch.Tensor:
        """``Z^T X``: (B, hidden) float32, X the entities' mean word embeddings, differentiable in Z's probabilities.

        X is read from the current word embeddings, as ``(Z^T N) W`` with N[e, w] = (pieces w in e's name) /
        (pieces in it): so with trained word embeddings and autograd on (the gradient reaches W), and when Z's
        names have more than 1/`DENSE_NAME_PIECES` of B x V pieces (a diffuse Z: one matrix product beats a
        gathered row of W per piece), over the distinct pieces of Z's names; else as the rows of X of Z's entities
        (`entity_rows`)."""
        words = self.encoder.embeddings.word_embeddings.weight  # (V, hidden)
        vocab = words.shape[0]
        z = z.to(words.device)  # the follow's sets are on the CPU; the encoder may be on a GPU
        trained = self.config.train_word_embeddings and torch.is_grad_enabled()
        n_pieces = self.entity_piece_indptr[z.ids + 1] - self.entity_piece_indptr[z.ids] if len(z.ids) else z.ids
        if trained or int(n_pieces.sum()) * DENSE_NAME_PIECES > z.batch_size * vocab:
            # (Z^T N) W: one matrix product, cheaper than gathering a row of W for each of many pieces
            n, slot, piece = self._name_pieces(z.ids)  # (N,) pieces a coordinate's entity; (S,) coordinate, piece
            weight = z.probs.float()[slot] / n[slot].float()  # (S,)
            # only the columns of N that Z's names use: (B, U) @ W[used], U <= V distinct pieces (the gather
            # passes the gradient on to those rows of W when the word embeddings are trained)
            used, column = torch.unique(piece, return_inverse=True)
            zn = torch.zeros(z.batch_size * len(used), device=words.device).index_add(
                0, z.rows[slot] * len(used) + column, weight)
            return zn.view(z.batch_size, len(used)) @ (words if trained else words.detach())[used].float()
        rows = self.entity_rows(z.ids)  # (N, hidden)
        return torch.zeros(z.batch_size, rows.shape[1], device=words.device).index_add(
            0, z.rows, z.probs.unsqueeze(1).float() * rows)

    def tokenize(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        b = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_question_pieces,
                           pad_to_multiple_of=PAD_MULTIPLE, return_tensors="pt", return_token_type_ids=False)
        return b["input_ids"], b["attention_mask"]

    def encode(self, texts: list[str], precision: str = "auto") -> "EncodedQuestions":
        """The shared layers over a batch of questions, computed once for all hops, in `precision`
        (`drkit.util.hardware.PRECISIONS`; auto: bf16 on a CPU that computes it natively, else fp32)."""
        ids, mask = self.tokenize(texts)
        ids, mask = ids.to(self.device), mask.to(self.device)
        # At question time each question is padded to its own length rounded up to PAD_MULTIPLE, not to the
        # longest of its batch: its vectors would otherwise change with the batch (other shapes, roundings).
        if self.tokenizer.padding_side != "right":
            raise ConfigError(f"the question tokenizer pads on the {self.tokenizer.padding_side}; drkit needs right padding")
        # On a GPU the batch is one group, padded to its longest question: each group costs its own kernel launches,
        # which bound the GPU's time, and GPU kernels change a row's last bits with the batch anyway.
        one = self.training or ids.device.type != "cpu"
        groups, width = ([torch.arange(len(texts), device=ids.device)], [mask.shape[1]]) if one else length_groups(mask)
        inverse = torch.argsort(torch.cat(groups))  # rows of the concatenated groups -> batch rows
        compute = choose(precision, self.device.type, training=self.training)
        with compute.autocast():
            hs = [self.encoder.encode(ids[g, :w], mask[g, :w]) for g, w in zip(groups, width)]
        return EncodedQuestions(hs, [mask[g, :w] for g, w in zip(groups, width)], groups, inverse, compute)

    def pooled(self, enc: "EncodedQuestions") -> torch.Tensor:
        """(B, hidden) float32 on the model's device: the mean of each question's shared-layer outputs over its
        pieces, batch order."""
        return torch.cat([mean_pool(h, m).float() for h, m in zip(enc.hs, enc.masks)])[enc.inverse]

    def hop_queries(self, enc: "EncodedQuestions", t: int, z: EntitySet) -> torch.Tensor:
        """g_t(q, Z_{t-1}): (B, p) float32 queries of hop t (0-based) from the encoded questions and Z_{t-1}, on
        the CPU, where the follow computes (differentiable: the gradient goes back to the encoder's device)."""
        z_emb = self.entity_embedding(z) if self.config.entity_condition != "none" else None
        with enc.compute.autocast():
            if t not in enc.hop_bases:  # hop t's layers, once for these questions (they do not read Z)
                enc.hop_bases[t] = [self.encoder.hop_base(h, m, t) for h, m in zip(enc.hs, enc.masks)]
            q = torch.cat([self.encoder.condition(base, t, None if z_emb is None else z_emb[g])
                           for base, g in zip(enc.hop_bases[t], enc.groups)])[enc.inverse]
        return q.float().cpu()

    def removed_at(self, t: int, hops: int, topic: np.ndarray, fc: FollowConfig) -> np.ndarray | None:
        """The question entities hop t (0-based) of `hops` drops from its output, as `fc.remove_topic` says."""
        if fc.remove_topic == "every" or (fc.remove_topic == "last" and t == hops - 1):
            return topic
        return None

    def forward(self, texts: list[str], topic: np.ndarray, vkb, hops: int | None = None, trace: bool = False,
                precision: str = "auto", follow_config: FollowConfig | None = None, z0: EntitySet | None = None) -> list[HopOutput]:
        """Answer a batch: `texts` (questions), `topic[b]` the entity id of Z_0 for row b (-1: none).

        `z0`, when given, is Z_0 instead of the one-hot `topic` (a weighted set of linked entities, say);
        `topic` then only names the entity each row's hops drop (``remove_topic``), -1 for none.
        Returns one `HopOutput` per hop; the last one's ``z`` is the answer distribution."""
        hops = hops or self.config.hops
        if hops > self.config.hops:
            raise ConfigError(f"this model has {self.config.hops} trained hops; cannot run {hops}")
        if self.n_entities != vkb.graph.n_entities:
            raise ConfigError(f"the model knows {self.n_entities} entities but the index has "
                              f"{vkb.graph.n_entities} entities; call set_entities with the index's names")
        fc = follow_config or self.follow_config
        topic = np.asarray(topic, dtype=np.int64)
        enc = self.encode(texts, precision)
        z = EntitySet.one_hot(topic) if z0 is None else z0
        out = []
        for t in range(hops):
            q = self.hop_queries(enc, t, z)  # (B, p)
            power = self.tfidf_power[t].clamp_min(0).cpu() if self.config.learn_tfidf_power else None
            result = follow(z, q, vkb.graph, vkb.search, fc, self.removed_at(t, hops, topic, fc), trace=trace,
                            tfidf_power=power)
            z, tr = result if trace else (result, None)
            out.append(HopOutput(z, q, tr))
        return out

    # -- persistence ------------------------------------------------------------------------
    def save(self, out: str | Path, overwrite: bool = False, extra_manifest: dict | None = None) -> None:
        from safetensors.torch import save_file

        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            state = {k: v.detach().cpu().contiguous().clone() for k, v in self.state_dict().items()}
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
        with unset_weights():
            model = cls(ModelConfig(**manifest["model"]), FollowConfig(**manifest["follow"]), bert_config,
                        manifest["dim"], tokenizer, manifest["max_question_pieces"])
        load_weights(model, path / "model.safetensors", "the model")
        model.manifest = manifest
        return model.eval()
