"""The reader model (the paper's appendix "HotpotQA answer extraction", on this project's encoders).

Input, at most `max_pieces` word pieces::

    [CLS] question [SEP] <p> title <s> sentence <s> sentence ... <p> title <s> ... [SEP]

with <p> and <s> two unused vocabulary tokens (BERT's ``[unused0]`` and ``[unused1]``; the separator where
a vocabulary has none). When the passages do not fit, each gets an equal share of the room, a short passage
giving what it leaves to the others (`allot`), and a passage is cut at its end. Heads on the transformer's
last hidden states H:

* answer type: a 3-way classifier on H[CLS] (span, yes, no);
* span: start and end logits on every title or sentence piece; the best span maximises start + end over
  pairs in one title or sentence, at most `max_answer_pieces` long (`drkit.reader.decode`);
* supporting sentences: a binary logit on each <s>; sentences above 0.5 are the evidence.

Loss = (L_type + L_support + L_start + L_end) / 4, with L_start = -log of the start probability mass on every
occurrence of the answer (likewise L_end), over the span examples that have one in what was read.

The transformer is the base's (`ReaderConfig.base`), or its first `ReaderConfig.layers` layers.

A reader is saved as a directory (format ``drkit.reader``): ``model.safetensors``, the transformer's
``config.json``, the tokenizer and ``manifest.json`` (settings, training record).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from drkit.data.text import split_sentences
from drkit.data.tokenizer import DEFAULT_ENCODER, encoder_path
from drkit.dense.layers import hidden_states
from drkit.errors import ConfigError
from drkit.reader.examples import ANSWER_TYPES, SPAN, ReaderExample
from drkit.reader.features import Features, allot
from drkit.reader.reading import TITLE, ReadConfig, Reading
from drkit.reader.text import find_all
from drkit.util.artifact import ArtifactWriter, read_manifest
from drkit.util.runs import as_saved

FORMAT = "drkit.reader"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ReaderConfig:
    """Shape of the reader's input and output."""

    base: str = field(default=DEFAULT_ENCODER, metadata={"help": "pretrained transformer: the packaged all-MiniLM-L6-v2 "
                                                                 "or a folder with config.json, safetensors weights and tokenizer"})
    max_pieces: int = field(default=512, metadata={"help": "word pieces the reader is trained on (question and passages); drkit answer reads at most 320"})
    max_question_pieces: int = field(default=64, metadata={"help": "longest question in word pieces (longer ones are cut)"})
    max_answer_pieces: int = field(default=30, metadata={"help": "longest answer span in word pieces"})
    layers: int = field(default=0, metadata={"help": "transformer layers kept from the base, its first ones (with "
                                                     "train-reader --teacher: of the teacher's, drkit.reader.distill; 0: all); "
                                                     "fewer read faster and answer worse (3 of MiniLM's 6: 58% of the "
                                                     "time, EM 0.49 against 0.57 on 2Wiki, docs/reader.md)"})
    ABSENT_MEANT = {"layers": 0}  # a reader or run made before the setting existed kept all of its base's layers

    def __post_init__(self):
        if self.max_question_pieces < 1 or self.max_pieces < self.max_question_pieces + 8:
            raise ConfigError(f"max_pieces ({self.max_pieces}) must leave room for passages beyond max_question_pieces "
                              f"({self.max_question_pieces})")
        if self.max_answer_pieces < 1:
            raise ConfigError(f"max_answer_pieces must be at least 1, got {self.max_answer_pieces}")
        if self.layers < 0:
            raise ConfigError(f"layers must be 0 (all of the base's) or more, got {self.layers}")


