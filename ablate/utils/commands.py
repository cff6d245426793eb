"""What every command of the ``ablate`` command line shares: one-line user errors (:class:`HandledGroup`, for every
app :func:`typer_app` makes), status lines on stderr from rank zero (:func:`setup_logging`; what a command produces
goes to stdout), and the warnings ignored as noise (:data:`WARNING_FILTERS`; any other reaches the user).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

try:  # typer 0.2x raises its own copy of click's exceptions
    import typer._click.exceptions as click_errors
except ImportError:
    import click.exceptions as click_errors  # type: ignore[no-redef]

from ablate.utils.io import unlinked
from ablate.utils.plugins import user_error_line


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: MESSAGE`` as one red line on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


class _PlainFlags:
    """``--help`` with no type column for flags: ``--overwrite``, not typer 0.2x's ``--overwrite <bool>`` (an empty
    metavar); options that take a value keep theirs."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class PlainFlagsCommand(_PlainFlags, TyperCommand):
    """A command whose ``--help`` shows flags without a ``<bool>``."""


@contextmanager
def one_line_usage_errors(ctx: Any) -> Iterator[None]:
    """A usage error (a bad option value, an unknown option or command) as :func:`fail`'s one line, naming the
    ``--help`` to read, instead of click's framed block; a group run bare still shows its help."""
    try:
        yield
    except click_errors.UsageError as err:
        if isinstance(err, getattr(click_errors, "NoArgsIsHelpError", ())):
            raise
        message, name = err.format_message(), getattr(err, "option_name", None) or ""
        if isinstance(err, click_errors.NoSuchOption) and name.startswith("--") and "." in name:  # W&B's ${args}
            key = name.removeprefix("--")
            message = (
                f"No such option: {name}: config keys take no dashes ({key}=VALUE); a W&B sweep's command passes "
                "them so with ${args_no_hyphens}, not ${args}"
            )
        fail(f"{message} (see {(err.ctx or ctx).command_path} --help)")


class HandledGroup(_PlainFlags, TyperGroup):
    """A command group whose commands' user errors end as :func:`fail` (one line, exit 2); flags as
    :class:`PlainFlagsCommand` shows them."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with one_line_usage_errors(ctx):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            with one_line_usage_errors(ctx):  # a subcommand's options are parsed in here
                return super().invoke(ctx)
        except Exception as err:  # noqa: BLE001 - an AblateError, or a plugin's plain exception: one line
            line = user_error_line(err)
            if line is None:
                raise  # ablate's own bug: the traceback is what a report needs
            fail(line)


class AblateTyper(typer.Typer):
    """A ``typer.Typer`` whose commands default to :class:`PlainFlagsCommand`."""

    def command(self, *args: Any, cls: Any = None, **kwargs: Any) -> Any:
        return super().command(*args, cls=cls or PlainFlagsCommand, **kwargs)


class LazyGroup(HandledGroup):
    """A :class:`HandledGroup` whose other commands are imported only when one of them is resolved.

    ``--help`` lists them from :attr:`lazy` alone. A module provides the commands as ``app`` (a ``typer.Typer``)
    or ``register(app)``; an entry naming no command in it is the whole ``app`` as a group (``ablate sweep``).
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
    """``--plugins PATH`` (repeatable) of a command that loads a run."""
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


LEVELS = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}
"""``-q`` (-1), default (0), ``-v`` (1) -> the level of the ``ablate`` logger."""


def rank_zero(record: Any = None) -> bool:
    """Whether this process has global rank zero (Lightning's rank once known, else the launcher's environment);
    a logging filter: DDP ranks run the same code and would repeat each record."""
    rank_zero = sys.modules.get("lightning_utilities.core.rank_zero")
    rank = getattr(getattr(rank_zero, "rank_zero_only", None), "rank", None)
    if isinstance(rank, int):
        return rank == 0
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"]) == 0
    return os.environ.get("LOCAL_RANK", "0") in ("", "0") and os.environ.get("NODE_RANK", "0") in ("", "0")


PREFIXES = ((logging.ERROR, "error: ", "red"), (logging.WARNING, "warning: ", "yellow"), (logging.NOTSET, "", ""))
"""``(lowest level, prefix, rich style)`` of a console line, the first whose level a record reaches."""


class ConsoleHandler(logging.Handler):
    """Each record as one line on stderr through rich: ``warning: ...`` in yellow, info plain.

    A line is never wrapped (soft wrap), so a sweep trial's log file holds one line per message;
    colour only on a terminal. The stream is looked up at each message (``sys.stderr`` then), so a
    redirected or captured stderr gets it.
    """

    def __init__(self, level: int = logging.NOTSET):
        super().__init__(level)
        self.console = Console(stderr=True, soft_wrap=True, highlight=False)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            prefix, style = next((prefix, style) for level, prefix, style in PREFIXES if record.levelno >= level)
            self.console.print(Text(prefix + self.format(record), style=style), markup=False, emoji=False)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def setup_logging(verbosity: int = 0) -> logging.Handler:
    """Configure the ``ablate`` logger: one :class:`ConsoleHandler` (rank zero only) at the level for
    ``verbosity`` (-1 quiet: warnings only, 0: info, 1 verbose: debug). Calling it again replaces
    the handler it added before, so it is safe to call once per command (tests run many)."""
    logger = logging.getLogger("ablate")
    for old in [h for h in logger.handlers if isinstance(h, ConsoleHandler)]:
        logger.removeHandler(old)
    handler = ConsoleHandler()
    handler.addFilter(rank_zero)
    logger.addHandler(handler)
    logger.setLevel(LEVELS[max(-1, min(1, verbosity))])
    logger.propagate = False  # a root handler (a host application's) would print each line twice
    return handler


