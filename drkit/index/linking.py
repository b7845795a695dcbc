"""Entity linking and passage splitting.

`EntityLinker` finds entity names in text: case-insensitive exact match at token boundaries, the
longest name first at each position, matches never overlapping (Aho-Corasick over all names).
`link_corpus` links every article, tokenizes it with the encoder's word pieces, cuts it into
passages of at most `max_passage_pieces` pieces without cutting a mention, and records each mention
as (entity, passage, first piece, last piece, first char, end char).

Every passage of an article is about the article's entity: the first passage starts with the title
line (``Article.content`` does), and each later one gets the same title line, ``title + "\n"``, in
front of its slice of the article, with the title's mentions as they are in the first passage (same
pieces, same characters), so TF-IDF and mention context see the title in every passage. The budget
of later passages is `max_passage_pieces` minus the title's pieces; a title of more than half a
passage is not carried (a counted warning, ``title_not_carried``).

With ``name_parts`` (`LinkConfig`, `NameParts`), a person named by one word is the person of the article whose
name has that word as its first or last word: in an article that has named "Leo Fong" (its title, or earlier in
its text), a later "Fong" is Leo Fong, not an entity "Fong" of its own. Only where the recogniser labelled the
one word a person (kind PERSON) and the longer name a person or nothing (a title it never labelled) written as a
name (every word capitalised but particles such as "of", "von", "de": not "Shoot for the Moon"; a title's
disambiguation suffix left out, and then of two words or more), where exactly one such longer name came before
it in the article, and never for an honorific ("Queen", "Duke"); a last word counts only in a name without a
comma or "of" ("Eustace III, Count of Boulogne" and "Megingoz of Guelders" are "Eustace" and "Megingoz", not
the places).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import ahocorasick
import numpy as np

from drkit.data.corpus import Article
from drkit.data.text import fold, is_token_boundary, nfc_spans
from drkit.data.tokenizer import DEFAULT_ENCODER, load_tokenizer
from drkit.errors import ConfigError
from drkit.index.title_aliases import WRITTEN_SUFFIX, bare_title, own_suffix, suffix_conflicts, suffix_kinds
from drkit.util.progress import progress
from drkit.util.warnlog import WarningLog

_SENTENCE_END = frozenset(".!?;:")


@dataclass(frozen=True)
class LinkConfig:
    """Settings of entity linking and passage splitting."""

    min_name_length: int = field(default=3, metadata={"help": "names shorter than this many characters are not linked"})
    max_passage_pieces: int = field(default=256, metadata={"help": "longest passage, in word pieces (without [CLS]/[SEP])"})
    encoder: str = field(default=DEFAULT_ENCODER, metadata={"help": "tokenizer whose word pieces locate mentions"})
    name_parts: bool = field(default=False, metadata={
        "help": "a person named by one word is the person of the article whose longer name, given earlier in it, "
                "has that word first or last: after 'Leo Fong', 'Fong' is Leo Fong; needs the recogniser's kinds "
                "(--entities ner), else nothing changes; off by default: no gain measured (docs/entities.md)"})

    def __post_init__(self):
        if self.min_name_length < 1:
            raise ConfigError(f"min_name_length must be at least 1, got {self.min_name_length}")
        if self.max_passage_pieces < 8:
            raise ConfigError(f"max_passage_pieces must be at least 8, got {self.max_passage_pieces}")


class EntityLinker:
    """Find entity names in text. `keys[i]` is the folded name of entity i; `aliases`: (folded form, entity
    id) pairs of other forms to find as those entities (`EntityTable.alias_keys`)."""

    def __init__(self, keys: Sequence[str], min_length: int = 3, aliases: Sequence[tuple[str, int]] = (),
                 parts: "NameParts | None" = None):
        self.min_length = min_length
        self.parts = parts if parts is not None and parts.short else None
        self._automaton = ahocorasick.Automaton()
        self.n_linkable = 0  # entities whose name is long enough to link
        for entity_id, key in enumerate(keys):
            if len(key) >= min_length:
                self._automaton.add_word(key, (entity_id, len(key), None))
                self.n_linkable += 1
        self._kinds = suffix_kinds(keys)  # the titles' kinds ("film", "novel"), which a written suffix may name
        for key, entity_id in aliases:  # an entity's name, or an earlier alias, keeps a form both could have
            if len(key) >= min_length and not self._automaton.exists(key):
                # a title's bare form keeps the title's suffix: where the text writes another, it is not linked
                self._automaton.add_word(key, (entity_id, len(key), own_suffix(keys[entity_id], key)))
        if len(self._automaton):
            self._automaton.make_automaton()

    @classmethod
    def of_table(cls, table, min_length: int = 3, name_parts: bool = False) -> "EntityLinker":
        """The linker of an `EntityTable`'s entities: their keys and their aliases' (`EntityTable.alias_keys`);
        with `name_parts`, one-word persons resolved within a text (`NameParts`)."""
        parts = NameParts.of(table.names, table.kinds) if name_parts and table.kinds is not None else None
        return cls(table.keys, min_length, table.alias_keys(), parts)

    @classmethod
    def of_config(cls, table, config: LinkConfig) -> "EntityLinker":
        """The linker that links a corpus as `config` says (its shortest name, one-word persons): the one of
        `drkit index`, `drkit add` and Ray linking alike."""
        return cls.of_table(table, config.min_name_length, config.name_parts)

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """Mentions in `text` as ``(char_start, char_end, entity_id)``, end exclusive, in text order. Text not in
        Unicode's composed form (NFC) is matched in it, the offsets mapped back to `text`'s."""
        if not len(self._automaton):
            return []
        normal, starts = nfc_spans(text)
        if starts is not None:
            return [(starts[a], starts[b], e) for a, b, e in self._find(normal)]
        return self._find(text)

    def _find(self, text: str) -> list[tuple[int, int, int]]:
        folded = fold(text)
        candidates = []
        for last, (entity_id, length, suffix) in self._automaton.iter(folded):
            start, end = last - length + 1, last + 1
            if is_token_boundary(folded, start) and is_token_boundary(folded, end):
                written = WRITTEN_SUFFIX.match(folded, end) if suffix is not None else None
                other = written is not None and suffix_conflicts(suffix, written.group(1), self._kinds)
                # a bare form that names another page is linked to nothing, and no shorter name inside it either
                candidates.append((start, -length, -1 if other else entity_id))
        candidates.sort()
        mentions, covered_to = [], 0
        for start, neg_length, entity_id in candidates:
            if start >= covered_to:
                if entity_id >= 0:
                    mentions.append((start, start - neg_length, entity_id))
                covered_to = start - neg_length
        return self.parts.resolve(mentions) if self.parts is not None else mentions


PARTICLES = frozenset("of von van de del della der den du da di la le the y".split())  # lower case in a name
HONORIFICS = frozenset(
    "king queen prince princess duke duchess count countess earl lord lady sir dame baron baroness marquis marquess "
    "emperor empress tsar czar sultan caliph shah khan pope saint st bishop archbishop cardinal president general "
    "captain admiral colonel major mr mrs ms miss dr".split())


@dataclass(frozen=True)
class NameParts:
    """The one-word persons of an entity table and the parts of its longer person names (module docstring):
    `short` maps an entity named by one word to that word, folded; `parts` maps an entity of a longer name to
    the folded words that may stand for it (its first word, and its last when the name has no comma or "of")."""

    short: dict[int, str]
    parts: dict[int, tuple[str, ...]]

    @classmethod
    def of(cls, names: Sequence[str], kinds: Sequence[str | None]) -> "NameParts":
        short, parts = {}, {}
        for i, (name, kind) in enumerate(zip(names, kinds)):
            bare = bare_title(name)  # "Nearchos (painter)": "Nearchos", one word, no parts
            base = name if bare is None else bare
            words = [w for w in (w.strip(".,") for w in base.split()) if w]
            if len(words) == 1 and bare is None and kind == "PERSON" and fold(words[0]) not in HONORIFICS:
                short[i] = fold(words[0])
            elif len(words) > 1 and kind in ("PERSON", None) and all(w[0].isupper() or w in PARTICLES for w in words):
                own = {fold(words[0])} | ({fold(words[-1])} if "," not in base and "of" not in words else set())
                parts[i] = tuple(sorted(own - HONORIFICS))
        return cls(short, parts)

    def resolve(self, mentions: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
        """`mentions` ((start, end, entity), text order) with each one-word person that exactly one longer name
        given before it in the text has as a part made that name's entity."""
        seen: dict[str, set[int]] = {}
        out = []
        for start, end, entity in mentions:
            word = self.short.get(entity)
            if word is not None:
                named = seen.get(word, ())
                if len(named) == 1:
                    entity = next(iter(named))
            else:
                for part in self.parts.get(entity, ()):
                    seen.setdefault(part, set()).add(entity)
            out.append((start, end, entity))
        return out


