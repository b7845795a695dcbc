"""Command-line flags generated from a stage's frozen settings dataclass, and the settings read back."""

from __future__ import annotations

import argparse
import dataclasses


def add_config_flags(parser: argparse.ArgumentParser, config_cls, title: str, exclude: tuple = ()) -> None:
    """One ``--field-name`` flag per field of the frozen dataclass `config_cls`, its help from the field's
    ``metadata["help"]``. A field whose default is None (meaning "keep what the artifact says") gives its
    type in ``metadata["type"]`` (and ``metadata["default_help"]`` says what it means);
    ``metadata["choices"]`` restricts the values; ``metadata["nargs"]`` takes several (a tuple field). Fields
    in `exclude` get no flag (their defaults stand)."""
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(config_cls):
        if f.name in exclude:
            continue
        flag, dest = "--" + f.name.replace("_", "-"), f"{config_cls.__name__}.{f.name}"
        shown = f.metadata.get("default_help", "the model's" if f.default is None else f.default)
        help_text = f"{f.metadata.get('help', '')} (default: {shown})"
        if isinstance(f.default, bool):
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
            continue
        choices = f.metadata.get("choices")
        kind = f.metadata.get("type", str if choices else type(f.default))
        group.add_argument(flag, dest=dest, type=kind, default=f.default, choices=choices, nargs=f.metadata.get("nargs"),
                           metavar=None if choices else kind.__name__.upper(), help=help_text)


def config_from_args(args: argparse.Namespace, config_cls):
    prefix = config_cls.__name__ + "."
    return config_cls(**{k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix)})
