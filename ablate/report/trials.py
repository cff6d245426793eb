"""The collect layer: a sweep folder, results folder or ``wandb:<entity>/<project>[/<group>]`` -> :class:`Trial` s.

:func:`check_trials` believes a trial only if its metrics are finite and in range, it saved as many
hypotheses as references on every tested split where any trial saved them (a seed the † test cannot use
is not counted in the cell either), it is not a second run of a seed its row has, and its row's trials
share one config; a trial failing a check is :data:`EXCLUDED` with the reason, listed under the table.
:func:`with_metric` scores ``--metric`` from saved texts where a summary lacks it; :func:`score_runs`
(``ablate score``) writes such scores into summaries.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import logging
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ablate.config import NOT_TRAINING, SCALES_BATCH, ConfigError, flatten, from_flat
from ablate.errors import AblateError, first_line
from ablate.metrics import (
    MetricScorer,
    SavedText,
    get_scorer,
    metric_key,
    signature_key,
    statistics,
    text_digest,
    text_index,
)
from ablate.metrics.scorers import Bleu
from ablate.record import (
    DEV_BLEU,
    DEV_PPL,
    NOT_METRICS,
    SUMMARY_FILE,
    SWEEP_FILE,
    TEST_BLEU,
    TEXT_KINDS,
    VALIDATION_SPLITS,
    RecordError,
    RunFiles,
    RunStatus,
    RunSummary,
    SweepFiles,
    UnreadableRecord,
    is_number,
    kind_of,
    metric_problem,
    summary_problem,
    summary_value,
)
from ablate.utils.commands import Progress
from ablate.utils.io import printable, read_json, read_lines, regular, split_lines
from ablate.utils.plugins import PluginError


class ReportError(AblateError):
    """A user-facing report mistake (bad source, nothing to tabulate); one actionable line."""


class TextError(ReportError):
    """A saved text (hypotheses, references, sources) that cannot be read as the run wrote it."""


def read_texts(folder: Path) -> dict[str, SavedText]:
    """``<split>.txt`` or ``<split>.txt.gz`` files as lines (only newlines end a line, so line i is sentence i).

    A file the statistics cache's index knows by its path, size and mtime is not read until its lines
    are wanted (:class:`~ablate.metrics.SavedText`); any other is read here.

    Raises:
        TextError: a file is not UTF-8 or a torn ``.gz``, or a split's ``.txt`` and ``.txt.gz`` differ.
    """
    if not folder.is_dir():
        return {}
    texts: dict[str, SavedText] = {}
    names = [entry.name for entry in os.scandir(folder)]  # one listing (a glob per pattern lists it again)
    gzipped, plain = sorted(n for n in names if n.endswith(".txt.gz")), sorted(n for n in names if n.endswith(".txt"))
    found, resolved = text_index(), os.path.realpath(folder)
    for name in gzipped + plain:
        where, split = f"{folder.name}/{name}", name.removesuffix(".gz").removesuffix(".txt")
        try:
            lines = SavedText(regular(folder / name), _read_text, found, os.path.join(resolved, name))
        except OSError as err:
            raise TextError(f"{where} is unreadable: {first_line(err)}") from None
        if not lines.known:
            _ = lines.digest  # read (and entered in the index) now: an unreadable file is reported as the trial is read
        if split in texts and texts[split] != lines:
            raise TextError(f"{where} and {where}.gz both exist and differ; keep the run's own and remove the other")
        texts[split] = lines
    return texts


def _read_text(path: Path) -> list[str]:
    """The lines of a saved ``.txt`` or ``.txt.gz``; :class:`TextError` if it is not UTF-8 or torn."""
    where = f"{path.parent.name}/{path.name}"
    try:
        return list(_gzipped_lines(path.read_bytes())) if path.name.endswith(".gz") else read_lines(path)
    except UnicodeDecodeError as err:
        raise TextError(f"{where} is not UTF-8 text (byte {err.start})") from None
    except (OSError, ValueError, EOFError) as err:  # a torn .gz
        raise TextError(f"{where} is unreadable: {first_line(err)}") from None


@functools.lru_cache(maxsize=32)
def _gzipped_lines(data: bytes) -> tuple[str, ...]:
    """The lines of a gzipped UTF-8 text (only newlines end a line), by its bytes: every trial of a sweep saves
    the same references and sources, each decoded once."""
    return tuple(split_lines(gzip.decompress(data).decode("utf-8")))


HYP_ARTIFACT_TYPES = ("hypotheses", "predictions")

_STATES = {  # W&B's run states -> ours
    "finished": RunStatus.FINISHED,
    "failed": RunStatus.FAILED,
    "crashed": RunStatus.FAILED,
    "killed": RunStatus.INTERRUPTED,
    "running": RunStatus.RUNNING,
    "pending": RunStatus.RUNNING,
}


def _wandb_api() -> Any:
    """``wandb.Api()``, or a one-line error where there is no API key (W&B would raise its own traceback)."""
    from ablate.training.tracking import has_wandb_credentials

    if not has_wandb_credentials():
        raise ReportError("reading a W&B project needs an API key: set WANDB_API_KEY or run `wandb login`")
    import wandb

    try:
        return wandb.Api()
    except Exception as err:  # noqa: BLE001
        raise ReportError(f"cannot reach W&B: {first_line(err)}") from None


def from_wandb_run(run: Any) -> Trial:
    """A :class:`Trial` from an object shaped like ``wandb.apis.public.Run``; :data:`INVALID` where its
    summary, config or files cannot be believed."""
    name = str(run.name)
    summary, config = plain(run.summary), plain(run.config)
    if not isinstance(summary, dict) or not isinstance(config, dict):
        return Trial(name, INVALID, "W&B run: its summary or config is not a mapping")
    summary = {**_recorded(run), **summary}  # the nested fields (history, resolved, ...) are in its run file
    status = summary.get("status") or _STATES.get(str(run.state).lower(), str(run.state))
    if "variant" not in summary and config.get("variant") is not None:
        summary["variant"] = config["variant"]
    if not summary.get("history"):
        summary["history"] = _wandb_history(run)
    if not summary.get("sweep") and getattr(run, "group", None):
        summary["sweep"] = {"name": run.group}
    problem = summary_problem(summary)
    if problem:
        return Trial(name, INVALID, f"W&B summary: {problem}")
    try:
        hyps, refs, sources = _wandb_texts(run, [s for k in summary if (s := TEST_BLEU.split_of(k)) is not None])
    except TextError as err:
        return Trial(name, INVALID, f"W&B files: {err}")
    trial = from_summary(name, summary, hyps, refs, config=config, status=str(status), sources=sources)
    return replace(trial, sweep=sweep_name(trial.sweep))


def plain(value: Any) -> Any:
    """Dict-like objects (W&B summaries/configs) to plain dicts, recursively."""
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _recorded(run: Any) -> dict[str, Any]:
    """The ``summary.json`` run file ablate saves with each W&B run (nested fields included), less the config."""
    from ablate.training.tracking import RECORD_FILE

    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        _download(run, {RECORD_FILE}, Path(tmp))
        record = RunSummary.peek(Path(tmp) / RECORD_FILE)
    return {} if record is None else {k: v for k, v in record.to_json().items() if k not in ("config", "version")}


def _download(run: Any, wanted: set[str], root: Path) -> None:
    """The run files named in ``wanted`` into ``root``; W&B trouble leaves them out (they are optional)."""
    with contextlib.suppress(Exception):  # the table is still correct without them
        for f in run.files() if hasattr(run, "files") else []:
            if f.name in wanted:
                handle = f.download(root=str(root), replace=True)
                if hasattr(handle, "close"):
                    handle.close()


def _wandb_history(run: Any) -> list[dict[str, float]]:
    """Validation records from ``run.scan_history``; the step is ours, Lightning's or W&B's."""
    scan = getattr(run, "scan_history", None)
    if scan is None:
        return []
    steps = ("step", "trainer/global_step", "_step")
    return [  # checked with the summary (schema.history_problem)
        {"step": step, **{k: row[k] for k in (DEV_BLEU.key, DEV_PPL.key) if row.get(k) is not None}}
        for row in scan(keys=[DEV_BLEU.key])
        if (step := next((row[k] for k in steps if row.get(k) is not None), None)) is not None
    ]


def _wandb_texts(run: Any, splits: Iterable[str]) -> tuple[dict[str, SavedText], ...]:
    """Hypotheses, references and sources saved as run files, else in a hypotheses artifact."""
    wanted = {f"{kind}/{split}.txt" for split in splits for kind in TEXT_KINDS}
    if not wanted:
        return {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        root = Path(tmp)
        _download(run, wanted, root)
        if not (root / "hyps").is_dir():
            with contextlib.suppress(Exception):  # as _download: the texts are optional
                for art in run.logged_artifacts() if hasattr(run, "logged_artifacts") else []:
                    if getattr(art, "type", None) in HYP_ARTIFACT_TYPES:
                        art.download(root=str(root))
                        break
        return read_texts(root / "hyps"), read_texts(root / "refs"), read_texts(root / "sources")


log = logging.getLogger(__name__)

INVALID = "invalid"
"""A trial whose record cannot be believed (unreadable texts, ill-typed fields); listed with the reason."""
SIGNATURE = "_signature"  # the suffix of a metric's signature in a summary (bleu_signature, ter_signature)
WANDB_PREFIX = "wandb:"
IGNORED_PREFIXES = (*(k for k in NOT_TRAINING if k not in SCALES_BATCH), "train.accelerator", "_wandb", "wandb_version")
"""Keys of the flattened config that never distinguish two configurations: those a run may resume with changed
(:data:`~ablate.config.NOT_TRAINING`; but not the device count, :data:`~ablate.config.SCALES_BATCH`), the device kind (a row is a configuration, trained on any device), and
W&B's bookkeeping."""