def verbosity_of(quiet: bool, verbose: Optional[bool]) -> int:
    """``-q`` / ``-v`` flags -> :func:`setup_logging`'s verbosity (quiet wins)."""
    return -1 if quiet else 1 if verbose else 0


CAPTURED = ("ablate", "pytorch_lightning", "lightning.pytorch")
"""The loggers whose records a run's ``console.log`` keeps: ablate's status lines and warnings, Lightning's."""


@contextmanager
def environment_kept(names: tuple[str, ...]) -> Iterator[None]:
    """The environment variables ``names`` as they were before the block, afterwards (set, changed or unset)."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def capture(path: Path) -> Iterator[None]:
    """Append what the console is told (the records of :data:`CAPTURED` at the levels they are shown,
    timestamped) to ``path`` while the block runs, so a run folder keeps its console log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(unlinked(path), encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(rank_zero)
    loggers = [logging.getLogger(name) for name in CAPTURED]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()


class Progress:
    """``<what>: <done>/<total> (<s> s)`` logged (info) once a loop has run ``after_s`` seconds, then at most
    every ``every_s`` and at the end: a long loop is never silent, a short one says nothing (call :meth:`step`
    once per item)."""

    def __init__(
        self,
        what: str,
        total: int,
        logger: logging.Logger,
        after_s: float = 3.0,
        every_s: float = 5.0,
        clock: Optional[Callable[[], float]] = None,
    ) -> None:
        self.what, self.total, self.logger = what, total, logger
        self.after_s, self.every_s, self.clock = after_s, every_s, clock or time.monotonic
        self.done = 0
        self.start = self.clock()
        self.said: Optional[float] = None  # when it last logged

    def step(self) -> None:
        """One item done: log the count if the loop has run long enough and not logged lately, or ends now."""
        self.done += 1
        now = self.clock()
        if now - self.start < self.after_s:
            return
        if self.said is None or now - self.said >= self.every_s or self.done == self.total:
            self.said = now
            self.logger.info("%s: %d/%d (%.0f s)", self.what, self.done, self.total, now - self.start)


WARNING_FILTERS: dict[str, str] = {
    r".*sync_dist=True.*": (
        "Lightning asks for sync_dist on epoch-level logs under DDP; our validation and test "
        "metrics are scored on every rank's gathered hypotheses (module.gather_objects), so each "
        "rank already logs the same value"
    ),
    r".*does not have many workers.*": (
        "Lightning's hint to raise DataLoader num_workers; token batches come from memory-mapped "
        "Arrow in the main process, workers are train.num_workers' choice"
    ),
    r".*LeafSpec.*": "torch's pytree deprecation of LeafSpec, raised inside Lightning's own code",
    r".*The number of training batches.*": (
        "Lightning's note that an epoch has fewer batches than log_every_n_steps (tiny and test "
        "runs, small corpora); metrics are still logged every tracking.log_every steps across epochs"
    ),
    r".*`srun` command is available.*": (
        "Lightning's SLURM hint on a machine with srun; our SLURM trials are submitted by submitit, "
        "and a local run on a login node is meant to be local"
    ),
    r"IProgress not found.*": (
        "tqdm.auto's notebook bar (imported by datasets and huggingface_hub) asks for ipywidgets in a Jupyter "
        "kernel; ablate shows no tqdm bar (its progress is one status line, training/progress_bar.py), so "
        "there is nothing to install"
    ),
    r"Checkpoint directory .* exists and is not empty.*": (
        "Lightning's note at every resume: a resumed run's checkpoints folder holds its checkpoints; ablate decides "
        "what a run folder may hold (new, resumed, refused or --overwrite) before Lightning sees it"
    ),
    r".*resuming from a checkpoint that ended before the epoch.*": (
        "Lightning's caution about mid-epoch resumes; ours restore the batch sampler's position "
        "exactly (tests/training/test_train_resume.py)"
    ),
}
"""The warnings ignored everywhere (:func:`ignore_warnings`): a regular expression each message starts with -> why it
is noise."""


def ignore_warnings() -> None:
    """Ignore the warnings of :data:`WARNING_FILTERS` in this process (idempotent: a filter is added once)."""
    for message in WARNING_FILTERS:
        warnings.filterwarnings("ignore", message=message)


@contextmanager
def silenced() -> Iterator[None]:
    """Ignore every warning inside the block, where none is about the user's run (each use under its own name):

    * ``sweeps_engine()``: a call into, or the import of, W&B's ``sweeps`` engine, which declares pydantic-v1
      style models (pydantic 2 warns at import) and whose bayes search fits a scikit-learn Gaussian process that
      warns about convergence on the few points a sweep has; ablate validates the sweep file itself.
    * ``jit_export()``: tracing or scripting a model for TorchScript export: ``torch.jit.trace`` warns
      (TracerWarning) at every Python-level branch of the traced step, and torch prints ``torch.jit``'s
      deprecation notice on each call; the exporter checks the result itself.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


sweeps_engine = jit_export = silenced


@contextmanager
def recorded_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings raised inside the block, recorded instead of shown (a UserWarning every time it is raised), for a
    caller that rewords some and re-raises the rest: ``report.figures`` turns matplotlib's per-character "Glyph ...
    missing from font(s)" warnings into one line."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", UserWarning)
        yield seen
