"""What every command of the ``ablate`` command line shares: one handler of user errors.

Every typer app of the package is made by :func:`typer_app`, whose commands run inside
:class:`HandledGroup`: an :class:`~ablate.errors.AblateError` raised anywhere below a command
becomes one red line on stderr and exit status 2, never a traceback. Anything else is a bug.
"""

from __future__ import annotations

import importlib
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from ablate.errors import AblateError
from ablate.utils.plugins import user_error_line


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: MESSAGE`` as one red line on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def untyped_flags(params: list[Any]) -> list[Any]:
    """``params`` with no type column for flags: ``--overwrite``, not ``--overwrite <bool>``.

    Typer 0.2x shows every option's type in ``--help``, a flag's (which takes no value) as
    ``<bool>``; an empty metavar is shown instead. Options that take a value keep theirs.
    """
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class PlainFlagsCommand(TyperCommand):
    """A command whose ``--help`` shows flags without a ``<bool>`` (:func:`untyped_flags`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return untyped_flags(super().get_params(ctx))


class HandledGroup(TyperGroup):
    """A command group whose commands' user errors end as :func:`fail` (one line, exit 2)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return untyped_flags(super().get_params(ctx))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except AblateError as err:
            fail(user_error_line(err) or str(err))
        except Exception as err:  # noqa: BLE001 - a plugin's plain exception is its author's line, not our traceback
            line = user_error_line(err)
            if line is None:
                raise  # ablate's own bug: the traceback is what a report needs
            fail(line)


class AblateTyper(typer.Typer):
    """A ``typer.Typer`` whose commands default to :class:`PlainFlagsCommand`."""

    def command(self, *args: Any, cls: Any = None, **kwargs: Any) -> Any:
        return super().command(*args, cls=cls or PlainFlagsCommand, **kwargs)


class LazyGroup(HandledGroup):
    """A :class:`HandledGroup` whose other commands are imported only when one of them runs.

    :attr:`lazy` names each command's module and its one-line help; ``--help`` and shell completion of
    command names list them from that alone, and the module is imported when the command (or the
    completion of its arguments) is resolved, so ``ablate table`` never imports what ``ablate train``
    needs. A module provides the commands as ``app`` (a ``typer.Typer``) or ``register(app)``; a command
    whose entry names no command in it is the whole ``app`` as a group (``ablate sweep ...``).
    """

    lazy: dict[str, tuple[str, str]] = {}
    """Command name -> (module, one-line help)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, (_, help) in self.lazy.items():
            self.commands.setdefault(name, _Pending(name, help=help))

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        if isinstance(cmd, _Pending) and name is not None:
            cmd = self.commands[name] = self.load(name)
        return name, cmd, rest

    def load(self, name: str) -> Any:
        """Import the command ``name`` from its module (a click command)."""
        module = importlib.import_module(self.lazy[name][0])
        app = getattr(module, "app", None)
        if app is None:
            app = typer_app()
            module.register(app)
        group = typer.main.get_group(app)
        if name in group.commands:
            return group.commands[name]
        group.name, group.help = name, self.lazy[name][1]
        return group


class _Pending(TyperCommand):
    """A command not imported yet: its name and help, for listings (:class:`LazyGroup`)."""


def typer_app(*, cls: type[HandledGroup] = HandledGroup, **kwargs: Any) -> typer.Typer:
    """A ``typer.Typer`` whose commands report user errors through :class:`HandledGroup` (or ``cls``)."""
    kwargs.setdefault("pretty_exceptions_enable", False)
    return AblateTyper(cls=cls, **kwargs)


def plugins_option() -> Any:
    """``--plugins PATH`` (repeatable) of a command that loads a run: the user's own plugin files or
    modules, imported first; a plugin the run's record names is imported when it is one of them."""
    return typer.Option(
        None,
        "--plugins",
        metavar="PATH",
        help="Your plugin file (or module) to import; a plugin the run's record names is imported "
        "only if it is this code (same sha256). Repeatable.",
    )


def trust_plugins_option() -> Any:
    """``--trust-plugins``: import every plugin the run's record names (its code runs)."""
    return typer.Option(
        False,
        "--trust-plugins",
        help="Import every plugin file the run's record names: its code runs. Only for folders you trust.",
    )