@dataclass(frozen=True)
class Trial:
    """One run, whatever its source.

    Attributes:
        status: a :class:`~ablate.record.RunStatus`, or :data:`INVALID` / :data:`EXCLUDED`.
        config: the flattened resolved config (dotted keys, tracking keys removed).
        metrics: numeric summary values, e.g. ``val/bleu``, ``test_<split>/bleu``, ``params``.
        history: validation records ``{"step": int, "val/bleu": float, ...}`` in step order.
        params: the sweep's varying parameters for this trial (dotted keys, ``seed`` included); for a trial
            without a readable record (unreadable, or not started), its point in ``sweep.json``.
        hyps, refs, sources: split -> detokenized hypotheses / references / sources, aligned.
        resolved: the values the run used where its config leaves them implicit (``model.d_k``, peak
            ``train.lr``, ...), recorded or, for older runs, derived (:func:`ablate.training.run_folder.resolved`).
        bare_variant: the trial's variant is a bare name, applying no overrides to the sweep's base.
        declared_base: the sweep's ``base`` parameter (a variant's name, or a grid point's values), if any.
        signatures: metric name -> the signature its summary records (``<name>_signature``).
        summary: the run record it was read from; None for a trial without one (planned, invalid).
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
    hyps: Mapping[str, Sequence[str]] = field(default_factory=dict)
    refs: Mapping[str, Sequence[str]] = field(default_factory=dict)
    resolved: dict[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Sequence[str]] = field(default_factory=dict)
    comparisons: Optional[list] = None
    bare_variant: bool = False
    declared_base: Any = None
    accelerator: Optional[str] = None
    precision: Optional[str] = None
    signatures: dict[str, str] = field(default_factory=dict)
    summary: Optional[RunSummary] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:  # what a record says reaches the terminal: no escape sequences in it
        for key in ("error", "variant", "sweep"):
            if isinstance(value := getattr(self, key), str):
                object.__setattr__(self, key, printable(value))

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def finished(self) -> bool:
        return self.status == RunStatus.FINISHED


def collect(source: str, api: Any = None) -> list[Trial]:
    """Every trial of ``source``: a sweep folder, or ``wandb:...`` (``api``: a ``wandb.Api``-like object), newest
    first as W&B returns them.

    Raises:
        ReportError: the folder does not exist or holds no trial, the W&B path is malformed, or W&B fails.
    """
    if not source.startswith(WANDB_PREFIX):
        return collect_folder(Path(source))
    entity, project, group = parse_wandb_path(source[len(WANDB_PREFIX) :])
    api = _wandb_api() if api is None else api
    try:
        runs = list(api.runs(f"{entity}/{project}", filters={"group": group} if group else None))
    except Exception as err:  # noqa: BLE001 - W&B's errors: one line
        raise ReportError(f"cannot read W&B project {entity}/{project}: {first_line(err)}") from None
    if not runs:
        where = f"group '{group}' of " if group else ""
        raise ReportError(f"no runs in {where}W&B project {entity}/{project}")
    return [from_wandb_run(run) for run in runs]


def parse_wandb_path(path: str) -> tuple[str, str, Optional[str]]:
    """``entity/project[/group]`` -> ``(entity, project, group or None)``."""
    parts = path.strip("/").split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ReportError(f"bad W&B source 'wandb:{path}': use wandb:<entity>/<project>[/<group>]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def collect_folder(root: Path) -> list[Trial]:
    """Trials of a sweep folder: each subfolder with a ``summary.json`` by name, then the trials ``sweep.json``
    plans that have none yet. An ill-typed record is :data:`INVALID`; a running one whose lock is free, interrupted."""
    from ablate.training.run_folder import running_status

    if not root.is_dir():
        raise ReportError(f"sweep folder not found: {root} (pass a sweep output folder or wandb:<entity>/<project>)")
    trials = []
    planned, problem, name = _sweep_plan(root)
    run_dirs = sorted(p for p in root.iterdir() if p.is_dir() and RunFiles(p).summary.exists())
    progress = Progress(f"read {root}", len(run_dirs), log)
    for run_dir in run_dirs:
        trial = read_trial(run_dir)
        progress.step()
        trial = replace(trial, status=running_status(run_dir, trial.status))
        point = planned.get(run_dir.name, {}).get("point", {})
        unread = {"params": point} if trial.summary is None else {}  # the row it was to be (ablate.report.stats)
        # the sweep's facts, not the config's; the sweep file's name, not the W&B group id its runs record
        trials.append(replace(trial, **sweep_facts(point), **unread, sweep=name or trial.sweep))
    seen = {t.name for t in trials}
    for name, t in planned.items():
        if name not in seen:  # planned, never started or gone before writing a record
            point = t["point"]
            status, error = running_status(root / name, t["status"]), t["error"]
            if status == RunStatus.FINISHED:  # its record was there once
                status = INVALID
                error = f"{SWEEP_FILE} records it finished, but no {SUMMARY_FILE} of it is here (its run folder moved or deleted?)"
            seed = {"seed": point["seed"]} if "seed" in point else {}
            facts = {**sweep_facts(point), "params": point, "variant": _variant_name(point.get("variant"))}
            trials.append(Trial(name, status, error, config=seed, **facts))
    if problem:
        trials.append(Trial(SWEEP_FILE, INVALID, f"{SWEEP_FILE}: {problem}; its planned trials are not listed"))
    if not trials and RunFiles(root).summary.exists():
        raise ReportError(
            f"{root} is one run's folder (it holds {SUMMARY_FILE}); a table reads a sweep folder of runs: "
            f"pass {root.parent}"
        )
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
    """Trial name -> ``{status, error, point}`` from ``sweep.json``, why it is unusable, and the sweep's name."""
    path = SweepFiles(root).state
    if not path.exists():
        return {}, None, None
    try:
        state = read_json(path)
    except (OSError, ValueError) as err:
        return {}, f"unreadable ({first_line(err)})", None
    trials, problem = planned_trials(state)
    name = state.get("name") if isinstance(state, dict) and isinstance(state.get("name"), str) else None
    return {t["name"]: t for t in trials}, problem, name


