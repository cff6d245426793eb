"""Collect trial records from a sweep folder or from a W&B project.

A *trial* is one training run. Both sources yield the same :class:`Trial` objects, so every
later stage (aggregation, significance, layout, plots) is source-agnostic:

* a sweep folder ``DIR/<trial>/summary.json`` (+ ``hyps/<split>.txt``, ``refs/<split>.txt``),
  as written by ``ablate.training.run_folder.RunRecord`` and the sweep helper;
* ``wandb:<entity>/<project>[/<group>]``, read through W&B's public API by
  :mod:`ablate.report.wandb_records`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from ablate.config import flatten
from ablate.record import (
    NOT_METRICS,
    SUMMARY_FILE,
    SWEEP_FILE,
    TEXT_KINDS,
    RecordError,
    RunFiles,
    RunStatus,
    RunSummary,
    SweepFiles,
    UnreadableRecord,
    planned_trials,
)
from ablate.report.saved_texts import ReportError, TextError, read_texts
from ablate.report.wandb_records import WandbRun, plain, read_run, wandb_runs
from ablate.utils.logs import Progress

log = logging.getLogger(__name__)

INVALID = "invalid"
"""A trial whose record cannot be believed (unreadable texts, ill-typed fields); listed with the reason."""
SIGNATURE = "_signature"  # the suffix of a metric's signature in a summary (bleu_signature, ter_signature)
WANDB_PREFIX = "wandb:"
# Keys of the flattened config that never distinguish two configurations.
IGNORED_PREFIXES = (
    "tracking.",
    "train.devices",
    "train.num_workers",
    "train.threads",
    "train.accelerator",
    "data.cache_dir",
    "_wandb",
    "wandb_version",
)


@dataclass(frozen=True)
class Trial:
    """One run, whatever its source.

    Attributes:
        name: trial (run) name, unique within the sweep.
        status: a :class:`~ablate.record.RunStatus` (finished, failed, interrupted, running, pending,
            stopped), or :data:`INVALID`.
        error: the failure reason, if any.
        config: the flattened resolved config (dotted keys, tracking keys removed).
        metrics: numeric summary values, e.g. ``val/bleu``, ``test_<split>/bleu``, ``params``.
        history: validation records ``{"step": int, "val/bleu": float, ...}`` in step order.
        variant: the named variant (``"base"``, ``"A-heads1"``) or None.
        sweep: the sweep's name, or None.
        params: the sweep's varying parameters for this trial (dotted keys, ``seed`` included).
        hyps: split -> detokenized hypotheses (one per source sentence, corpus order).
        refs: split -> references, aligned with ``hyps``.
        signature: sacreBLEU signature of the test BLEU.
        resolved: the values the run used where its config leaves them implicit (``model.d_k``,
            ``model.d_v``, layers, peak ``train.lr``, the attention scale factor), recorded by the
            trainer or, for older runs, derived with :func:`ablate.training.run_folder.resolved`.
        sources: split -> source sentences, aligned with ``hyps`` (for BLEU by source length).
        comparisons: the sweep's ``comparisons`` parameter (see :mod:`ablate.sweep.spec`), if any.
        bare_variant: the trial's variant is a bare name, applying no overrides to the sweep's base.
        declared_base: the sweep's ``base`` parameter (a variant's name, or a grid point's values), if any.
        accelerator: ``cpu`` or ``gpu``, what trained the run (see :func:`trained_on`); None if not known.
        signatures: metric name -> the signature its summary records (``<name>_signature``: chrF's, TER's, ...).
        summary: the run record it was read from (:class:`~ablate.record.RunSummary`; for a W&B run, its summary); None for a trial that has no record (planned, unreadable, invalid).
    """

    name: str
    status: str
    error: Optional[str] = None
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    history: tuple[dict[str, float], ...] = ()
    variant: Optional[str] = None
    sweep: Optional[str] = None
    params: dict[str, Any] = field(default_factory=dict)
    hyps: dict[str, list[str]] = field(default_factory=dict)
    refs: dict[str, list[str]] = field(default_factory=dict)
    signature: Optional[str] = None
    resolved: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    comparisons: Optional[list] = None
    bare_variant: bool = False
    declared_base: Any = None
    accelerator: Optional[str] = None
    signatures: dict[str, str] = field(default_factory=dict)
    summary: Optional[RunSummary] = field(default=None, compare=False, repr=False)

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def finished(self) -> bool:
        return self.status == RunStatus.FINISHED


def collect(source: str, api: Any = None) -> list[Trial]:
    """Every trial of ``source`` (a sweep folder or ``wandb:<entity>/<project>[/<group>]``).

    Args:
        source: where the runs are.
        api: a ``wandb.Api``-like object (tests pass a stand-in); default ``wandb.Api()``.

    Raises:
        ReportError: the folder does not exist or holds no trial, or the W&B path is malformed.
    """
    if source.startswith(WANDB_PREFIX):
        return collect_wandb(source[len(WANDB_PREFIX) :], api=api)
    return collect_folder(Path(source))


def parse_wandb_path(path: str) -> tuple[str, str, Optional[str]]:
    """``entity/project[/group]`` -> ``(entity, project, group or None)``."""
    parts = [p for p in path.strip("/").split("/")]
    if len(parts) not in (2, 3) or not all(parts):
        raise ReportError(f"bad W&B source 'wandb:{path}': use wandb:<entity>/<project>[/<group>]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


# --------------------------------------------------------------------------------------
# Sweep folder
# --------------------------------------------------------------------------------------


def collect_folder(root: Path) -> list[Trial]:
    """Trials of a sweep output folder: each subfolder with a ``summary.json``, sorted by name, then
    every trial the launcher's ``sweep.json`` plans that has none yet (pending, or started and gone).

    A record that cannot be read or breaks the run record's types (:mod:`ablate.record`) is a
    trial with status :data:`INVALID` and the reason; one whose summary says running but whose run
    lock is free (:func:`~ablate.training.run_folder.is_held`: its process was killed) is interrupted.
    """
    from ablate.training.run_folder import running_status

    if not root.is_dir():
        raise ReportError(f"sweep folder not found: {root} (pass a sweep output folder or wandb:<entity>/<project>)")
    trials = []
    planned, problem, name = _sweep_plan(root)
    named = {"sweep": name} if name else {}  # the sweep file's name, not the W&B group id its runs record
    run_dirs = sorted(p for p in root.iterdir() if p.is_dir() and RunFiles(p).summary.exists())
    progress = Progress(f"read {root}", len(run_dirs), log)
    for run_dir in run_dirs:
        trial = read_trial(run_dir)
        progress.step()
        trial = replace(trial, status=running_status(run_dir, trial.status))
        point = planned.get(run_dir.name, {}).get("point", {})
        trials.append(replace(trial, **_sweep_facts(point), **named))  # the sweep's, not the config's
    seen = {t.name for t in trials}
    for name, t in planned.items():
        if name not in seen:  # planned, never started or gone before writing a record
            point = t["point"]
            status = running_status(root / name, t["status"])
            seed = {"seed": point["seed"]} if "seed" in point else {}
            variant = _variant_name(point.get("variant"))
            trials.append(Trial(name, status, t["error"], config=seed, variant=variant, **_sweep_facts(point)))
    if problem:
        trials.append(Trial(SWEEP_FILE, INVALID, f"{SWEEP_FILE}: {problem}; its planned trials are not listed"))
    if not trials:
        raise ReportError(f"no trials in {root}: expected subfolders holding {SUMMARY_FILE}")
    return trials


def read_trial(run_dir: Path) -> Trial:
    """The trial of one run folder; an unreadable or ill-typed record is an :data:`INVALID` trial saying why."""
    name, files = run_dir.name, RunFiles(run_dir)
    try:
        summary = RunSummary.read(files.summary)  # type-checked (ablate.record.summary_problem)
    except UnreadableRecord as err:  # bad UTF-8, not JSON
        return Trial(name, RunStatus.FAILED, str(err))
    except RecordError as err:
        return Trial(name, INVALID, str(err))
    try:
        texts = {kind: read_texts(files.texts(kind)) for kind in TEXT_KINDS}
    except TextError as err:
        return Trial(name, INVALID, str(err))
    return from_summary(name, summary, texts["hyps"], texts["refs"], sources=texts["sources"])


def _sweep_plan(root: Path) -> tuple[dict[str, dict[str, Any]], Optional[str], Optional[str]]:
    """Trial name -> ``{status, error, point}`` from the launcher's ``sweep.json``, why it is unusable, and
    the sweep's name."""
    path = SweepFiles(root).state
    if not path.exists():
        return {}, None, None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return {}, f"unreadable ({str(err).splitlines()[0]})", None
    trials, problem = planned_trials(state)
    name = state.get("name") if isinstance(state, dict) and isinstance(state.get("name"), str) else None
    return {t["name"]: t for t in trials}, problem, name