def link_question(question: str, linker: EntityLinker, entity_frequency: np.ndarray) -> tuple[int | None, list[int]]:
    """The question entity of a plain question, and every entity named in it (ids, ascending).

    The names are found as `linker` finds them in the corpus; of several, the one least frequent in the
    corpus (`entity_frequency`: mentions per entity) is the question entity, the lower id on a tie
    (paper, Appendix A). None when no name is found."""
    found = sorted({e for _, _, e in linker.find(question)})
    if not found:
        return None, []
    return int(min(found, key=lambda e: (entity_frequency[e], e))), found


class MentionColumns:
    """`mention_entity` and `mention_passage` (B_{M->E} and each mention's passage) of a class whose
    `mentions` is the (M, 6) array of `LinkedCorpus.MENTION_COLUMNS`."""

    mentions: np.ndarray

    @property
    def mention_entity(self) -> np.ndarray:
        return self.mentions[:, 0]

    @property
    def mention_passage(self) -> np.ndarray:
        return self.mentions[:, 1]


@dataclass
class LinkedCorpus(MentionColumns):
    """Articles cut into passages, with their word pieces and entity mentions (all arrays row-aligned)."""

    article_keys: list[str]
    article_titles: list[str]
    passage_texts: list[str]
    passage_article: np.ndarray  # (P,) int32
    passage_char_start: np.ndarray  # (P,) int64, offset in its article's content of the passage's slice
    piece_offsets: np.ndarray  # (P+1,) int64, passage p owns pieces[piece_offsets[p]:piece_offsets[p+1]]
    pieces: np.ndarray  # (total pieces,) int32 word-piece ids
    mentions: np.ndarray  # (M, 6) int32: entity, passage, piece_start, piece_end (inclusive), char_start, char_end
    # (P,) int32: characters of the carried title line in front of the passage's slice (0 for an article's
    # first passage): passage_texts[p][k:] == content[passage_char_start[p]:][:len(passage_texts[p]) - k]
    passage_title_chars: np.ndarray | None = None

    MENTION_COLUMNS = ("entity", "passage", "piece_start", "piece_end", "char_start", "char_end")

    def __post_init__(self):
        if self.passage_title_chars is None:
            self.passage_title_chars = np.zeros(len(self.passage_texts), dtype=np.int32)

    @property
    def n_passages(self) -> int:
        return len(self.passage_texts)