def _resolved(summary: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """The run's recorded ``resolved`` values, else derived from its config as the trainer does."""
    if isinstance(summary.get("resolved"), dict):
        return {k: hashable(v) for k, v in summary["resolved"].items()}
    from ablate.training.run_folder import resolved

    try:  # a reader of numbers never imports a plugin a record names: a plugin's component is not derived
        cfg = from_flat({k: list(v) if isinstance(v, tuple) else v for k, v in flat.items()}, trust="never")
    except (ConfigError, PluginError, TypeError, ValueError):
        return {}
    return resolved(cfg)


def from_summary(
    name: str,
    record: RunSummary | dict[str, Any],
    hyps: Mapping[str, Sequence[str]] | None = None,
    refs: Mapping[str, Sequence[str]] | None = None,
    config: dict[str, Any] | None = None,
    status: str | None = None,
    sources: Mapping[str, Sequence[str]] | None = None,
) -> Trial:
    """A :class:`Trial` from a run record, or a ``summary.json``-shaped dict (``config`` may be given flat)."""
    if not isinstance(record, RunSummary):
        record = RunSummary.from_json(record, strict=False)
    summary = record.to_json()
    raw = dict(config if config is not None else summary.get("config") or {})
    facts = sweep_facts(raw) if "variant" in raw or "base" in raw else {}  # a W&B run's config: the sweep's point
    comparisons = raw.pop("comparisons", None)
    raw.pop("variants", None)  # a sweep registered by ablate: its variants' overrides, the same for every run
    raw.pop("base", None)
    flat = clean_config(raw)
    sweep = summary["sweep"] if isinstance(summary.get("sweep"), dict) else {}
    if "seed" not in flat and "seed" in (sweep.get("params") or {}):
        flat["seed"] = sweep["params"]["seed"]
    metrics = {k: float(n) for k, v in summary.items() if k not in NOT_METRICS and is_number(n := summary_value(v))}
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
        resolved=_resolved(summary, flat),
        sources=sources or {},
        comparisons=comparisons if isinstance(comparisons, list) else None,
        bare_variant=facts.get("bare_variant", False),
        declared_base=facts.get("declared_base"),
        accelerator=trained_on(summary, raw),
        precision=summary.get("precision") if isinstance(summary.get("precision"), str) else None,
        signatures={
            k.removesuffix(SIGNATURE): v for k, v in summary.items() if k.endswith(SIGNATURE) and isinstance(v, str)
        },
        summary=record,
    )


