"""Click options built from config dataclass fields, so a setting is defined once.

A field's `metadata` holds what the CLI shows: "help", "choices" (a tuple, or a function
returning one, e.g. a registry's names) and number bounds "min" / "max" ("min_open": the
minimum itself is refused). Its default is the option's default. The command module adds
only what is the CLI's own: the flag name, a metavar, a click type for paths, and `parse` /
`show` for a value typed on the command line in another form (e.g. "1,4" for (1, 4)).
`config_values` then turns the parsed parameters back into the dataclass's keyword
arguments, with deprecated flag names merged in.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

F = typing.TypeVar("F", bound=Callable[..., Any])
_OWN = ("help", "default", "show_default")  # the field's, never the command's
_ALIAS = "{}__deprecated"


class FieldOption(click.Option):
    """An option whose default, help, choices and bounds are those of one dataclass field;
    `deprecated` names old flags that still work, with a warning on stderr."""

    def __init__(self, decls: Sequence[str], *, config: type, field_name: str,
                 deprecated: tuple[str, ...] = (), **attrs: Any) -> None:
        super().__init__(decls, **attrs)
        self.config, self.field_name, self.deprecated_flags = config, field_name, deprecated


def config_field(config: type, name: str) -> dataclasses.Field:
    for f in dataclasses.fields(config):
        if f.name == name:
            return f
    raise ValueError(f"{config.__name__} has no field {name!r}")


def field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None  # a required field: the command marks its option required


def field_choices(f: dataclasses.Field) -> tuple[str, ...] | None:
    choices = f.metadata.get("choices")
    if choices is None:
        return None
    return tuple(choices() if callable(choices) else choices)


def _base_type(config: type, name: str) -> Any:
    hint = typing.get_type_hints(config)[name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _click_type(config: type, f: dataclasses.Field) -> Any:
    choices = field_choices(f)
    if choices is not None:
        return click.Choice(choices)
    base = _base_type(config, f.name)
    low, high = f.metadata.get("min"), f.metadata.get("max")
    if base is int and (low is not None or high is not None):
        return click.IntRange(low, high, min_open=f.metadata.get("min_open", False))
    if base is float and (low is not None or high is not None):
        return click.FloatRange(low, high, min_open=f.metadata.get("min_open", False))
    if base is Path:
        return click.Path(path_type=Path)
    return base if base in (int, float, str) else None


def _parsed(parse: Callable[[Any], Any] | None, default: Any) -> Callable | None:
    """A click callback: what was typed through `parse` (a ValueError is a usage error);
    nothing typed is the field's default."""
    if parse is None:
        return None

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None:
            return default
        try:
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx, param) from exc
    return callback


def _warn(old: str, new: str, parse: Callable | None, default: Any) -> Callable:
    callback = _parsed(parse, default)

    def warn(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if ctx.get_parameter_source(param.name) is not click.core.ParameterSource.DEFAULT:
            click.echo(f"warning: {old} is deprecated and will be removed; use {new}",
                       err=True)
        return callback(ctx, param, value) if callback else value
    return warn


def field_option(config: type, name: str, *flags: str, parse: Callable[[Any], Any] | None
                 = None, show: Callable[[Any], str] | None = None, default_note: str = "",
                 deprecated: tuple[str, ...] = (), **attrs: Any) -> Callable[[F], F]:
    """The option of field `name` of `config`, as `flags` (default `--the-name`).

    `parse` turns what was typed into the field's value (a ValueError is a usage error);
    `show` writes the default the way it is typed; `default_note` is added to the shown
    default (e.g. "8 with --quick"). Other `attrs` go to click (metavar, type, required...).
    """
    clash = [k for k in _OWN if k in attrs]
    if clash:
        raise TypeError(f"{', '.join(clash)} of --{name} come from {config.__name__}.{name}")
    f = config_field(config, name)
    if "help" not in f.metadata:
        raise TypeError(f"{config.__name__}.{name} has no help in its metadata")
    default = field_default(f)
    flag = flags[0] if flags else "--" + name.replace("_", "-")
    kind = _base_type(config, name)
    if kind is bool:
        decls = [f"{flag}/--no-{flag[2:]}" if default else flag, name]
        attrs.setdefault("is_flag", True)
    else:
        decls = [flag, name]
        attrs.setdefault("type", _click_type(config, f) if parse is None else str)
    # typed in another form: the option's default is that form, or nothing (the field's)
    typed = default if parse is None else (show(default) if show else None)
    if attrs.get("multiple") and typed is None:
        typed = ()
    shown = typed if typed not in (None, "", ()) and kind is not bool else None
    help_text = f.metadata["help"]
    if default_note:  # click shows a default, not a default and a note
        words = [str(x) for x in (shown, default_note) if x is not None]
        help_text += f"  [default: {'; '.join(words)}]"
    else:
        attrs["show_default"] = shown is not None
    if parse is not None:
        attrs["callback"] = _parsed(parse, default)

    def decorate(fn: F) -> F:
        for old in deprecated:
            click.option(old, _ALIAS.format(name), hidden=True, type=attrs.get("type"),
                         multiple=attrs.get("multiple", False),
                         is_flag=attrs.get("is_flag", False),
                         callback=_warn(old, flag, parse, default))(fn)
        # a required option gets no default at all: click (8.3+) counts an explicit
        # default=None as a value, and would let the option be left out
        given = {} if typed is None and attrs.get("required") else {"default": typed}
        return click.option(*decls, cls=FieldOption, config=config, field_name=name,
                            deprecated=deprecated, help=help_text, **given,
                            **attrs)(fn)
    return decorate


def config_values(ctx: click.Context, config: type, *, given_only: bool = False
                  ) -> dict[str, Any]:
    """The parsed parameters that are fields of `config`, by field name, with a deprecated
    flag's value in place of its new one's. `given_only`: only what was typed or set in the
    environment, so the dataclass (or a preset) supplies the rest."""
    default = click.core.ParameterSource.DEFAULT
    out: dict[str, Any] = {}
    for param in ctx.command.params:
        if not isinstance(param, FieldOption) or param.config is not config:
            continue
        name, alias = param.name, _ALIAS.format(param.name)
        source = ctx.get_parameter_source(name)
        if param.deprecated_flags and ctx.get_parameter_source(alias) not in (None, default):
            if source is not default:
                raise click.UsageError(f"give {param.opts[0]} only ("
                                       f"{', '.join(param.deprecated_flags)}: its old name)")
            out[name] = ctx.params[alias]
        elif not given_only or source is not default:
            out[name] = ctx.params[name]
    return out


def named_values(values: Sequence[str], default: str, what: str) -> dict[str, str]:
    """`[NAME=]VALUE` options (`--candidate fast=URL`, `--target URL`, `--capacity DIR`) as
    NAME -> VALUE, a bare VALUE named `default`. An URL holds '=' only after its scheme, so
    NAME=URL splits at the first '=' before '://'. A name given twice is a ValueError naming
    it as `what` (the caller words the option)."""
    out: dict[str, str] = {}
    for value in values:
        head, sep, tail = value.partition("=")
        name, got = (head, tail) if sep and "://" not in head else (default, value)
        if name in out:
            raise ValueError(f"{what} {name!r} given twice")
        out[name] = got
    return out
