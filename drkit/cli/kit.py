"""The flags that name a trained model over its index (``ask``, ``evaluate``, ``answer``), and the kit loaded from them."""

from __future__ import annotations

from drkit.cli.flags import add_config_flags, config_from_args


def model_flags(p) -> None:
    from drkit.qa.pipeline import LoadConfig, QueryConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index")
    p.add_argument("--model", required=True, metavar="DIR", help="trained model: a 'drkit train' run or its model/ directory")
    p.add_argument("--mentions", metavar="DIR", default=None,
                   help="mention index (default: the one the model was trained with)")
    add_config_flags(p, LoadConfig, "virtual KB")
    add_config_flags(p, QueryConfig, "question time (overrides of the model's settings)")


def load_kit(args, reader=None, reading=None):
    from drkit.qa.pipeline import DrKIT, LoadConfig, QueryConfig

    extra = {"reader": reader, "reading": reading} if reader is not None else {}
    return DrKIT.load(args.index, args.model, args.mentions, config_from_args(args, LoadConfig), **extra), \
        config_from_args(args, QueryConfig)