def trained_on(summary: dict[str, Any], config: dict[str, Any]) -> Optional[str]:
    """``cpu`` or ``gpu``: the summary's accelerator, else the config's ``train.accelerator``; None if neither."""
    train = plain(config.get("train"))
    named = train.get("accelerator") if isinstance(train, dict) else config.get("train.accelerator")
    return next((str(v) for v in (summary.get("accelerator"), named) if v in ("cpu", "gpu")), None)


def sweep_facts(point: dict[str, Any]) -> dict[str, Any]:
    """A sweep point's ``comparisons``, declared ``base``, and whether its variant is a bare name (no overrides)."""
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


def clean_config(config: dict[str, Any]) -> dict[str, Any]:
    """Flatten nested and dotted keys alike (``{"model": {"heads": 8}}`` -> ``{"model.heads": 8}``); drop bookkeeping."""
    flat = flatten(plain({k: v for k, v in config.items() if k != "variant"}))  # a sweep agent's: a mapping
    if isinstance(flat.get("plugins"), list):  # a plugin is its code, wherever its file lay: name and digest
        flat["plugins"] = [_plugin_label(r) for r in flat["plugins"]] or {}
    # an empty section (no trainer.*, no plugins) sets nothing
    return {k: hashable(v) for k, v in flat.items() if not k.startswith(IGNORED_PREFIXES) and v != {}}


