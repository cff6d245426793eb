"""The Python API for notebooks: ``ablate.train``, ``ablate.sweep``, ``ablate.table``, ``ablate.plot``.

Each is the command of the same name returning an object instead of printing (``ablate.sweep`` is
:func:`ablate.sweep.run`). ``import ablate`` loads none of this (``ablate/__init__.py`` resolves the names
on first use), and torch, Lightning and the report are imported only inside the functions.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

from ablate.record import DEV_BLEU, TEST_BLEU
from ablate.utils.commands import ignore_warnings, setup_logging

Source = Union[str, Path, Any]
"""A sweep folder, a results folder, ``wandb:<entity>/<project>/<group>``, or a :class:`~ablate.sweep.SweepRun`."""


@dataclass(frozen=True)
class TrainResult:
    """One finished training: its run folder and the run record (its ``summary.json``)."""

    run_dir: Path
    summary: dict[str, Any]
    _loaded: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The model :meth:`translate` last loaded, by what it was loaded with and the checkpoint files then."""

    @property
    def metrics(self) -> dict[str, float]:
        """The summary's numbers (``test/bleu``, ``val/bleu``, ``train/tokens_per_sec``, ...), as a report reads them."""
        from ablate.report.trials import from_summary

        return dict(from_summary(self.run_dir.name, self.summary).metrics)

    def translate(
        self,
        sentences: Sequence[str],
        beam: Optional[int] = None,
        checkpoint: str = "best",
        plugins: Sequence[str] = (),
        trust_plugins: bool = False,
    ) -> list[str]:
        """Translations of ``sentences`` by the run's ``checkpoint``, as ``ablate translate`` gives them (each
        sentence stripped of the spaces around it and of a leading BOM, as the command reads a line). The model is loaded once and kept
        (one at a time) until the run's checkpoint files change.

        A plugin the run's record names is imported when this process already runs it (the run was
        trained here), it is one of ``plugins`` (the same code) or an installed module, or with
        ``trust_plugins`` (as ``--plugins`` / ``--trust-plugins``); otherwise a PluginError says so. One string
        is an InputError (it would be read as a list of characters), as is a ``beam`` below 1.
        """
        from ablate.inference import InputError, check_checkpoint, check_decoding

        if isinstance(sentences, str):
            raise InputError("translate takes a list of sentences, not one string: run.translate([text])")
        if not isinstance(sentences, Iterable):
            raise InputError(f"translate takes a list of sentences, not {type(sentences).__name__}")
        sentences = list(sentences)  # each cleaned below, as `ablate translate` reads a line (read_sentences)
        for number, text in enumerate(sentences, 1):
            if not isinstance(text, str):
                raise InputError(
                    f"translate takes a list of sentences: sentence {number} is a {type(text).__name__}, not text"
                )
        check_decoding(beam, None)
        if not sentences:  # nothing to translate: no model to load (the checkpoint's name is still checked)
            check_checkpoint(checkpoint)
            return []
        from ablate.data.sources import clean_line
        from ablate.inference.translate import load_run, translate
        from ablate.record import RunFiles

        files = RunFiles(self.run_dir)
        key = (checkpoint, tuple(plugins), trust_plugins, *(_stamp(path) for path in (files.best, files.last)))
        if key not in self._loaded:
            self._loaded.clear()  # one model held, not one per checkpoint ever asked for
            self._loaded[key] = load_run(self.run_dir, checkpoint, plugins=plugins, trust_plugins=trust_plugins)
        return translate(self._loaded[key], [clean_line(text) for text in sentences], beam)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{key}={self.summary[key]:.4g}"
            for key in (TEST_BLEU.key, DEV_BLEU.key, "step")
            if isinstance(self.summary.get(key), (int, float))
        )
        return f"TrainResult({str(self.run_dir)!r}, {self.summary.get('status')}{', ' + shown if shown else ''})"