def _cut_points(n: int, max_len: int, legal: np.ndarray, preferred: np.ndarray, later_max_len: int | None = None) -> list[int]:
    """Passage boundaries for a sequence of `n` pieces: ``[0, c1, ..., n]``.

    ``legal[i]`` says a passage may start at piece i; ``preferred[i]`` that it starts a sentence
    or a line. The first passage gets at most `max_len` pieces, the others at most `later_max_len`
    (default `max_len`); a preferred cut in the second half of the window wins over a later legal one.
    """
    cuts = [0]
    start, limit = 0, max_len
    while n - start > limit:
        window = slice(start + 1, start + limit + 1)
        ok = np.flatnonzero(legal[window]) + start + 1
        if len(ok) == 0:
            cut = start + limit  # only possible when one mention is longer than a passage
        else:
            pref = ok[preferred[ok] & (ok > start + limit // 2)]
            cut = int(pref[-1]) if len(pref) else int(ok[-1])
        cuts.append(cut)
        start, limit = cut, later_max_len or max_len
    cuts.append(n)
    return cuts


def link_corpus(
    articles: Iterable[Article],
    linker: EntityLinker,
    config: LinkConfig = LinkConfig(),
    warnings: WarningLog | None = None,
    batch_size: int = 256,
    total: int | None = None,
    entity_of=None,
    quiet: bool = False,
) -> LinkedCorpus:
    """Link, tokenize and split every article; see the module docstring. An article with hyperlinks
    (`Article.links`) takes them as the mentions of its text, each the entity ``entity_of(target title)``
    (a link whose target is not an entity, or that overlaps an earlier one, is counted and left out); the
    linker then links its title line only. `quiet`: no progress bar (a caller that links runs of articles
    shows its own)."""
    warnings = warnings if warnings is not None else WarningLog()
    tokenizer = load_tokenizer(config.encoder)
    keys, titles, texts = [], [], []
    passage_article, passage_char_start, passage_title_chars = [], [], []
    piece_chunks, piece_lengths, mention_rows = [], [], []

    def process(batch: list[Article]) -> None:
        contents = [a.content for a in batch]
        encoded = tokenizer(contents, add_special_tokens=False, return_offsets_mapping=True,
                            return_attention_mask=False, return_token_type_ids=False)
        for article, content, ids, offsets in zip(batch, contents, encoded["input_ids"], encoded["offset_mapping"]):
            _split_article(len(keys), article, content, np.asarray(ids, dtype=np.int32),
                           np.asarray(offsets, dtype=np.int64).reshape(-1, 2))
            keys.append(article.key)
            titles.append(article.title)

    def _split_points(content, tok_start, tok_end, spans, title_pieces):
        n = len(tok_start)
        # A passage may start at piece i unless i continues a word, lies inside a mention or inside a carried title.
        legal = np.array([i == 0 or is_token_boundary(content, int(tok_start[i])) or tok_start[i] > tok_end[i - 1]
                          for i in range(n)], dtype=bool)
        for ps, pe, *_ in spans:
            legal[ps + 1 : pe + 1] = False
        legal[1:title_pieces] = False
        preferred = np.zeros(n, dtype=bool)
        for i in range(1, n):
            between = content[tok_end[i - 1] : tok_start[i]]
            preferred[i] = "\n" in between or content[tok_end[i - 1] - 1] in _SENTENCE_END
        return _cut_points(n, config.max_passage_pieces, legal, preferred,
                           later_max_len=config.max_passage_pieces - title_pieces)

    def _split_article(article_id, article, content, ids, offsets):
        n = len(ids)
        found = linker.find(content)
        if article.links is not None:
            found = _link_mentions(article, found)
        if n == 0:
            warnings.add("article_without_pieces", f"article {article.key!r} (line {article.source_line}) has no word pieces")
            return
        tok_start, tok_end = offsets[:, 0], offsets[:, 1]
        spans = []  # (piece_start, piece_end_inclusive, char_start, char_end, entity)
        for cs, ce, entity_id in found:
            ps = int(np.searchsorted(tok_end, cs, side="right"))  # first piece ending after cs
            pe = int(np.searchsorted(tok_start, ce, side="left")) - 1  # last piece starting before ce
            if ps > pe:
                warnings.add("mention_without_pieces", f"article {article.key!r}: {content[cs:ce]!r} covers no word piece")
                continue
            spans.append((ps, pe, cs, ce, entity_id))
        if n <= config.max_passage_pieces:
            cuts, t = [0, n], 0
        else:
            # the title line (content = title + "\n" + text) is carried into every later passage: its t pieces
            t = int(np.searchsorted(tok_start, len(article.title), side="left")) if article.text else 0
            if t > config.max_passage_pieces // 2:
                warnings.add("title_not_carried", f"article {article.key!r} (line {article.source_line}): its title "
                             f"has {t} word pieces, more than half a passage; only its first passage holds it")
                t = 0
            cuts = _split_points(content, tok_start, tok_end, spans, t)
        prefix = content[: len(article.title) + 1] if t else ""  # title + "\n"
        title_spans = [sp for sp in spans if sp[3] <= len(article.title)] if t else []
        span_i = 0
        for a, b in zip(cuts[:-1], cuts[1:]):
            passage_id = len(texts)
            c0, c1 = int(tok_start[a]), int(tok_end[b - 1])
            carried, shift, k = (a > 0 and t > 0), 0, 0
            if carried:  # pieces ids[:t] and chars prefix in front; the title's mentions as in the first passage
                shift, k = t, len(prefix)
                for ps, pe, cs, ce, entity_id in title_spans:
                    mention_rows.append((entity_id, passage_id, ps, pe, cs, ce))
            texts.append(prefix + content[c0:c1] if carried else content[c0:c1])
            passage_article.append(article_id)
            passage_char_start.append(c0)
            passage_title_chars.append(k)
            piece_chunks.append(np.concatenate([ids[:t], ids[a:b]]) if carried else ids[a:b])
            piece_lengths.append(b - a + shift)
            while span_i < len(spans) and spans[span_i][0] < b:
                ps, pe, cs, ce, entity_id = spans[span_i]
                span_i += 1
                if pe >= b:
                    warnings.add("mention_cut_by_passage", f"article {article.key!r}: {content[cs:ce]!r} is longer than a passage")
                    continue
                mention_rows.append((entity_id, passage_id, ps - a + shift, pe - a + shift, cs - c0 + k, ce - c0 + k))

    def _link_mentions(article, found):
        head = len(article.title) + 1  # content = title + "\n" + text
        out = [f for f in found if f[1] < head]  # the title line, linked by the linker
        for start, end, target in sorted(article.links):
            entity_id = entity_of(target) if entity_of is not None else None
            if entity_id is None:
                warnings.add("link_target_not_entity", f"article {article.key!r} (line {article.source_line}): link "
                             f"to {target!r} is not an entity of the index; not a mention")
                continue
            if out and head + start < out[-1][1]:
                warnings.add("overlapping_link", f"article {article.key!r} (line {article.source_line}): link to "
                             f"{target!r} overlaps the previous one; left out")
                continue
            out.append((head + start, head + end, entity_id))
        return out

    batch: list[Article] = []
    for article in (articles if quiet else progress(articles, desc="link", unit="article", total=total)):
        batch.append(article)
        if len(batch) == batch_size:
            process(batch)
            batch = []
    if batch:
        process(batch)

    piece_offsets = np.zeros(len(piece_lengths) + 1, dtype=np.int64)
    np.cumsum(piece_lengths, out=piece_offsets[1:])
    return LinkedCorpus(
        article_keys=keys,
        article_titles=titles,
        passage_texts=texts,
        passage_article=np.asarray(passage_article, dtype=np.int32),
        passage_char_start=np.asarray(passage_char_start, dtype=np.int64),
        piece_offsets=piece_offsets,
        pieces=np.concatenate(piece_chunks) if piece_chunks else np.zeros(0, dtype=np.int32),
        mentions=np.asarray(mention_rows, dtype=np.int32).reshape(-1, 6),
        passage_title_chars=np.asarray(passage_title_chars, dtype=np.int32),
    )