def _resolved(summary: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """The run's recorded ``resolved`` values, else derived from its config as the trainer does."""
    if isinstance(summary.get("resolved"), dict):
        return {k: _hashable(v) for k, v in summary["resolved"].items()}
    from ablate.config import ConfigError, from_flat
    from ablate.training.run_folder import resolved
    from ablate.utils.plugins import PluginError

    try:  # a reader of numbers never imports a plugin a record names: a plugin's component is not derived
        cfg = from_flat(
            {k: list(v) if isinstance(v, tuple) else v for k, v in flat.items() if not k.startswith(IGNORED_PREFIXES)},
            trust="never",
        )
    except (ConfigError, PluginError, TypeError, ValueError):
        return {}
    return resolved(cfg)


def from_summary(
    name: str,
    record: RunSummary | dict[str, Any],
    hyps: dict[str, list[str]] | None = None,
    refs: dict[str, list[str]] | None = None,
    config: dict[str, Any] | None = None,
    status: str | None = None,
    sources: dict[str, list[str]] | None = None,
) -> Trial:
    """A :class:`Trial` from a run record, or a ``summary.json``-shaped dict (``config`` may be given flat)."""
    if not isinstance(record, RunSummary):
        record = RunSummary.from_json(record, strict=False)
    summary = record.to_json()
    raw = dict(config if config is not None else summary.get("config") or {})
    facts = _sweep_facts(raw) if "variant" in raw or "base" in raw else {}  # a W&B run's config: the sweep's point
    comparisons = raw.pop("comparisons", None)
    raw.pop("variants", None)  # a sweep registered by ablate: its variants' overrides, the same for every run
    raw.pop("base", None)
    flat = clean_config(raw)
    sweep = summary.get("sweep") if isinstance(summary.get("sweep"), dict) else {}
    if "seed" not in flat and "seed" in (sweep.get("params") or {}):
        flat["seed"] = sweep["params"]["seed"]
    metrics = {k: n for k, v in summary.items() if k not in NOT_METRICS and (n := _number(v)) is not None}
    history = tuple(sorted((dict(h) for h in summary.get("history") or [] if "step" in h), key=lambda h: h["step"]))
    return Trial(
        name=name,
        status=RunStatus.of(status or summary.get("status") or RunStatus.RUNNING),
        error=summary.get("error"),
        config=flat,
        metrics=metrics,
        history=history,
        variant=_variant_name(summary.get("variant")),
        sweep=sweep.get("name"),
        params=dict(sweep.get("params") or {}),
        hyps=hyps or {},
        refs=refs or {},
        signature=summary.get("bleu_signature"),
        resolved=_resolved(summary, flat),
        sources=sources or {},
        comparisons=comparisons if isinstance(comparisons, list) else None,
        bare_variant=facts.get("bare_variant", False),
        declared_base=facts.get("declared_base"),
        accelerator=trained_on(summary, raw),
        signatures={
            k.removesuffix(SIGNATURE): v for k, v in summary.items() if k.endswith(SIGNATURE) and isinstance(v, str)
        },
        summary=record,
    )


ACCELERATORS = ("cpu", "gpu")


def trained_on(summary: dict[str, Any], config: dict[str, Any]) -> Optional[str]:
    """``cpu`` or ``gpu``: the accelerator the summary records, else the one the config names (nested or
    dotted ``train.accelerator``); None where neither says (older runs with ``auto``)."""
    train = plain(config.get("train"))
    named = train.get("accelerator") if isinstance(train, dict) else config.get("train.accelerator")
    return next((str(v) for v in (summary.get("accelerator"), named) if v in ACCELERATORS), None)


def _sweep_facts(point: dict[str, Any]) -> dict[str, Any]:
    """What a trial's sweep point says about the sweep: its ``comparisons``, its declared ``base``,
    and whether the trial's variant is a bare name (no overrides; in a sweep registered by ablate,
    a name the ``variants`` constant gives none)."""
    variant, table = point.get("variant"), point.get("variants")
    overrides = table.get(variant) if isinstance(table, dict) and isinstance(variant, str) else None
    return {
        "comparisons": point.get("comparisons"),
        "bare_variant": isinstance(variant, str) and not overrides,
        "declared_base": point.get("base"),
    }


def _variant_name(value: Any) -> Optional[str]:
    """A variant's name; a W&B sweep agent's run config holds the whole ``{name: ..., key: value}``."""
    if isinstance(value, dict):
        value = value.get("name")
    return None if value is None else str(value)


def _number(value: Any) -> Optional[float]:
    """A summary value as a float: plain numbers, or W&B's ``{"max": x}``-style summaries
    (written for metrics declared with ``define_metric(summary="max")``)."""
    if isinstance(value, dict):
        value = next((value[k] for k in ("max", "min", "best", "last", "mean") if k in value), None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def clean_config(config: dict[str, Any]) -> dict[str, Any]:
    """Flatten nested and dotted keys alike; drop tracking and bookkeeping keys.

    ``{"model": {"heads": 8}}`` and ``{"model.heads": 8}`` both give ``{"model.heads": 8}``.
    """
    flat = flatten(plain({k: v for k, v in config.items() if k != "variant"}))  # a sweep agent's: a mapping
    if isinstance(flat.get("plugins"), list):  # a plugin is its code, wherever its file lay: name and digest
        flat["plugins"] = [_plugin_label(r) for r in flat["plugins"]] or {}
    return {
        k: _hashable(v) for k, v in flat.items() if not k.startswith(IGNORED_PREFIXES) and v != {}
    }  # an empty section (no trainer.*, no plugins) sets nothing


def _plugin_label(record: Any) -> str:
    """``cosine@1a2b3c4d`` for a plugin record of a resolved config."""
    if not isinstance(record, dict):
        return str(record)
    digest = record.get("sha256") or record.get("version") or ""
    return f"{record.get('entry_point') or record.get('name')}@{str(digest)[:8]}"


def _hashable(value: Any) -> Any:
    """Lists become tuples and (empty) dicts JSON text, so a config value can key a row."""
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def collect_wandb(path: str, api: Any = None) -> list[Trial]:
    """Trials of a W&B project (optionally one group), newest first as W&B returns them."""
    entity, project, group = parse_wandb_path(path)
    trials = [from_wandb_run(run) for run in wandb_runs(entity, project, group, api)]
    if not trials:
        where = f"group '{group}' of " if group else ""
        raise ReportError(f"no runs in {where}W&B project {entity}/{project}")
    return trials


def from_wandb_run(run: Any) -> Trial:
    """A :class:`Trial` from an object shaped like ``wandb.apis.public.Run``."""
    r: WandbRun = read_run(run)
    if r.problem:
        return Trial(r.name, INVALID, r.problem)
    trial = from_summary(r.name, r.summary, r.hyps, r.refs, config=r.config, status=r.status, sources=r.sources)
    return replace(trial, sweep=sweep_name(trial.sweep))


def sweep_name(group: Optional[str]) -> Optional[str]:
    """The sweep's name from a run's recorded W&B group: ``ablate sweep`` names a group
    ``<sweep name>-<6 hex digits>`` (:func:`ablate.sweep.state.new_group`), and a table's title is the name."""
    match = re.fullmatch(r"(.+)-[0-9a-f]{6}", group or "")
    return match.group(1) if match else group
