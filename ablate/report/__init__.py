"""Reports of a sweep: paper-style tables, significance, figures and W&B Reports.

Data flows one way: :mod:`records` (trials from a sweep folder or W&B) -> :mod:`aggregate`
(rows, base, mean ± std over seeds) -> :mod:`plan` (which rows to compare) -> :mod:`significance`
(paired tests over sentences with seeds kept together, Holm-corrected) -> :mod:`lengths` (BLEU by
source length) -> :mod:`table` (Table 3 layout) -> :mod:`formats` (rich, md, latex, csv), :mod:`plots`
(PNG figures) and :mod:`wandb_report` (a W&B Report). :mod:`commands` holds the CLI.
"""

from ablate.report.layout import Table, build_table
from ablate.report.render import FORMATS, render
from ablate.report.stats import Comparison, Row, Stat, Sweep, aggregate, compare
from ablate.report.trials import ReportError, Trial, collect

__all__ = [
    "Comparison",
    "FORMATS",
    "ReportError",
    "Row",
    "Stat",
    "Sweep",
    "Table",
    "Trial",
    "aggregate",
    "build_table",
    "collect",
    "compare",
    "render",
]
