"""The runs of a W&B project, read through W&B's public API (``wandb.Api().runs``).

``run.config`` (dotted keys, flat or nested), ``run.summary``, the validation history, and
hypotheses from run files or a ``hypotheses``/``predictions`` artifact when present, as a
:class:`WandbRun` that :func:`ablate.report.records.from_wandb_run` turns into the same ``Trial`` a
sweep folder gives; a summary that breaks the run record's types (:mod:`ablate.record`) is a
run with a ``problem``, and a missing API key or an unreachable server is one line.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from ablate.record import DEV_BLEU, DEV_PPL, TEST_BLEU, RunStatus, RunSummary, summary_problem
from ablate.report.saved_texts import ReportError, TextError, read_texts

HYP_ARTIFACT_TYPES = ("hypotheses", "predictions")
# --------------------------------------------------------------------------------------

_STATES = {  # W&B's run states -> ours
    "finished": RunStatus.FINISHED,
    "failed": RunStatus.FAILED,
    "crashed": RunStatus.FAILED,
    "killed": RunStatus.INTERRUPTED,
    "running": RunStatus.RUNNING,
    "pending": RunStatus.RUNNING,
}


def wandb_runs(entity: str, project: str, group: Optional[str], api: Any = None) -> list[Any]:
    """The runs of a W&B project (one group, if given), newest first as W&B returns them.

    Raises:
        ReportError: no API key, or W&B failed (network, permissions, no such project), in one line.
    """
    if api is None:
        api = _wandb_api()
    try:
        return list(api.runs(f"{entity}/{project}", filters={"group": group} if group else None))
    except Exception as err:  # noqa: BLE001 - W&B's errors: one line
        raise ReportError(f"cannot read W&B project {entity}/{project}: {_first_line(err)}") from None


def _wandb_api() -> Any:
    """``wandb.Api()``, or a one-line error where there is no API key (W&B would raise its own traceback)."""
    from ablate.training.tracking import has_wandb_credentials

    if not has_wandb_credentials():
        raise ReportError("reading a W&B project needs an API key: set WANDB_API_KEY or run `wandb login`")
    import wandb

    try:
        return wandb.Api()
    except Exception as err:  # noqa: BLE001
        raise ReportError(f"cannot reach W&B: {_first_line(err)}") from None


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


@dataclass(frozen=True)
class WandbRun:
    """What the report reads of one W&B run; ``problem`` says why it cannot be believed, if so."""

    name: str
    summary: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    status: str = RunStatus.RUNNING
    hyps: dict[str, list[str]] = field(default_factory=dict)
    refs: dict[str, list[str]] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    problem: Optional[str] = None


def read_run(run: Any) -> WandbRun:
    """A :class:`WandbRun` from an object shaped like ``wandb.apis.public.Run``."""
    name = str(run.name)
    summary, config = plain(run.summary), plain(run.config)
    if not isinstance(summary, dict) or not isinstance(config, dict):
        return WandbRun(name, problem="W&B run: its summary or config is not a mapping")
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
        return WandbRun(name, problem=f"W&B summary: {problem}")
    try:
        hyps, refs, sources = _wandb_texts(run, _test_splits(summary))
    except TextError as err:
        return WandbRun(name, problem=f"W&B files: {err}")
    return WandbRun(name, summary, config, str(status), hyps, refs, sources)


def plain(value: Any) -> Any:
    """Dict-like objects (W&B summaries/configs) to plain dicts, recursively."""
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def _recorded(run: Any) -> dict[str, Any]:
    """The run file ``summary.json`` that ablate saves with each W&B run (the whole record, nested fields
    included; the run summary holds its numbers and texts), less the config; {} where there is none."""
    from ablate.training.tracking import RECORD_FILE

    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        _download(run, {RECORD_FILE}, Path(tmp))
        record = RunSummary.peek(Path(tmp) / RECORD_FILE)
    if record is None:
        return {}
    data = record.to_json()
    return {k: v for k, v in data.items() if k not in ("config", "version")}


def _download(run: Any, wanted: set[str], root: Path) -> None:
    """The run files named in ``wanted`` into ``root``; W&B trouble leaves them out (they are optional)."""
    try:
        for f in run.files() if hasattr(run, "files") else []:
            if f.name in wanted:
                handle = f.download(root=str(root), replace=True)
                if hasattr(handle, "close"):
                    handle.close()
    except Exception:  # noqa: BLE001 - the table is still correct without them
        pass


def _test_splits(summary: dict[str, Any]) -> list[str]:
    return sorted(s for k in summary if (s := TEST_BLEU.split_of(k)) is not None)


def _wandb_history(run: Any) -> list[dict[str, float]]:
    """Validation records from ``run.scan_history``; the step is ours, Lightning's or W&B's."""
    scan = getattr(run, "scan_history", None)
    if scan is None:
        return []
    history = []
    for row in scan(keys=[DEV_BLEU.key]):
        step = next((row[k] for k in ("step", "trainer/global_step", "_step") if row.get(k) is not None), None)
        if step is None:
            continue
        record = {"step": step, **{k: row[k] for k in (DEV_BLEU.key, DEV_PPL.key) if row.get(k) is not None}}
        history.append(record)  # checked with the summary (schema.history_problem)
    return history


def _wandb_texts(run: Any, splits: Iterable[str]) -> tuple[dict[str, list[str]], ...]:
    """Hypotheses, references and sources saved as run files, else in a hypotheses artifact."""
    wanted = {f"{kind}/{split}.txt" for split in splits for kind in ("hyps", "refs", "sources")}
    if not wanted:
        return {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ablate-report-") as tmp:
        root = Path(tmp)
        _download(run, wanted, root)
        if not (root / "hyps").is_dir():
            try:
                for art in run.logged_artifacts() if hasattr(run, "logged_artifacts") else []:
                    if getattr(art, "type", None) in HYP_ARTIFACT_TYPES:
                        art.download(root=str(root))
                        break
            except Exception:  # noqa: BLE001
                pass
        return read_texts(root / "hyps"), read_texts(root / "refs"), read_texts(root / "sources")
