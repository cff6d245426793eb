"""Reports of a sweep: paper-style tables, significance, figures and W&B Reports.

Three layers, data flowing one way: :mod:`~ablate.report.trials` (collect: a folder or W&B -> trials),
:mod:`~ablate.report.stats` (rows over seeds, the seed-aware test, Holm, MDE, seeds needed) and
:mod:`~ablate.report.layout` (the Table 3 layout and every footnote), rendered by
:mod:`~ablate.report.render`; :mod:`~ablate.report.figures`, :mod:`~ablate.report.papers` (published tables
side by side) and :mod:`~ablate.report.export` (results folders, W&B Reports) build on them, and
:mod:`~ablate.report.commands` is the CLI. :mod:`~ablate.report.sources` is the public surface, re-exported
here: :func:`table` and the plain functions the commands (and a notebook) call.
"""

from ablate.report.sources import TableResult, make_plots, make_report, table
from ablate.report.stats import load, load_pooled

__all__ = ["TableResult", "load", "load_pooled", "make_plots", "make_report", "table"]
