"""Collect trial records from a sweep folder or from a W&B project.

A *trial* is one training run. Both sources yield the same :class:`Trial` objects, so every
later stage (aggregation, significance, layout, plots) is source-agnostic:

* a sweep folder ``DIR/<trial>/summary.json`` (+ ``hyps/<split>.txt``, ``refs/<split>.txt``),
  as written by ``ablate.training.tracking.RunRecord`` and the sweep helper;
* ``wandb:<entity>/<project>[/<group>]``, read through W&B's public API
  (``wandb.Api().runs``): ``run.config`` (dotted keys, flat or nested), ``run.summary``, the
  validation history, and hypotheses from run files or a ``hypotheses``/``predictions``
  artifact when present.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional

from ablate.config import flatten
from ablate.errors import AblateError
from ablate.utils.io import read_lines, split_lines


class ReportError(AblateError):
    """A user-facing report mistake (bad source, nothing to tabulate); one actionable line."""


FINISHED = "finished"
SUMMARY = "summary.json"
WANDB_PREFIX = "wandb:"
HYP_ARTIFACT_TYPES = ("hypotheses", "predictions")
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
# Summary keys that are bookkeeping, not metrics.
_NOT_METRICS = {"status", "error", "config", "history", "variant", "sweep", "bleu_signature", "resolved"}


@dataclass(frozen=True)
class Trial:
    """One run, whatever its source.

    Attributes:
        name: trial (run) name, unique within the sweep.
        status: ``finished`` | ``failed`` | ``interrupted`` | ``running``.
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
            trainer or, for older runs, derived with :func:`ablate.training.resolved.resolved`.
        sources: split -> source sentences, aligned with ``hyps`` (for BLEU by source length).
        comparisons: the sweep's ``comparisons`` parameter (see :mod:`ablate.sweep.spec`), if any.
        accelerator: ``cpu`` or ``gpu``, what trained the run (see :func:`trained_on`); None if not known.
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
    accelerator: Optional[str] = None

    @property
    def seed(self) -> Any:
        return self.config.get("seed")

    @property
    def finished(self) -> bool:
        return self.status == FINISHED


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


# --------------------------------------------------------------------------------------
# Sweep folder
# --------------------------------------------------------------------------------------


def collect_folder(root: Path) -> list[Trial]:
    """Trials of a sweep output folder: each subfolder with a ``summary.json``, sorted by name."""
    if not root.is_dir():
        raise ReportError(f"sweep folder not found: {root} (pass a sweep output folder or wandb:<entity>/<project>)")
    trials = []
    planned = _sweep_comparisons(root)
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        path = run_dir / SUMMARY
        if not path.exists():
            continue
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(summary, dict):
                raise ValueError(f"it holds {type(summary).__name__}, not a JSON object")
            hyps, refs = _read_texts(run_dir / "hyps"), _read_texts(run_dir / "refs")
            sources = _read_texts(run_dir / "sources")
        except (OSError, ValueError, EOFError) as err:  # bad UTF-8, a torn .gz
            trials.append(Trial(run_dir.name, "failed", f"unreadable {SUMMARY}: {str(err).splitlines()[0]}"))
            continue
        trial = from_summary(run_dir.name, summary, hyps, refs, sources=sources)
        trials.append(replace(trial, comparisons=planned.get(run_dir.name)))
    if not trials:
        raise ReportError(f"no trials in {root}: expected subfolders holding {SUMMARY}")
    return trials


