"""What every command of the ``ablate`` command line shares: one handler of user errors.

Every typer app of the package is made by :func:`typer_app`, whose commands run inside
:class:`HandledGroup`: an :class:`~ablate.errors.AblateError` raised anywhere below a command
becomes one red line on stderr and exit status 2, never a traceback. Anything else is a bug.
"""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from ablate.errors import AblateError


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: MESSAGE`` as one red line on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


class HandledGroup(TyperGroup):
    """A command group whose commands' user errors end as :func:`fail` (one line, exit 2)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except AblateError as err:
            fail(str(err))


def typer_app(**kwargs: Any) -> typer.Typer:
    """A ``typer.Typer`` whose commands report user errors through :class:`HandledGroup`."""
    kwargs.setdefault("pretty_exceptions_enable", False)
    return typer.Typer(cls=HandledGroup, **kwargs)