def _plugin_label(record: Any) -> str:
    """``cosine@1a2b3c4d`` for a plugin record of a resolved config."""
    if not isinstance(record, dict):
        return str(record)
    digest = record.get("sha256") or record.get("version") or ""
    return f"{record.get('entry_point') or record.get('name')}@{str(digest)[:8]}"


def hashable(value: Any) -> Any:
    """Lists become tuples and (empty) dicts JSON text, so a config value can key a row."""
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def sweep_name(group: Optional[str]) -> Optional[str]:
    """The sweep's name from a W&B group ``<sweep name>-<6 hex digits>`` (:func:`ablate.sweep.state.new_group`)."""
    match = re.fullmatch(r"(.+)-[0-9a-f]{6}", group or "")
    return match.group(1) if match else group


EXCLUDED = "excluded"
TOLERANCE = 0.01
"""BLEU points by which a summary may differ from its hypotheses' BLEU (rounding), no more."""


def exclude(trial: Trial, reason: str) -> Trial:
    return replace(trial, status=EXCLUDED, error=reason)


def tested_splits(trials: Sequence[Trial]) -> list[str]:
    """Splits whose hypotheses the significance test compares: those with a ``test_<split>/bleu``
    metric where any trial reports one, else every split with hypotheses but the validation's."""
    have = {s for t in trials for s in t.hyps}
    known = {s for t in trials for m in t.metrics if (s := TEST_BLEU.split_of(m)) is not None}
    return sorted(have & known) if known else sorted(have - set(VALIDATION_SPLITS))


