"""Command-line flags generated from a stage's frozen settings dataclass, and the settings read back; the
commands' registry (`command`), so that a command's flags are built only when it runs."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re

from drkit.errors import ConfigError

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Command:
    """A ``drkit`` command: its name, its one-line help and description, and the function that adds its flags
    to its parser (which imports what the flags need, the settings dataclasses and torch with them)."""

    name: str
    help: str
    description: str
    build: object  # (argparse.ArgumentParser) -> None


COMMANDS: dict[str, Command] = {}  # every command, by name, as the modules of drkit.cli define them


def command(name: str, help: str, description: str):
    """Register the decorated function as the flag builder of the command `name` (`drkit.cli.build_parser`)."""
    def register(build):
        if name in COMMANDS:
            raise ValueError(f"two commands are named {name!r}")
        COMMANDS[name] = Command(name, help, description, build)
        return build
    return register


@dataclasses.dataclass(frozen=True)
class FromEnv:
    """A flag's default taken from an environment variable, converted (and checked) by `config_from_args`."""

    variable: str
    text: str


def env_name(prefix: str, field_name: str) -> str:
    return prefix + field_name.upper()


def add_config_flags(parser: argparse.ArgumentParser, config_cls, title: str, exclude: tuple = (),
                     env_prefix: str | None = None) -> None:
    """One ``--field-name`` flag per field of the frozen dataclass `config_cls`, its help from the field's
    ``metadata["help"]``. A field whose default is None (meaning "keep what the artifact says") gives its
    type in ``metadata["type"]`` (and ``metadata["default_help"]`` says what it means);
    ``metadata["choices"]`` restricts the values; ``metadata["nargs"]`` takes several (a tuple field). Fields
    in `exclude` get no flag (their defaults stand). With `env_prefix`, the environment variable
    ``{env_prefix}{FIELD_NAME}`` (e.g. DRKIT_MAX_BATCH), when set, replaces the default (a flag given still wins)."""
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(config_cls):
        if f.name in exclude:
            continue
        flag, dest = "--" + f.name.replace("_", "-"), f"{config_cls.__name__}.{f.name}"
        shown = f.metadata.get("default_help", "the model's" if f.default is None else f.default)
        help_text = f"{f.metadata.get('help', '')} (default: {shown}"
        default = f.default
        if env_prefix:
            variable = env_name(env_prefix, f.name)
            help_text += f"; environment: {variable}"
            if variable in os.environ:
                default = FromEnv(variable, os.environ[variable])
        help_text = (help_text + ")").replace("%", "%%")  # argparse %-formats help ("58% of the time")
        if isinstance(f.default, bool):
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default, help=help_text)
            continue
        choices = f.metadata.get("choices")
        kind = f.metadata.get("type", str if choices else type(f.default))
        if kind is type(None):  # a None default says nothing of the values the flag takes
            raise TypeError(f"{config_cls.__name__}.{f.name} defaults to None: its metadata must give a 'type'")
        group.add_argument(flag, dest=dest, type=kind, default=default, choices=choices, nargs=f.metadata.get("nargs"),
                           metavar=None if choices else kind.__name__.upper(), help=help_text)


def _from_env(value: FromEnv, f: dataclasses.Field):
    """The value of an environment variable for field `f`, converted as its flag would convert it."""
    text = value.text.strip()
    if isinstance(f.default, bool):
        if text.lower() not in TRUE + FALSE:
            raise ConfigError(f"environment variable {value.variable}={value.text!r}: expected one of "
                              f"{', '.join(TRUE + FALSE)}")
        return text.lower() in TRUE
    choices = f.metadata.get("choices")
    kind = f.metadata.get("type", str if choices else type(f.default))
    try:
        converted = kind(text)
    except (TypeError, ValueError):
        raise ConfigError(f"environment variable {value.variable}={value.text!r}: not a valid "
                          f"{kind.__name__}") from None
    if choices and converted not in choices:
        raise ConfigError(f"environment variable {value.variable}={value.text!r}: must be one of {', '.join(choices)}")
    return converted


def config_from_args(args: argparse.Namespace, config_cls):
    """The settings of `config_cls` read from the flags (and the environment variables that were their defaults);
    `ConfigError` naming the variable when one cannot be read."""
    prefix = config_cls.__name__ + "."
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    values = {}
    for k, v in vars(args).items():
        if k.startswith(prefix):
            name = k[len(prefix):]
            values[name] = _from_env(v, fields[name]) if isinstance(v, FromEnv) else v
    try:
        return config_cls(**values)
    except ConfigError as exc:  # the settings' names as flags: "batch_size" is --batch-size
        message = str(exc)
        subject = message.split(" must ")[0] if " must " in message else ""  # "top and batch_size must be ..."
        named = [n for n in values if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", message if "_" in n else subject)]
        if not named or "--" in message:
            raise
        raise ConfigError(f"{message} (flags: {', '.join('--' + n.replace('_', '-') for n in named)})") from None