def _stamp(path: Path) -> Optional[tuple[int, int]]:
    """``(mtime in ns, size)`` of ``path``, None where there is none: a rewritten file has another."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def _config(config: Any, overrides: Sequence[str], keys: dict[str, Any]) -> Any:
    """Defaults <- ``config`` (a YAML path, a nested or dotted dict, or a Config) <- ``keys`` <- ``overrides``."""
    from ablate.config import Config, from_flat, override_list, parse_override, read_config_file, to_dict
    from ablate.utils.typed import flatten

    if config is None:
        flat: dict[str, Any] = {}
    elif isinstance(config, Config):
        flat = flatten(to_dict(config))
    elif isinstance(config, dict):
        flat = flatten(config)
    else:
        flat = read_config_file(config)  # its plugins relative to its folder, as ``ablate train --config``
    flat.update(flatten(keys))
    flat.update(parse_override(item) for item in override_list(overrides))
    return from_flat(flat)


@contextlib.contextmanager
def _status_lines(quiet: bool) -> Iterator[None]:
    """The ``ablate`` logger's status lines on stderr (warnings only when ``quiet``), as a command shows
    them; the logger is put back as it was afterwards."""
    logger = logging.getLogger("ablate")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    setup_logging(-1 if quiet else 0)
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


def train(
    config: Any = None,
    overrides: Sequence[str] = (),
    *,
    run_dir: Union[str, Path, None] = None,
    overwrite: bool = False,
    callbacks: Optional[list] = None,
    quiet: bool = False,
    **keys: Any,
) -> TrainResult:
    """Train one model, decode its test sets and record it, as ``ablate train`` does.

    Args:
        config: a YAML file, a dict of config keys (nested or dotted), or a :class:`~ablate.config.Config`.
        overrides: ``key=value`` strings, applied last (``["model.heads=8"]``).
        run_dir: the run folder (default ``runs/<name>``); running again resumes it.
        overwrite: delete an existing run folder and train from scratch.
        callbacks: extra Lightning callbacks.
        quiet: show warnings only, not the run's status lines (Lightning's progress bar is
            ``trainer.enable_progress_bar``).
        **keys: config keys by section, ``model={"heads": 8}``, or top-level ones, ``seed=2``.

    Raises:
        ConfigError / DataError: bad input, before any training.
        RunError: training failed (diverged, out of memory); its ``summary.json`` says why.
    """
    ignore_warnings()  # before the libraries load: in a notebook, tqdm.auto would ask for ipywidgets
    from ablate.training.run_folder import default_run_dir
    from ablate.training.train import train as run_training

    cfg = _config(config, overrides, keys)
    target = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
    with _status_lines(quiet):
        summary = run_training(cfg, target, overwrite=overwrite, callbacks=callbacks)
    return TrainResult(target, summary)


def table(source: Source, **options: Any) -> Any:
    """The table ``ablate table SOURCE`` prints, as a :class:`~ablate.report.TableResult`: :func:`ablate.report.table`
    (its options: ``alpha``, ``test``, ``samples``, ``significance``, ``by_length``, ``metric``, ``sigma_from``)."""
    ignore_warnings()
    from ablate.report import table as report_table

    return report_table(source, **options)


def plot(
    source: Source,
    *,
    alpha: float = 0.05,
    significance: bool = True,
    metric: str = "bleu",
    sigma_from: Optional[str] = None,
    test: str = "seeds",
    samples: int = 0,
) -> Any:
    """Test BLEU (or ``metric``) per row with the table's significance marks: a ``matplotlib.figure.Figure``;
    ``test``, ``samples`` and ``sigma_from``: those of ``ablate.table(source, test=..., samples=..., sigma_from=...)``
    (``sigma_from``: the seed σ pooled with that source's seeds).

    ``ablate plot SOURCE --out DIR`` (:func:`ablate.report.make_plots`) writes every figure.

    Raises:
        ReportError: no row of the sweep has test BLEU yet; ``sigma_from`` is refused as ``ablate.table`` refuses it.
    """
    ignore_warnings()
    from ablate.report.figures import bleu_bars_figure
    from ablate.report.sources import source_name
    from ablate.report.stats import table_comparisons
    from ablate.report.trials import ReportError

    where = source_name(source)
    sweep, comps = table_comparisons(where, test, samples, significance, metric, sigma_from, alpha=alpha)
    figure = bleu_bars_figure(sweep, comps, alpha, metric)
    if figure is None:
        raise ReportError(f"no row of {where} has a test {metric} yet; plot it once a trial has finished")
    _display_inline()
    return figure


def _display_inline() -> None:
    """Let a notebook show a returned Figure as a PNG, as it shows pyplot's (Jupyter registers IPython's
    ``print_figure`` only once pyplot is imported, which ablate's figures never are: a cell would show
    ``<Figure size ...>``)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None:
        return
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["image/png"].for_type(Figure, print_figure)