def check_trials(trials: Sequence[Trial]) -> list[Trial]:
    """Every trial, the finished ones that a table cannot use turned :data:`EXCLUDED` (see the module)."""
    out = [_metrics_checked(t) if t.finished else t for t in trials]
    for split in tested_splits([t for t in out if t.finished]):
        out = _texts_checked(out, split)
    return out


def _metrics_checked(trial: Trial) -> Trial:
    for key, value in trial.metrics.items():
        if problem := metric_problem(key, value):
            return exclude(trial, problem)
    return trial


def _texts_checked(trials: list[Trial], split: str) -> list[Trial]:
    """Finished trials without usable hypotheses on ``split`` excluded, when any trial has them."""
    out = [exclude(t, problem) if t.finished and (problem := _text_problem(t, split)) else t for t in trials]
    usable = [t for t in out if t.finished]
    if not usable:
        return out
    common = Counter(text_digest(t.refs[split]) for t in usable).most_common(1)[0][0]
    return [
        exclude(t, f"refs/{split} differ from the other trials' references")
        if t.finished and text_digest(t.refs[split]) != common
        else t
        for t in out
    ]


def _text_problem(trial: Trial, split: str) -> Optional[str]:
    if split not in trial.hyps:
        return f"no hyps/{split} while other trials have them, so the significance test cannot use it"
    if split not in trial.refs:
        return f"no refs/{split} beside its hypotheses"
    n, m = len(trial.hyps[split]), len(trial.refs[split])
    return f"hyps/{split} has {n} lines, refs/{split} {m}" if n != m else None


def distinct_seeds(row: str, trials: Sequence[Trial]) -> tuple[list[Trial], list[Trial]]:
    """A row's trials with each seed once (the first by name), and the repeats, excluded; trials that record no
    seed count as one seed (theirs cannot be told apart)."""
    kept: dict[Any, Trial] = {}
    repeats = []
    for t in sorted(trials, key=lambda t: t.name):
        if t.seed is None and None in kept:
            why = f"no seed recorded, as {kept[None].name}, in row {row}: seeds that cannot be told apart are no replicates"
            repeats.append(exclude(t, why))
        elif t.seed in kept:
            again = f"seed {t.seed} again in row {row} (as {kept[t.seed].name}): one seed twice is not a replicate"
            repeats.append(exclude(t, again))
        else:
            kept[t.seed] = t
    return list(kept.values()), repeats


def check_one_config(row: str, trials: Sequence[Trial]) -> None:
    """Every trial of ``row`` has one config but the seed (keys only one records are not compared), else ReportError."""
    first = trials[0]
    for t in trials[1:]:
        for key in sorted(set(first.config) & set(t.config) - {"seed"}):
            if first.config[key] != t.config[key]:
                raise ReportError(
                    f"row {row} mixes two configs: {first.name} has {key}={first.config[key]!r}, {t.name} "
                    f"{key}={t.config[key]!r}; a row's trials must differ only in the seed (do two variants share a name?)"
                )


def cell_disagreements(rows: Sequence[tuple[str, Sequence[Trial]]]) -> list[str]:
    """``trial: key x in its summary, y from hyps/<split>`` for each trial whose summary's test BLEU is not
    its hypotheses' corpus BLEU."""
    trials = [t for _, ts in rows for t in ts]
    splits = tested_splits(trials)
    found = []
    progress = Progress("scoring saved hypotheses, trial", len(trials), log)
    for t in trials:
        progress.step()
        for split in splits:
            key = TEST_BLEU.split_key(split)
            if key not in t.metrics and len(splits) == 1:  # a summary's plain test/bleu is the only split's
                key = TEST_BLEU.key
            if key not in t.metrics or split not in t.hyps:
                continue
            again = corpus_score(Bleu(_tokenizer(t.signatures.get("bleu"))), t.hyps[split], t.refs[split], None)
            if abs(again - t.metrics[key]) > TOLERANCE:
                found.append(f"{t.name}: {key} {t.metrics[key]:.2f} in its summary, {again:.2f} from hyps/{split}")
    return found


DEFAULT_METRIC = "bleu"


def _tokenizer(signature: Optional[str]) -> Optional[str]:
    return next((p[len("tok:") :] for p in (signature or "").split("|") if p.startswith("tok:")), None)