def _sweep_comparisons(root: Path) -> dict[str, list]:
    """Trial name -> the ``comparisons`` of its sweep point, from the launcher's ``sweep.json``."""
    try:
        state = json.loads((root / "sweep.json").read_text())
        return {
            t["name"]: t["point"]["comparisons"]
            for t in state.get("trials", [])
            if isinstance(t.get("point"), dict) and "comparisons" in t["point"]
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _read_texts(folder: Path) -> dict[str, list[str]]:
    """``<split>.txt`` files, or gzip'd ``<split>.txt.gz`` (as ``ablate export`` ships them), as lines;
    only newlines end a line (a hypothesis may hold other Unicode line separators), so line i is
    always the i-th sentence."""
    if not folder.is_dir():
        return {}
    texts = {
        p.name[: -len(".txt.gz")]: split_lines(gzip.decompress(p.read_bytes()).decode("utf-8"))
        for p in sorted(folder.glob("*.txt.gz"))
    }
    texts.update({p.stem: read_lines(p) for p in sorted(folder.glob("*.txt"))})
    return texts


def _resolved(summary: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """The run's recorded ``resolved`` values, else derived from its config as the trainer does."""
    if isinstance(summary.get("resolved"), dict):
        return {k: _hashable(v) for k, v in summary["resolved"].items()}
    from ablate.config import ConfigError, from_flat
    from ablate.training.resolved import resolved

    try:
        cfg = from_flat(
            {k: list(v) if isinstance(v, tuple) else v for k, v in flat.items() if not k.startswith(IGNORED_PREFIXES)}
        )
    except (ConfigError, TypeError, ValueError):
        return {}
    return resolved(cfg)


def from_summary(
    name: str,
    summary: dict[str, Any],
    hyps: dict[str, list[str]] | None = None,
    refs: dict[str, list[str]] | None = None,
    config: dict[str, Any] | None = None,
    status: str | None = None,
    sources: dict[str, list[str]] | None = None,
) -> Trial:
    """A :class:`Trial` from a ``summary.json``-shaped dict (``config`` may be given flat)."""
    raw = dict(config if config is not None else summary.get("config") or {})
    comparisons = raw.pop("comparisons", None)
    raw.pop("variants", None)  # a sweep registered by ablate: its variants' overrides, the same for every run
    flat = clean_config(raw)
    sweep = summary.get("sweep") if isinstance(summary.get("sweep"), dict) else {}
    if "seed" not in flat and "seed" in (sweep.get("params") or {}):
        flat["seed"] = sweep["params"]["seed"]
    metrics = {k: n for k, v in summary.items() if k not in _NOT_METRICS and (n := _number(v)) is not None}
    history = tuple(sorted((dict(h) for h in summary.get("history") or [] if "step" in h), key=lambda h: h["step"]))
    return Trial(
        name=name,
        status=str(status or summary.get("status") or "running"),
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
        accelerator=trained_on(summary, raw),
    )


ACCELERATORS = ("cpu", "gpu")


def trained_on(summary: dict[str, Any], config: dict[str, Any]) -> Optional[str]:
    """``cpu`` or ``gpu``: the accelerator the summary records, else the one the config names (nested or
    dotted ``train.accelerator``); None where neither says (older runs with ``auto``)."""
    train = _plain(config.get("train"))
    named = train.get("accelerator") if isinstance(train, dict) else config.get("train.accelerator")
    return next((str(v) for v in (summary.get("accelerator"), named) if v in ACCELERATORS), None)


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
    flat = flatten(_plain({k: v for k, v in config.items() if k != "variant"}))  # a sweep agent's: a mapping
    return {
        k: _hashable(v) for k, v in flat.items() if not k.startswith(IGNORED_PREFIXES) and v != {}
    }  # an empty section (no trainer.*) sets nothing


def _hashable(value: Any) -> Any:
    """Lists become tuples and (empty) dicts JSON text, so a config value can key a row."""
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _plain(value: Any) -> Any:
    """Dict-like objects (W&B summaries/configs) to plain dicts, recursively."""
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------------------
# Weights & Biases public API
# --------------------------------------------------------------------------------------

_STATES = {
    "finished": "finished",
    "failed": "failed",
    "crashed": "failed",
    "killed": "interrupted",
    "running": "running",
    "pending": "running",
}


def parse_wandb_path(path: str) -> tuple[str, str, Optional[str]]:
    """``entity/project[/group]`` -> ``(entity, project, group or None)``."""
    parts = [p for p in path.strip("/").split("/")]
    if len(parts) not in (2, 3) or not all(parts):
        raise ReportError(f"bad W&B source 'wandb:{path}': use wandb:<entity>/<project>[/<group>]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def collect_wandb(path: str, api: Any = None) -> list[Trial]:
    """Trials of a W&B project (optionally one group), newest first as W&B returns them."""
    entity, project, group = parse_wandb_path(path)
    if api is None:
        import wandb

        api = wandb.Api()
    runs = api.runs(f"{entity}/{project}", filters={"group": group} if group else None)
    trials = [from_wandb_run(run) for run in runs]
    if not trials:
        where = f"group '{group}' of " if group else ""
        raise ReportError(f"no runs in {where}W&B project {entity}/{project}")
    return trials


def from_wandb_run(run: Any) -> Trial:
    """A :class:`Trial` from an object shaped like ``wandb.apis.public.Run``."""
    summary = _plain(run.summary)
    config = _plain(run.config)
    status = summary.get("status") or _STATES.get(str(run.state).lower(), str(run.state))
    if "variant" not in summary and config.get("variant") is not None:
        summary["variant"] = config["variant"]
    if not summary.get("history"):
        summary["history"] = _wandb_history(run)
    if not summary.get("sweep") and getattr(run, "group", None):
        summary["sweep"] = {"name": run.group}
    hyps, refs, sources = _wandb_texts(run, _test_splits(summary))
    return from_summary(run.name, summary, hyps, refs, config=config, status=status, sources=sources)


def _test_splits(summary: dict[str, Any]) -> list[str]:
    return sorted(k[len("test_") : -len("/bleu")] for k in summary if k.startswith("test_") and k.endswith("/bleu"))


def _wandb_history(run: Any) -> list[dict[str, float]]:
    """Validation records from ``run.scan_history``; the step is ours, Lightning's or W&B's."""
    scan = getattr(run, "scan_history", None)
    if scan is None:
        return []
    history = []
    for row in scan(keys=["val/bleu"]):
        step = next((row[k] for k in ("step", "trainer/global_step", "_step") if row.get(k) is not None), None)
        if step is None:
            continue
        record = {"step": int(step), "val/bleu": float(row["val/bleu"])}
        if row.get("val/ppl") is not None:
            record["val/ppl"] = float(row["val/ppl"])
        history.append(record)
    return history


def _wandb_texts(run: Any, splits: Iterable[str]) -> tuple[dict[str, list[str]], ...]:
    """Hypotheses, references and sources saved as run files, else in a hypotheses artifact."""
    wanted = {f"{kind}/{split}.txt" for split in splits for kind in ("hyps", "refs", "sources")}
    if not wanted:
        return {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        root = Path(tmp)
        try:
            for f in run.files() if hasattr(run, "files") else []:
                if f.name in wanted:
                    handle = f.download(root=str(root), replace=True)
                    if hasattr(handle, "close"):
                        handle.close()
        except Exception:  # noqa: BLE001 - texts are optional; the table is still correct without
            pass
        if not (root / "hyps").is_dir():
            try:
                for art in run.logged_artifacts() if hasattr(run, "logged_artifacts") else []:
                    if getattr(art, "type", None) in HYP_ARTIFACT_TYPES:
                        art.download(root=str(root))
                        break
            except Exception:  # noqa: BLE001
                pass
        return _read_texts(root / "hyps"), _read_texts(root / "refs"), _read_texts(root / "sources")
