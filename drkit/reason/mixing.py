"""Hop mixing: questions of unknown hop count (the paper, section 3.3, HotpotQA).

"We run DrKIT for 2 hops for each question, and then take a weighted average of the distribution over
entities after each hop Z* = pi_0 Z_0 + pi_1 Z_1 + pi_2 Z_2. Z_0 consists of the entities linked to the
question itself, rescored based on an encoding of the question [...]. The mixing weights pi_i are the
softmax outputs of a classifier on top of another encoding of the question, learnt end-to-end."

`HopMixingModel` holds a T-hop `MultiHopModel` (its question encoder, hop queries and follows) and two
heads on the mean of the question's shared-layer outputs (`MultiHopModel.pooled`):

* the mixing classifier, ``pi = softmax(W_pi h)`` over 0..T hops (zero at start: uniform pi);
* the rescoring query of Z_0, ``g_0 = [V_st,0 h ; V_en,0 h]`` (initialised as the pretrained slot-filling
  query's start and end projections), with ``Z_0' = rescore(Z_0, g_0)`` (`drkit.reason.follow.rescore`:
  each linked entity's prior weight times the exponentiated best score of its mentions).

With ``named_weight`` (the default) Z_0 first weighs each entity the question names verbatim by exp(w), w a
learned scalar (`weigh_named`): how much more a name found verbatim counts than the linker's bonus says.

With ``page_mix`` (the default) each Z_t is first restricted to the entities with a page and renormalised
(`on_pages`): passages are ranked by pages, and a hop that puts mass on names and dates found in the text
(entities without a page) would otherwise rank its pages below the other hops'. On an index whose entities
all have pages nothing changes (`VirtualKB.page_entities` is None there).

Hop 1 follows from the rescored Z_0', so the linker's noise is filtered before it is expanded. With
``remove_named``, the entities the question names verbatim are removed from the output of every hop (Z_0
keeps them), as MetaQA's question entity is (``remove_topic``): a chain then cannot walk back to them.
Z* is an `EntitySet` on the union of the supports; everything is differentiable in pi, in the queries and
in each Z_t, so the model trains end to end from the gold entities (`mixture_loss`).

The entity answer (a place, a date, a person without a page) is the last hop's entity, but the passages
are ranked by Z*: trained into one chain, the two losses pull its queries apart (on 2Wiki fold 0 with
`--entities titles ner`, the answer loss cost the dev passage R@2 0.77 -> 0.74). With ``answer_head`` (the
default) the answer has a hop of its own: the base model's hop T+1, a follow from Z_{T-1} with its own
layers, projections and TF-IDF power, fed the shared layers' output and Z_{T-1} without their gradient, so
the answer loss trains the head alone and the passage chain sees the passage loss alone (`MixOutput.answer`).
With ``answer_from_pages`` (the default) the head follows from Z_{T-1} over the entities with a page
(`pages_or_all`: as Z* weighs them, or all of Z_{T-1} in a row that reached no page): a two-hop question's bridge
is the entity of the page its answer is in. ``answer_adjacency`` gives the head an A of its own (for example
"page": from the bridge, only the mentions of its own page).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from drkit.errors import ArtifactError, ConfigError
from drkit.reason.entity_set import EntitySet
from drkit.reason.expansion import ADJACENCIES
from drkit.reason.follow import FollowConfig, FollowTrace, follow, rescore
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.question_encoder import rows_alike
from drkit.reason.segment import segment_log_softmax
from drkit.util.artifact import ArtifactWriter, read_manifest
from drkit.util.hardware import choose
from drkit.util.runs import as_saved

FORMAT = "drkit.mixing-model"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class MixConfig:
    """Shape of a hop-mixing model."""

    hops: int = field(default=2, metadata={"help": "largest number of hops T; Z* mixes Z_0 .. Z_T (paper: 2)"})
    rescore: bool = field(default=True, metadata={"help": "rescore Z_0 by an encoding of the question (paper); "
                                                   "off: Z_0 is the linker's weights"})
    fixed: int | None = field(default=None, metadata={"help": "no mixing: answer with Z_fixed alone (pi one-hot; "
                                                                "the fixed-hop models mixing is compared with)",
                                                        "type": int, "default_help": "none: pi mixes the hops"})
    remove_named: bool = field(default=False, metadata={"help": "remove the entities the question names verbatim "
                                                        "from every hop's output (Z_0 keeps them)"})
    page_mix: bool = field(default=True, metadata={
        "help": "Z* mixes each hop's distribution over the entities with a page, renormalised: passages are ranked "
                "by pages, and a hop that puts mass on entities without one (names and dates found in the text) would "
                "otherwise rank its pages below the other hops'; the same on an index whose entities all have pages "
                "(--entities titles). Off: over every entity"})
    answer_head: bool = field(default=True, metadata={
        "help": "the entity answer's last hop has a query of its own (hop layers, projections and TF-IDF power), "
                "trained by the answer loss alone on detached inputs: the passage chain is then trained by the "
                "passage loss alone. Off: the answer is Z_T of the passage chain, and its loss trains that chain too"})

    answer_from_pages: bool = field(default=True, metadata={
        "help": "with an answer head: it follows from Z_{T-1} over the entities with a page, renormalised (as Z* "
                "weighs them with --page-mix), since a bridge the text says more of has a page; on 2Wiki's two folds "
                "pooled, entity Hits@1 0.093 -> 0.175 on the compositional and inference questions, a paired test "
                "calls it (docs/results-2wiki.md). Off: from all of Z_{T-1}; the same on an index whose entities "
                "all have pages"})
    answer_adjacency: str | None = field(default=None, metadata={
        "help": "with an answer head: the A its follow expands Z_{T-1} by (FollowConfig.adjacency), e.g. page: an "
                "entity with a page reaches the mentions of its own page only, where the facts of a title corpus about "
                "it are stated", "type": str, "choices": ADJACENCIES, "default_help": "the follow's"})
    named_weight: bool = field(default=True, metadata={
        "help": "learn w, how much more an entity the question names verbatim weighs in Z_0 than the linker's "
                "exact-match bonus says: Z_0[e] exp(w [e named]), renormalised per question, before the rescoring "
                "(w = 0 at start, trained with the rest). Off: Z_0 as linked"})

    # what a field absent from a model saved before it existed meant
    ABSENT_MEANT = {"page_mix": False, "answer_head": False, "named_weight": False, "answer_from_pages": False}

    def __post_init__(self):
        if self.hops < 1:
            raise ConfigError(f"hops must be at least 1, got {self.hops}")
        if self.fixed is not None and not 0 <= self.fixed <= self.hops:
            raise ConfigError(f"fixed must be a hop count in 0..{self.hops}, got {self.fixed}")
        if self.answer_adjacency is not None and self.answer_adjacency not in ADJACENCIES:
            raise ConfigError(f"answer_adjacency must be one of {ADJACENCIES}, got {self.answer_adjacency!r}")


@dataclass
class MixOutput:
    z_star: EntitySet  # sum_t pi_t Z_t
    pi: torch.Tensor  # (B, T+1)
    z: list[EntitySet]  # Z_0 (rescored), Z_1, .., Z_T
    queries: list[torch.Tensor]  # g_0, g_1, .., g_T, each (B, p)
    traces: list[FollowTrace | None]
    z_answer: EntitySet | None = None  # the answer head's follow from Z_{T-1} (forward with answers=True)
    encoded: tuple | None = None  # the questions through the shared layers and their mean, for `answer(encoded=)`

    @property
    def answer(self) -> EntitySet:
        """The entity answer's distribution: the answer head's, or Z_T for a model without one."""
        return self.z[-1] if self.z_answer is None else self.z_answer


def on_pages(z: EntitySet, has_page: np.ndarray) -> EntitySet:
    """`z` restricted to the entities with ``has_page[e]`` and renormalised in each row, ``Z[e] / sum_{e' with a
    page} Z[e']`` (differentiable in the probabilities); a row with no such entity is left empty."""
    return _kept(z, has_page[z.ids.numpy()])


def pages_or_all(z: EntitySet, has_page: np.ndarray) -> EntitySet:
    """`on_pages` of `z` in each row that holds an entity with a page; a row that holds none keeps all its entities
    (the answer head's start: a question whose Z_{T-1} reached no page still gets an answer)."""
    pages = has_page[z.ids.numpy()]
    bare = np.bincount(z.rows.numpy()[pages], minlength=z.batch_size) == 0
    return _kept(z, pages | bare[z.rows.numpy()])


def _kept(z: EntitySet, keep: np.ndarray) -> EntitySet:
    """The entries of `z` where `keep` (one bool per entry), renormalised in each row."""
    keep = torch.from_numpy(np.flatnonzero(keep))
    rows, ids, probs = z.rows[keep], z.ids[keep], z.probs[keep]
    total = torch.zeros(z.batch_size, dtype=probs.dtype).index_add(0, rows, probs)
    probs = probs / total[rows].clamp_min(torch.finfo(probs.dtype).tiny)
    return EntitySet(rows, ids, probs, z.batch_size, torch.log(probs.clamp_min(torch.finfo(probs.dtype).tiny)))


def mix(sets: list[EntitySet], pi: torch.Tensor, has_page: np.ndarray | None = None) -> EntitySet:
    """``sum_t pi[:, t] Z_t`` as one `EntitySet` on the union of the supports (logits: log probs); with
    `has_page` (E,) bool, each Z_t over the entities with a page first (`on_pages`)."""
    if has_page is not None:
        sets = [on_pages(z, has_page) for z in sets]
    batch = pi.shape[0]
    rows = torch.cat([z.rows for z in sets])
    ids = torch.cat([z.ids for z in sets])
    probs = torch.cat([z.probs.to(pi.dtype) * pi[z.rows, t] for t, z in enumerate(sets)])
    n_entities = int(ids.max()) + 1 if len(ids) else 1
    keys = rows.numpy() * n_entities + ids.numpy()
    unique, inverse = np.unique(keys, return_inverse=True)
    total = torch.zeros(len(unique), dtype=probs.dtype).index_add(0, torch.from_numpy(inverse.astype(np.int64)), probs)
    return EntitySet(torch.from_numpy(unique // n_entities), torch.from_numpy(unique % n_entities), total, batch,
                     torch.log(total.clamp_min(torch.finfo(total.dtype).tiny)))


def weigh_named(z0: EntitySet, named: np.ndarray, w: torch.Tensor) -> EntitySet:
    """Z_0 with each entity its question names verbatim (`named`: (B, k) ids, -1 padded) weighed by exp(w),
    renormalised per question: ``Z_0'[b, e] = Z_0[b, e] exp(w [e in named[b]]) / sum_e' (...)``, differentiable
    in w and in Z_0's probabilities. A question that names none of its entities (or names them all) keeps its Z_0,
    up to the rounding of the renormalisation."""
    if len(z0.ids) == 0:
        return z0
    named = np.asarray(named, dtype=np.int64).reshape(z0.batch_size, -1)
    is_named = torch.from_numpy((named[z0.rows.numpy()] == z0.ids.numpy()[:, None]).any(1)).to(z0.probs.dtype)
    w = w.to(device=z0.probs.device, dtype=z0.probs.dtype)  # the model may sit on a GPU, Z_0 on the CPU
    logits = torch.log(z0.probs.clamp_min(torch.finfo(z0.probs.dtype).tiny)) + w * is_named
    log_probs = segment_log_softmax(logits, z0.rows, z0.batch_size)
    return EntitySet(z0.rows, z0.ids, torch.exp(log_probs), z0.batch_size, log_probs)


def mixture_loss(z: EntitySet, gold: list[np.ndarray]) -> tuple[torch.Tensor | None, np.ndarray]:
    """Multi-label loss: for each row, the mean over its gold entities that are in Z*'s support of
    ``-log Z*[g]``; averaged over the rows with at least one. (A softmax mixture is a ranking: pushing up
    every gold entity pushes the others down.) Returns the loss (None if no row has a gold entity in its
    support) and, per row, how many of its gold entities were in the support."""
    rows, ids = z.rows.numpy(), z.ids.numpy()
    n = int(max(ids.max(initial=-1), max((int(g.max()) for g in gold if len(g)), default=-1))) + 1
    keys = rows * n + ids
    gold_keys = np.concatenate([b * n + np.unique(g) for b, g in enumerate(gold)]) if gold else np.zeros(0, np.int64)
    member = np.isin(keys, gold_keys)
    found = np.bincount(rows[member], minlength=z.batch_size)
    if not member.any():
        return None, found
    sel = torch.from_numpy(np.flatnonzero(member))
    log_p = torch.log(z.probs[sel].clamp_min(torch.finfo(z.probs.dtype).tiny))
    per_row = torch.zeros(z.batch_size, dtype=log_p.dtype).index_add(0, z.rows[sel], -log_p)
    has = torch.from_numpy(found > 0)
    return (per_row[has] / torch.from_numpy(found[found > 0]).to(log_p.dtype)).mean(), found


class HopMixingModel(nn.Module):
    """A T-hop DrKIT model whose answer distribution mixes Z_0 .. Z_T with weights from the question."""

    def __init__(self, base: MultiHopModel, config: MixConfig = MixConfig()):
        super().__init__()
        if base.config.hops != config.hops + config.answer_head:  # the answer head is the base's hop T+1
            raise ConfigError(f"the base model has {base.config.hops} hops, the mixing model {config.hops}"
                              + (" and an answer head" if config.answer_head else ""))
        self.config = config
        self.base = base
        hidden, half = base.encoder.bert_config.hidden_size, base.dim // 2
        self.pi_head = nn.Linear(hidden, config.hops + 1)
        nn.init.zeros_(self.pi_head.weight)
        nn.init.zeros_(self.pi_head.bias)
        self.start0 = nn.Linear(hidden, half, bias=False)
        self.end0 = nn.Linear(hidden, half, bias=False)
        if config.named_weight:  # w of `weigh_named` (a model saved without the setting has no such parameter)
            self.named_weight = nn.Parameter(torch.zeros(()))
        self.manifest: dict = {}

    @classmethod
    def from_encoder(cls, encoder, config: MixConfig = MixConfig(), model_config: ModelConfig | None = None,
                     follow_config: FollowConfig = FollowConfig()) -> "HopMixingModel":
        """A new model whose question encoder and Z_0 query start from a pretrained `DualEncoder`."""
        model_config = dataclasses.replace(model_config or ModelConfig(), hops=config.hops + config.answer_head)
        model = cls(MultiHopModel.from_encoder(encoder, model_config, follow_config), config)
        model.start0.load_state_dict(encoder.query_start.state_dict())
        model.end0.load_state_dict(encoder.query_end.state_dict())
        return model

    @property
    def follow_config(self) -> FollowConfig:
        return self.base.follow_config

    def forward(self, texts: list[str], z0: EntitySet, vkb, precision: str = "auto", trace: bool = False,
                follow_config: FollowConfig | None = None, named: np.ndarray | None = None,
                answers: bool = False) -> MixOutput:
        """Z* of a batch; `named` (batch, k), -1 padded: the entities each question names verbatim
        (`LinkedQuestions.named`), weighed in Z_0 with ``named_weight`` (`weigh_named`) and removed from every hop
        with ``remove_named``. With `answers` and an answer head, also ``z_answer``: the answer head's follow from
        Z_{T-1}, computed from the shared layers' output and Z_{T-1} without their gradient (the answer loss trains
        the head alone)."""
        fc = follow_config or self.base.follow_config
        enc, h = self._encode(texts, vkb, precision)
        if self.config.fixed is None:
            pi = torch.softmax(rows_alike(self.pi_head, h), dim=-1).cpu()  # (B, T+1), on the CPU as the follow
        else:
            pi = torch.nn.functional.one_hot(torch.full((len(texts),), self.config.fixed), self.config.hops + 1).float()
        z, g0, tr = self._z0(self.weigh_named(z0, named), h, vkb, fc, trace)
        sets, queries, traces = [z], [g0], [tr]
        for t in range(self.config.hops):
            z, q, tr = self._hop(enc, t, z, vkb, fc, named, trace)
            sets.append(z)
            queries.append(q)
            traces.append(tr)
        z_answer = self._answer_hop(enc, sets[-2], vkb, fc, named) if answers and self.config.answer_head else None
        # over pages: None where every entity has one (then nothing changes, to the bit)
        has_page = vkb.page_entities if self.config.page_mix else None
        z_star = mix(sets, pi, has_page) if self.config.fixed is None else sets[self.config.fixed]
        return MixOutput(z_star, pi, sets, queries, traces, z_answer, (enc, h))

    def answer(self, texts: list[str], z0: EntitySet, vkb, precision: str = "auto",
               follow_config: FollowConfig | None = None, named: np.ndarray | None = None,
               encoded: tuple | None = None) -> EntitySet:
        """The entity answer's distribution alone, as ``forward(..., answers=True).answer`` gives it, without
        what only the passages need (pi, Z*, and with an answer head the passage chain's last hop). `encoded`: a
        forward's ``MixOutput.encoded`` for the same `texts` and `precision`, whose shared layers and hop layers
        (which do not depend on Z) are then not computed again: the same values, to the bit. For question time
        (no gradient): in training the two passes would share one graph."""
        fc = follow_config or self.base.follow_config
        if encoded is not None and len(encoded[1]) != len(texts):
            raise ValueError(f"encoded holds {len(encoded[1])} questions, not the {len(texts)} given")
        if encoded is not None:
            asked = choose(precision, self.base.device.type, training=self.training).precision
            if encoded[0].compute.precision != asked:
                raise ValueError(f"encoded was computed in {encoded[0].compute.precision}, not the {asked} asked for")
        enc, h = encoded if encoded is not None else self._encode(texts, vkb, precision)
        z = self._z0(self.weigh_named(z0, named), h, vkb, fc, False)[0]
        for t in range(self.config.hops - self.config.answer_head):
            z, _, _ = self._hop(enc, t, z, vkb, fc, named, False)
        return self._answer_hop(enc, z, vkb, fc, named) if self.config.answer_head else z

    def weigh_named(self, z0: EntitySet, named: np.ndarray | None) -> EntitySet:
        """`weigh_named` by this model's w (``named_weight``); `z0` itself without the setting or without `named`."""
        if not self.config.named_weight or named is None:
            return z0
        return weigh_named(z0, named, self.named_weight)

    def _encode(self, texts: list[str], vkb, precision: str):
        """The questions through the shared layers, and their mean (B, hidden) float32."""
        base = self.base
        if base.n_entities != vkb.graph.n_entities:
            raise ConfigError(f"the model knows {base.n_entities} entities but the index has "
                              f"{vkb.graph.n_entities} entities; call set_entities with the index's names")
        enc = base.encode(texts, precision)
        return enc, base.pooled(enc)

    def _z0(self, z0: EntitySet, h: torch.Tensor, vkb, fc: FollowConfig, trace: bool):
        """Z_0 rescored by the question's query g_0 (with ``rescore``; else as linked): (Z_0, g_0 (B, p), its trace
        or None)."""
        g0 = torch.cat([rows_alike(self.start0, h), rows_alike(self.end0, h)], dim=-1).cpu()  # (B, p)
        if not self.config.rescore:
            return z0, g0, None
        result = rescore(z0, g0, vkb.graph, fc, trace=trace)
        z, tr = result if trace else (result, None)
        return z, g0, tr

    def _hop(self, enc, t: int, z: EntitySet, vkb, fc: FollowConfig, named, trace: bool):
        """Hop t (0-based; t = T: the answer head) from `z`: (Z_t, its query g_t, its trace or None)."""
        base = self.base
        q = base.hop_queries(enc, t, z)
        power = base.tfidf_power[t].clamp_min(0).cpu() if base.config.learn_tfidf_power else None
        topic = named if self.config.remove_named else None
        result = follow(z, q, vkb.graph, vkb.search, fc, topic, trace=trace, tfidf_power=power)
        z, tr = result if trace else (result, None)
        return z, q, tr

    def _answer_hop(self, enc, start: EntitySet, vkb, fc: FollowConfig, named) -> EntitySet:
        """The answer head (the base's extra hop T) from Z_{T-1} = `start`, both taken without their gradient."""
        start = EntitySet(start.rows, start.ids, start.probs.detach(), start.batch_size)
        if self.config.answer_from_pages and vkb.page_entities is not None:
            start = pages_or_all(start, vkb.page_entities)
        enc = dataclasses.replace(enc, hs=[h.detach() for h in enc.hs])
        if self.config.answer_adjacency is not None:
            fc = dataclasses.replace(fc, adjacency=self.config.answer_adjacency)
        return self._hop(enc, self.config.hops, start, vkb, fc, named, False)[0]

    # -- persistence: the base model in base/, the heads beside it ---------------------------------------
    def save(self, out: str | Path, overwrite: bool = False, extra_manifest: dict | None = None) -> None:
        from safetensors.torch import save_file

        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            self.base.save(w.path("base"), extra_manifest=extra_manifest)
            heads = {k: v.detach().cpu().contiguous().clone() for k, v in self.state_dict().items()
                     if not k.startswith("base.")}
            save_file(heads, str(w.path("heads.safetensors")))
            w.manifest.update(mix=asdict(self.config), **(extra_manifest or {}))

    @classmethod
    def load(cls, path: str | Path) -> "HopMixingModel":
        path = Path(path)
        manifest = read_manifest(path, FORMAT, FORMAT_VERSION)
        base = MultiHopModel.load(path / "base")
        model = cls(base, as_saved(MixConfig, manifest["mix"]))
        from safetensors.torch import load_file

        missing, unexpected = model.load_state_dict(load_file(str(path / "heads.safetensors")), strict=False)
        missing = [k for k in missing if not k.startswith("base.")]
        if missing or unexpected:
            raise ArtifactError(f"{path / 'heads.safetensors'} does not match the mixing heads: missing {missing[:5]}, "
                                f"unexpected {unexpected[:5]}")
        model.manifest = manifest
        return model.eval()


def is_mixing_model(path: str | Path) -> bool:
    """Whether `path` (or its ``model/``) is a hop-mixing model directory."""
    path = Path(path)
    for p in (path, path / "model"):
        m = p / "manifest.json"
        if m.exists():
            try:
                return json.loads(m.read_text()).get("format") == FORMAT
            except ValueError:
                return False
    return False


def mixing_model_dir(path: str | Path) -> Path:
    """The hop-mixing model directory of `path`: itself, or the ``model/`` of the training run it is."""
    path = Path(path)
    return path if (path / "manifest.json").exists() else path / "model"