def bleu_tokenizer(trials: Sequence[Trial]) -> Optional[str]:
    """The ``tok:`` field of the runs' sacreBLEU signature, so the test scores BLEU as they did."""
    return next((tok for t in trials if (tok := _tokenizer(t.signatures.get("bleu"))) is not None), None)


def scorer_for(metric: str, trials: Sequence[Trial]) -> MetricScorer:
    """The scorer of ``metric`` (BLEU with the runs' tokenizer); MetricError for an unknown one."""
    return Bleu(bleu_tokenizer(trials)) if metric == "bleu" else get_scorer(metric)


def corpus_score(scorer: MetricScorer, hyps: Sequence[str], refs: Sequence[str], sources: Optional[Sequence[str]]):
    """The corpus score from the per-sentence statistics (sacreBLEU's corpus score, exactly)."""
    return float(scorer.from_statistics(statistics(scorer, hyps, refs, sources).sum(0)))


def signature_of(metric: str, trials: Sequence[Trial]) -> list[str]:
    """The signatures the runs recorded for ``metric``, else the scorer's (what scored their hypotheses)."""
    found = sorted({t.signatures[metric] for t in trials if metric in t.signatures})
    return found or [scorer_for(metric, trials).signature()]


def first_split(metrics: Mapping[str, Any]) -> Optional[str]:
    """The test split a summary's plain ``test/bleu`` belongs to (the first test split), if it can be told."""
    plain = metrics.get(TEST_BLEU.key)
    tests = [s for k in metrics if (s := TEST_BLEU.split_of(k)) is not None]
    same = [s for s in tests if metrics[TEST_BLEU.split_key(s)] == plain]
    return same[0] if len(same) == 1 else (tests[0] if len(tests) == 1 else None)


def split_key(metric: str, split: str) -> str:
    """The summary key of ``metric`` on a saved split: ``val/<metric>`` for the validation split."""
    return metric_key(metric, prefix="val") if split in VALIDATION_SPLITS else metric_key(metric, split)


def scored(
    scorer: MetricScorer,
    texts: Mapping[str, Mapping[str, Sequence[str]]],
    recorded: Mapping[str, Any],
) -> dict[str, float]:
    """``test_<split>/<name>``, ``val/<name>`` and ``test/<name>`` (the first test split's) that the summary
    ``recorded`` lacks, scored from ``texts`` (``{"hyps": {split: lines}, "refs": ..., "sources": ...}``)."""
    found: dict[str, float] = {}
    for split, hyps in texts.get("hyps", {}).items():
        refs = texts.get("refs", {}).get(split)
        key = split_key(scorer.name, split)
        if key in recorded or refs is None or len(refs) != len(hyps) or not refs:
            continue
        sources = texts.get("sources", {}).get(split)
        found[key] = corpus_score(scorer, hyps, refs, sources if sources and len(sources) == len(refs) else None)
    first, plain = first_split(recorded), metric_key(scorer.name)
    if first and plain not in recorded and metric_key(scorer.name, first) in found:
        found[plain] = found[metric_key(scorer.name, first)]
    return found


def with_metric(trials: Sequence[Trial], metric: str) -> list[Trial]:
    """Every trial, each finished one with ``metric`` scored from its saved texts where its summary lacks it.

    Raises:
        MetricError: ``metric`` is not registered.
        ReportError: no trial records the metric or saved hypotheses to score it on.
    """
    scorer = scorer_for(metric, trials)
    if metric == DEFAULT_METRIC:
        return list(trials)
    out = []
    for t in trials:
        found = scored(scorer, {"hyps": t.hyps, "refs": t.refs, "sources": t.sources}, t.metrics) if t.finished else {}
        out.append(replace(t, metrics={**t.metrics, **found}) if found else t)
    if not any(k.endswith("/" + metric) and k.startswith("test") for t in out if t.finished for k in t.metrics):
        raise ReportError(
            f"no finished trial records {metric} (test_<split>/{metric}) or saved hypotheses to score it on; "
            "choose another --metric, or rerun with texts saved"
        )
    return out


@dataclass(frozen=True)
class Scored:
    """What :func:`score_runs` did to one run: the values it added, or why it left the run alone."""

    run: str
    added: dict[str, float] = field(default_factory=dict)
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.run}: left alone ({self.skipped})"
        if not self.added:
            return f"{self.run}: already scored"
        return f"{self.run}: " + ", ".join(f"{k} {v:.2f}" for k, v in self.added.items())