def int8_compute(precision: str = "auto", device: str = "cpu"):
    """Where and in what an int8 reader (`--reader-quantize int8`, `Reader.quantized`) reads: in fp32 on the CPU, the
    one computation its quantised layers have. `precision` and `device`: the reader's own settings (``drkit answer``'s
    ``--precision``; ``auto`` gives fp32 here, never bf16); another precision, or a GPU, is refused with the flag to
    pass."""
    from drkit.util.hardware import Compute, state

    if precision not in ("auto", "fp32"):
        raise ConfigError(f"--reader-quantize int8 reads in fp32; the reader's precision is set to {precision} "
                          "(pass --precision fp32 or auto)")
    if device != "cpu":
        raise ConfigError(f"--reader-quantize int8 reads on the CPU; the reader is on {device} (pass --device cpu)")
    return state(Compute(torch.device("cpu"), "fp32", "an int8 reader: its quantised layers compute in fp32 on the CPU"),
                 verb="reading")


class Reader(nn.Module):
    """Transformer + answer-type, span and supporting-sentence heads (module docstring)."""

    def __init__(self, config: ReaderConfig, transformer: nn.Module, tokenizer):
        super().__init__()
        self.config = config
        self.transformer = transformer
        self.tokenizer = tokenizer
        hidden = transformer.config.hidden_size
        self.answer_type = nn.Linear(hidden, len(ANSWER_TYPES))
        self.span = nn.Linear(hidden, 2)
        self.support = nn.Linear(hidden, 1)
        vocab = tokenizer.get_vocab()
        self.passage_marker = vocab.get("[unused0]", tokenizer.sep_token_id)
        self.sentence_marker = vocab.get("[unused1]", tokenizer.sep_token_id)
        limit = transformer.config.max_position_embeddings
        if config.max_pieces > limit:
            raise ConfigError(f"max_pieces {config.max_pieces} exceeds what the transformer takes ({limit})")
        self.manifest: dict = {}
        self.path: Path | None = None  # where it was loaded from
        self.quantize = "none"  # "int8": its transformer's Linear layers quantised (`quantized`)

    # -- construction and persistence -------------------------------------------------------
    @classmethod
    def from_base(cls, config: ReaderConfig = ReaderConfig(), seed: int = 0) -> "Reader":
        from drkit.data.tokenizer import load_tokenizer
        from drkit.dense.encoder import load_transformer

        # No dropout on the attention probabilities: with it, torch's CPU attention leaves its fused kernel and a
        # training step of 8 x 512 pieces took 3.7 s instead of 1.0 s (forward, 2 AVX2 cores); the hidden
        # states' dropout stays.
        transformer = load_transformer(encoder_path(config.base), attention_probs_dropout_prob=0.0)
        if config.layers:
            _keep_layers(transformer, config.layers, config.base)
        torch.manual_seed(seed)
        return cls(config, transformer, load_tokenizer(config.base))

    def save(self, out: str | Path, overwrite: bool = False, extra_manifest: dict | None = None) -> None:
        from safetensors.torch import save_file

        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            state = {k: v.detach().contiguous().cpu().clone() for k, v in self.state_dict().items()}
            save_file(state, str(w.path("model.safetensors")))
            w.path("transformer").mkdir()
            self.transformer.config.to_json_file(str(w.path("transformer/config.json")))
            self.tokenizer.save_pretrained(str(w.path("tokenizer")))
            w.manifest.update(config=asdict(self.config), parameters=sum(p.numel() for p in self.parameters()),
                              **(extra_manifest or {}))

    def quantized(self, compute_precision: str = "fp32") -> "Reader":
        """This reader with its transformer's Linear layers as int8 dynamic quantisation (on the CPU, reading in fp32:
        `compute_precision` is the resolved precision, `int8_compute` gives it; `drkit.dense.quantize.quantize_transformer`):
        a copy on the CPU, so the fp32 reader stays as and where it is, or the reader itself when it is already int8."""
        import copy

        from drkit.dense.quantize import quantize_transformer

        int8_compute(compute_precision)  # its checks
        if self.quantize == "int8":
            return self
        reader = copy.deepcopy(self).to("cpu")
        quantize_transformer(reader, compute_precision)
        reader.quantize = "int8"
        return reader

    def for_reading(self, quantize: str = "none", precision: str = "auto") -> "tuple[Reader, object | None]":
        """The reader that reads with ``ReadConfig.reader_quantize`` = `quantize`, and the compute it must read in, or
        None where the caller's choice stands: an int8 reader (asked for, or this one already) is a quantised copy
        that reads in fp32 on the CPU (`int8_compute`, `precision` the reader's own setting); any other is itself."""
        if "int8" not in (quantize, self.quantize):
            return self, None
        compute = int8_compute(precision)  # the quantised copy is made on the CPU
        return self.quantized(compute.precision), compute

    @classmethod
    def loaded(cls, reader: "str | Path | Reader") -> "Reader":
        """`reader` itself when it is one, else `load` it (a reader directory or a ``drkit train-reader`` run)."""
        return reader if isinstance(reader, cls) else cls.load(reader)

    @staticmethod
    def directory(path: str | Path) -> Path:
        """The reader directory `path` names (itself, or a ``drkit train-reader`` run's reader), without loading it;
        a `ConfigError` where nothing is there."""
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"the reader {path} does not exist")
        if not (path / "manifest.json").exists() and (path / "reader" / "manifest.json").exists():
            path = path / "reader"  # a `drkit train-reader` run: its reader
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Reader":
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        from drkit.dense.encoder import load_weights, unset_weights

        path = cls.directory(path)
        manifest = read_manifest(path, FORMAT, FORMAT_VERSION)
        config = as_saved(ReaderConfig, manifest["config"])
        cfg = AutoConfig.from_pretrained(str(path / "transformer"), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"), local_files_only=True)
        with unset_weights():
            reader = cls(config, AutoModel.from_config(cfg), tokenizer)
        load_weights(reader, path / "model.safetensors", "the reader")
        reader.manifest, reader.path = manifest, path
        return reader.eval()

    @property
    def device(self) -> torch.device:
        return self.span.weight.device

    # -- input ----------------------------------------------------------------------------------
    def featurize(self, example: ReaderExample, labels: bool = False, max_pieces: int | None = None) -> Features:
        """The word pieces of `example` (module docstring), at most `max_pieces` (default: the reader's);
        `labels`: with the training targets."""
        cfg, tok = self.config, self.tokenizer
        limit = max_pieces or cfg.max_pieces
        if not cfg.max_question_pieces + 8 <= limit <= self.transformer.config.max_position_embeddings:
            raise ConfigError(f"max_pieces must be between {cfg.max_question_pieces + 8} and "
                              f"{self.transformer.config.max_position_embeddings}, got {limit}")
        sentence_spans = [split_sentences(p.text) for p in example.passages]
        strings = [example.question] + [s for p, spans in zip(example.passages, sentence_spans)
                                        for s in [p.title] + [p.text[a:b] for a, b in spans]]
        enc = tok(strings, add_special_tokens=False, return_offsets_mapping=True)
        pieces, offsets = enc["input_ids"], enc["offset_mapping"]
        question = pieces[0][: cfg.max_question_pieces]
        ids = [tok.cls_token_id] + question + [tok.sep_token_id]
        segment, chars = [-1] * len(ids), [(0, 0)] * len(ids)
        # per passage: [(sentence number, pieces, char offsets shifted into the passage text)], title first
        units, k = [], 1
        for p, spans in zip(example.passages, sentence_spans):
            u = [(TITLE, pieces[k], offsets[k])]
            for s, (a, _) in enumerate(spans):
                u.append((s, pieces[k + 1 + s], [(c0 + a, c1 + a) for c0, c1 in offsets[k + 1 + s]]))
            units.append(u)
            k += 1 + len(spans)
        costs = [1 + sum(len(x[1]) + (x[0] != TITLE) for x in u) for u in units]
        shares = allot(costs, limit - len(ids) - 1)
        segments, markers, marker_of = [], [], []
        for p, (u, share) in enumerate(zip(units, shares)):
            if share < 2:
                continue
            ids.append(self.passage_marker)
            segment.append(-1)
            chars.append((0, 0))
            left = share - 1
            for s, piece_ids, offs in u:
                if s != TITLE:
                    if left < 2:
                        break
                    markers.append(len(ids))
                    marker_of.append((p, s))
                    ids.append(self.sentence_marker)
                    segment.append(-1)
                    chars.append((0, 0))
                    left -= 1
                take = min(len(piece_ids), left)
                if take:
                    segments.append((p, s))
                    ids += piece_ids[:take]
                    segment += [len(segments) - 1] * take
                    chars += [tuple(o) for o in offs[:take]]
                    left -= take
        ids.append(tok.sep_token_id)
        segment.append(-1)
        chars.append((0, 0))
        f = Features(ids, np.asarray(segment), np.asarray(chars, dtype=np.int64).reshape(-1, 2), segments,
                     sentence_spans, markers, marker_of)
        if labels:
            self._label(example, f)
        return f

    @staticmethod
    def _label(example: ReaderExample, f: Features) -> None:
        """Training targets of `f` (module docstring of `drkit.reader.examples`)."""
        f.type_label = ANSWER_TYPES.index(example.answer_type)
        passages = example.passages
        if example.answer_type == SPAN:
            for only_gold in (True, False):
                spans = set()
                for p, passage in enumerate(passages):
                    if only_gold and passage.id not in example.gold:
                        continue
                    for a in example.answers:
                        spans |= {(p, TITLE, c0, c1) for c0, c1 in find_all(passage.title, a)}
                        spans |= {(p, None, c0, c1) for c0, c1 in find_all(passage.text, a)}
                starts, ends = _positions(f, spans)
                if starts:
                    f.start_targets, f.end_targets = starts, ends
                    break
        # "yes" / "no" would mark every sentence that says no; a span answer marks the sentences that hold it
        keys = (tuple(example.answers) if example.answer_type == SPAN else ()) + tuple(example.support)
        for p, s in f.marker_of:
            passage = passages[p]
            a, b = f.sentence_spans[p][s]
            hit = passage.id in example.gold and any(find_all(passage.text[a:b], key) for key in keys)
            f.support_labels.append(float(hit))

    # -- model ----------------------------------------------------------------------------------
    def batch(self, features: Sequence[Features]) -> dict:
        """Right-padded tensors of `features` on the reader's device."""
        longest = max(len(f.ids) for f in features)
        ids = torch.full((len(features), longest), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        content = torch.zeros((len(features), longest), dtype=torch.bool)
        for r, f in enumerate(features):
            ids[r, : len(f.ids)] = torch.tensor(f.ids)
            mask[r, : len(f.ids)] = 1
            content[r, : len(f.ids)] = torch.from_numpy(f.segment >= 0)
        dev = self.device
        return {"input_ids": ids.to(dev), "attention_mask": mask.to(dev), "content": content.to(dev)}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, content: torch.Tensor) -> dict:
        """Logits: answer type (B, 3); start, end and support (B, L), start and end -inf off passage text."""
        h = hidden_states(self.transformer, input_ids, attention_mask)
        h = h.float()
        span = self.span(h).masked_fill(~content.unsqueeze(-1), float("-inf"))
        return {"type": self.answer_type(h[:, 0]), "start": span[..., 0], "end": span[..., 1],
                "support": self.support(h).squeeze(-1)}

    def loss(self, out: dict, features: Sequence[Features]) -> tuple[torch.Tensor, dict]:
        """(L_type + L_support + L_start + L_end) / 4 over a batch, and its parts."""
        dev = out["type"].device
        type_loss = F.cross_entropy(out["type"], torch.tensor([f.type_label for f in features], device=dev))
        rows = [(r, m, lab) for r, f in enumerate(features) for m, lab in zip(f.markers, f.support_labels)]
        if rows:
            r, m, lab = (torch.tensor(x, device=dev) for x in zip(*rows))
            support_loss = F.binary_cross_entropy_with_logits(out["support"][r, m], lab.float())
        else:
            support_loss = out["support"].sum() * 0
        span_losses = {"start": [], "end": []}
        for r, f in enumerate(features):
            for name, targets in (("start", f.start_targets), ("end", f.end_targets)):
                if targets:
                    row = out[name][r]
                    span_losses[name].append(torch.logsumexp(row, 0) - torch.logsumexp(row[targets], 0))
        parts = {"type": type_loss, "support": support_loss}
        for name, losses in span_losses.items():
            parts[name] = torch.stack(losses).mean() if losses else out[name].new_zeros(())
        total = sum(parts.values()) / 4
        return total, {k: float(v.detach()) for k, v in parts.items()}

    @torch.no_grad()
    def read(self, examples: Sequence[ReaderExample], batch_size: int = 8, *, compute=None,
             config: ReadConfig = ReadConfig()) -> list["Reading"]:
        """The answer of each example (all of its passages), with its type, span and supporting sentences
        (`config`: `drkit.reader.reading.ReadConfig`, its `passages` aside). With ``config.compare``, a which-of-two
        date question or a same-country question that the dates or countries in its passages settle gets that
        answer and the sentences it was read from, and the transformer does not run for it
        (`drkit.reader.compare.settled`); with ``config.decompose``, a two-hop question is read as two one-hop
        questions (`drkit.reader.decompose`); the others are read whole, in batches of `batch_size`
        (`drkit.reader.routing`)."""
        from drkit.reader.routing import read_examples

        self.eval()
        return read_examples(self, examples, batch_size, compute, config)


def _keep_layers(transformer: nn.Module, layers: int, base: str) -> None:
    """Keep the first `layers` layers of a BERT-style `transformer` (``encoder.layer``), in place."""
    stack = layer_stack(transformer, f"layers {layers}: the base {base} has no encoder.layer stack to cut; pass layers 0")
    if layers > len(stack):
        raise ConfigError(f"layers {layers}: the base {base} has {len(stack)}")
    keep_layers(transformer, stack, range(layers))


def layer_stack(transformer: nn.Module, refusal: str) -> nn.ModuleList:
    """A BERT-style `transformer`'s ``encoder.layer``, or a `ConfigError` saying `refusal` where it has none."""
    stack = getattr(getattr(transformer, "encoder", None), "layer", None)
    if not isinstance(stack, nn.ModuleList):
        raise ConfigError(refusal)
    return stack


def keep_layers(transformer: nn.Module, stack: nn.ModuleList, keep: Sequence[int]) -> None:
    """Keep the layers numbered `keep` of `stack` (`transformer`'s `layer_stack`), in that order, in place."""
    transformer.encoder.layer = nn.ModuleList(stack[i] for i in keep)
    transformer.config.num_hidden_layers = len(keep)


def _positions(f: Features, spans) -> tuple[list[int], list[int]]:
    """Start and end piece positions of character spans ``(passage, sentence or TITLE or None, c0, c1)`` (None:
    in the passage text, whichever sentence) that lie inside one title or sentence read in `f`."""
    starts, ends = set(), set()
    by_segment: dict[tuple[int, int], list[int]] = {}
    for pos, seg in enumerate(f.segment):
        if seg >= 0:
            by_segment.setdefault(f.segments[int(seg)], []).append(pos)
    for p, where, c0, c1 in spans:
        for (sp, ss), positions in by_segment.items():
            if sp != p or (where == TITLE) != (ss == TITLE):
                continue
            over = [q for q in positions if f.chars[q, 0] < c1 and f.chars[q, 1] > c0]
            if over and f.chars[over[0], 0] <= c0 and f.chars[over[-1], 1] >= c1:  # all of it was read
                starts.add(over[0])
                ends.add(over[-1])
                break
    return sorted(starts), sorted(ends)