def run_folders(path: Path) -> list[Path]:
    """``path`` itself when it is a run folder (it holds ``summary.json``), else its subfolders that are."""
    if (path / SUMMARY_FILE).is_file():
        return [path]
    runs = sorted(p for p in path.iterdir() if (p / SUMMARY_FILE).is_file()) if path.is_dir() else []
    if not runs:
        raise ReportError(
            f"{path} is not a run or sweep folder (no {SUMMARY_FILE} in it or its subfolders); "
            "pass a run folder (ablate train --run-dir) or a sweep or results folder"
        )
    return runs


def score_run(run_dir: Path, metric: str) -> Scored:
    """Add ``metric`` to one run's summary (see the module); the summary is rewritten only when a value is new."""
    from ablate.training.run_folder import is_held

    name = run_dir.name
    try:
        record = RunSummary.read(RunFiles(run_dir).summary)  # type-checked: unreadable or ill-typed says why
    except RecordError as err:
        return Scored(name, skipped=str(err))
    summary = record.to_json()
    if summary.get("status") != RunStatus.FINISHED or is_held(run_dir):
        return Scored(name, skipped="still training" if is_held(run_dir) else f"status {summary.get('status')}")
    try:
        texts = {kind: read_texts(run_dir / kind) for kind in TEXT_KINDS}
    except TextError as err:
        return Scored(name, skipped=str(err))
    if not texts["hyps"]:
        return Scored(name, skipped="no saved hypotheses (hyps/)")
    for split, refs in texts["refs"].items():  # a truncated file: not the run scored on its other splits, unsaid
        if len(hyps := texts["hyps"].get(split, refs)) != len(refs):
            lines = f"hyps/{split}.txt has {len(hyps)} lines, refs/{split}.txt {len(refs)}"
            return Scored(name, skipped=f"{lines}: not aligned")
    recorded = Trial(name, RunStatus.FINISHED, signatures={"bleu": summary.get("bleu_signature") or ""})
    scorer = scorer_for(metric, [recorded])
    added = scored(scorer, texts, summary)
    if not added:
        return Scored(name)
    signature = {signature_key(metric): scorer.signature()} if signature_key(metric) not in summary else {}
    record.update({**added, **signature})
    record.write(RunFiles(run_dir).summary)
    return Scored(name, added)


def score_runs(path: Path, metric: str) -> list[Scored]:
    """Add ``metric`` (atomically, keeping what is recorded) to the run at ``path`` or every run under it."""
    scorer_for(metric, [])  # an unknown metric fails before any run is read
    path = Path(path)
    return [
        Scored(run.name, skipped=f"a link to {run.resolve()}, outside {path}: score that run itself")
        if run != path and run.is_symlink() and path.resolve() not in run.resolve().parents
        else score_run(run, metric)
        for run in run_folders(path)
    ]


def local_folders(*sources: Optional[str]) -> list[Path]:
    """The folders the sources name (a W&B source, or None, names none): what an output must stay apart from."""
    return [Path(source) for source in sources if source is not None and not source.startswith(WANDB_PREFIX)]


def planned_trials(state: Any) -> tuple[list[dict[str, Any]], Optional[str]]:
    """The trials ``sweep.json`` plans, each ``{name, status, error, point}``, and the first way they break
    that shape (then none are taken)."""

    if not isinstance(state, dict) or state.get("trials") is None:
        return [], None
    trials = state["trials"]
    if not isinstance(trials, list):
        return [], f"trials is a {kind_of(trials)}, not a list"
    out = []
    for i, t in enumerate(trials):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            return [], f"trials[{i}] is not a record with a name"
        if not isinstance(t.get("point", {}), dict):
            return [], f"trials[{i}].point is a {kind_of(t['point'])}, not a mapping"
        status = t.get("status", RunStatus.PENDING)
        if not isinstance(status, str):
            return [], f"trials[{i}].status is a {kind_of(t['status'])}, not text"
        error = t["error"] if isinstance(t.get("error"), str) else None
        out.append({"name": t["name"], "status": RunStatus.of(status), "error": error, "point": t.get("point", {})})
    return out, None
