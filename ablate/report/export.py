"""``ablate export``: a finished sweep as a small, self-contained results folder for the repository.

``results/<sweep>/`` holds what a reader needs to check the table and nothing that is only for
training (no checkpoints, no W&B runs, no config files beyond each summary's resolved config)::

    README.md            what was run (the exact command), on which commit, machine and packages, how long it took
    manifest.json        the same, machine-readable
    environment.txt      the packages the trials ran with, name==version (:mod:`ablate.report.environment_lock`)
    table.md, table.tex  ``ablate table`` in Markdown and LaTeX (with ``--reference``: the paper beside it)
    plots/               ``ablate plot``'s figures
    sweep.json           the launcher's record of the sweep (points, statuses, attempts)
    <trial>/summary.json every trial's summary (metrics, history, resolved config, machine, times)
    <trial>/{hyps,refs,sources}/<split>.txt.gz   hypotheses, references and sources of the test splits
                         and of the validation split (the validation that summary.json's dev
                         scores come from), gzip'd
    plugins/<name>-<sha256 prefix>.py   the plugin files the trials imported; each summary's config
                         points to its copy (``../plugins/...``, relative to the summary's folder)

``ablate table results/<sweep>`` rebuilds the same table from these files alone: the report's
readers take ``.txt.gz`` wherever they take ``.txt``. The validation texts let a reader re-check the
dev BLEU too; the table never tests them (they are not a test split).
"""

from __future__ import annotations

import gzip
import json
import math
import shlex
import time
from pathlib import Path
from typing import Any, Optional

from ablate.record import SUMMARY_FILE, SWEEP_FILE, TEST_BLEU, RunStatus
from ablate.report.environment_lock import readme_line as environment_line, write_environment_lock
from ablate.report.records import collect_folder
from ablate.report.significance import DEFAULT_TEST
from ablate.utils.io import atomic_write_json, atomic_write_text, dumps
from ablate.utils.provenance import git_commit
from ablate.utils.safe_output import output_folder, read_inside

TEXT_KINDS = ("hyps", "refs", "sources")
NOT_TEST = ("val", "valid", "dev", "validation")
"""Names of the validation split (``ablate.data.sources.VAL_NAMES``): saved beside the test splits, never tested."""
STATE = SWEEP_FILE
PLUGINS = "plugins"
"""The results folder's copies of the plugin files the trials imported."""


def test_splits(summary: dict[str, Any], run_dir: Path) -> list[str]:
    """The trial's test splits: those with a ``test_<split>/bleu``, else every saved split but validation."""
    named = sorted(s for k in summary if (s := TEST_BLEU.split_of(k)) is not None)
    if named:
        return named
    return sorted({p.name.split(".")[0] for p in (run_dir / "hyps").glob("*.txt*")} - set(NOT_TEST))


def validation_splits(run_dir: Path) -> list[str]:
    """The validation split whose hypotheses the trial saved (those of its best validation), if any."""
    return sorted({p.name.split(".")[0] for p in (run_dir / "hyps").glob("*.txt*")} & set(NOT_TEST))


def _copy_trial(source: Path, name: str, out: Path) -> int:
    """Copy one trial's summary and gzip its test and validation texts; return the bytes written.

    Every file is read through :func:`~ablate.utils.safe_output.read_inside`: a link that leads
    out of the sweep folder is refused, never copied into a folder meant to be published.
    """
    run_dir = source / name
    summary_bytes = read_inside(run_dir / SUMMARY_FILE, source)
    try:
        summary = json.loads(summary_bytes)
    except ValueError:
        summary = {}
    summary = summary if isinstance(summary, dict) else {}
    (out / name).mkdir(parents=True)
    summary_bytes = _copy_plugins(summary, out) or summary_bytes
    (out / name / SUMMARY_FILE).write_bytes(summary_bytes)
    size = len(summary_bytes)
    for split in dict.fromkeys(test_splits(summary, run_dir) + validation_splits(run_dir)):
        for kind in TEXT_KINDS:
            src = run_dir / kind / f"{split}.txt"
            if not src.exists():
                continue
            dst = out / name / kind / f"{split}.txt.gz"
            dst.parent.mkdir(exist_ok=True)
            # mtime=0: the same texts give the same bytes, so a re-export changes nothing in git
            data = gzip.compress(read_inside(src, source), compresslevel=9, mtime=0)
            dst.write_bytes(data)
            size += len(data)
    return size


def _copy_plugins(summary: dict[str, Any], out: Path) -> Optional[bytes]:
    """Copy the plugin files ``summary``'s config names into ``out/plugins/``; the summary, pointing to
    the copies, as bytes (None when it names no plugin file that still exists)."""
    config = summary.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("plugins"), list):
        return None
    records = config["plugins"]
    changed, kept = False, []
    for record in records:
        path = Path(str(record.get("path"))) if isinstance(record, dict) and record.get("kind") == "file" else None
        if path is None or not path.is_file() or not record.get("sha256"):
            kept.append(record)
            continue
        copy = out / PLUGINS / f"{path.stem}-{str(record['sha256'])[:12]}.py"
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(path.read_bytes())
        kept.append({**record, "path": f"../{PLUGINS}/{copy.name}"})
        changed = True
    if not changed:
        return None
    return (dumps({**summary, "config": {**config, "plugins": kept}}, indent=2, sort_keys=True) + "\n").encode()


def commit_facts(summaries: list[dict[str, Any]], given: Optional[str] = None) -> dict[str, Any]:
    """The commits the trials were trained with (each trial records its own), else ``given``, else this checkout's."""
    commits: list[str] = []
    for summary in summaries:
        for commit in summary.get("commits") or []:
            if isinstance(commit, str) and commit not in commits:
                commits.append(commit)
    if commits:
        return {"commit": ", ".join(commits), "commit_source": "trials"}
    if given:
        return {"commit": given, "commit_source": "given"}
    return {"commit": git_commit(), "commit_source": "export"}


def sweep_facts(source: Path, summaries: list[dict[str, Any]], planned: int = 0) -> dict[str, Any]:
    """Command, times and machine of the sweep, from ``sweep.json`` and the trials' summaries
    (``planned``: the trials found or planned, those without a summary yet included)."""
    state = _read_json(source / STATE)
    run = None
    if state.get("source"):
        run = " ".join(
            [
                "ablate sweep run",
                shlex.quote(str(state["source"])),
                "--out",
                shlex.quote(str(source)),
                *map(shlex.quote, state.get("overrides") or []),
            ]
        )
    ends = [(source / name / SUMMARY_FILE).stat().st_mtime for name in (s.get("_name") for s in summaries) if name]
    started = state.get("created_at")
    started = started if _is_number(started) else None  # "yesterday": not recorded
    machines = {json.dumps(s["machine"], sort_keys=True) for s in summaries if isinstance(s.get("machine"), dict)}
    total = lambda key: round(sum(float(s[key]) for s in summaries if _is_number(s.get(key))), 1)  # noqa: E731
    return {
        "run_command": run,
        "trials": max(len(summaries), planned),
        RunStatus.FINISHED: sum(s.get("status") == RunStatus.FINISHED for s in summaries),
        "wall_time_s": round(max(ends) - float(started), 1) if started and ends else None,
        "trial_wall_time_s": total("wall_time_s"),
        "trial_cpu_time_s": total("cpu_time_s") if any("cpu_time_s" in s for s in summaries) else None,
        "trials_with_cpu_time": sum("cpu_time_s" in s for s in summaries),
        "machines": [json.loads(m) for m in sorted(machines)],
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def export_sweep(
    source: Path,
    out: Path,
    command: Optional[str] = None,
    reference: Optional[str] = None,
    plots: bool = True,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    force: bool = False,
    commit: Optional[str] = None,
) -> dict[str, Any]:
    """Write ``out`` from the sweep folder ``source`` (see the module docstring); return the manifest.

    Args:
        command: the exact command that ran the sweep; default: rebuilt from ``sweep.json`` (its
            file and overrides; launcher flags such as ``--parallel`` are not recorded there).
        reference: a shipped reference (``ablate table --reference``) to print beside the table.
        force: replace an existing ``out``.
        commit: the commit the trials ran, for runs too old to record it (what the trials
            recorded always wins); default: this checkout's, said so in the README.

    ``out`` is written whole or not at all (:func:`~ablate.utils.safe_output.output_folder`): a
    full disk, an error or Ctrl-C part-way leave the old ``out`` (or none).

    Raises:
        ReportError: ``source`` holds no trials.
        OutputError: ``out`` exists (without ``force``), is a file, is ``source``, lies inside it or
            contains it; or a file of ``source`` is a link that leads out of it.
    """
    from ablate.report.reference import get as get_reference

    source, out = Path(source), Path(out)
    paper = get_reference(reference) if reference else None
    trials = collect_folder(source)  # a missing or empty folder fails here, before anything is written
    with output_folder(out, [source], force) as tmp:  # all of it, renamed into place at the end, or nothing
        summaries, size = [], 0
        for trial in trials:
            if not (
                source / trial.name / SUMMARY_FILE
            ).is_file():  # planned by sweep.json, no record yet: the table lists it
                continue
            size += _copy_trial(source, trial.name, tmp)
            summaries.append({**_read_json(tmp / trial.name / SUMMARY_FILE), "_name": trial.name})
        if (source / STATE).exists():
            (tmp / STATE).write_bytes(read_inside(source / STATE, source))
        planned = sum(t.name != STATE for t in trials)  # every trial found or planned, pending ones too
        manifest = _write_report(
            source, tmp, out, summaries, planned, size, command, reference, paper, plots, alpha, test, samples, commit
        )
    return manifest


def _write_report(
    source: Path,
    tmp: Path,
    out: Path,
    summaries: list[dict[str, Any]],
    planned: int,
    size: int,
    command: Optional[str],
    reference: Optional[str],
    paper: Any,
    plots: bool,
    alpha: float,
    test: str,
    samples: int,
    commit: Optional[str],
) -> dict[str, Any]:
    """Tables, figures, manifest and README of the export being written in ``tmp`` (to become ``out``)."""
    from ablate.report.api import load, significance
    from ablate.report.formats import render
    from ablate.report.plots import plot_all
    from ablate.report.reference import render as render_reference, side_by_side
    from ablate.report.table import build_table

    # everything below is read back from the export, so it shows what the export alone rebuilds
    sweep = load(str(tmp))
    table = build_table(sweep, significance(sweep, True, test, samples), alpha, test, samples)
    md = render(table, "md")
    if paper is not None:
        md += "\n" + render_reference(side_by_side(sweep, table, paper), "md")
    atomic_write_text(tmp / "table.md", md)
    atomic_write_text(tmp / "table.tex", render(table, "latex"))
    figures = [p.name for p in plot_all(sweep, tmp / "plots", significance(sweep, True), alpha)] if plots else []

    facts = sweep_facts(source, summaries, planned)
    rebuilt = facts.pop("run_command")
    table_cmd = " ".join(
        ["ablate table", shlex.quote(str(out)), "--format md"] + ([f"--reference {reference}"] if reference else [])
    )
    manifest = {
        "sweep": sweep.name or out.name,
        "command": command or rebuilt,
        "command_recorded": command is not None,
        **facts,
        **commit_facts(summaries, commit),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "export_command": " ".join(
            ["ablate export", shlex.quote(str(source)), shlex.quote(str(out))]
            + ([f"--reference {reference}"] if reference else [])
            + ([f"--commit {commit}"] if commit else [])
        ),
        "table_command": table_cmd,
        "texts_bytes": size,
        "plots": figures,
        "environment": write_environment_lock(source, summaries, tmp),
    }
    atomic_write_json(tmp / "manifest.json", manifest)
    atomic_write_text(tmp / "README.md", readme(manifest))
    return manifest


def _hours(seconds: Optional[float]) -> str:
    return "not recorded" if seconds is None else f"{seconds / 3600:.2f} h ({seconds:,.0f} s)"


def readme(m: dict[str, Any]) -> str:
    """The results folder's README: how it was made and how to check it."""
    machines = (
        "; ".join(
            f"{x.get('cpu')}, {x.get('cores')} cores, torch threads per trial: {x.get('torch_threads')}"
            for x in m["machines"]
        )
        or "not recorded by these runs"
    )
    command = f"`{m['command']}`" if m["command"] else "not recorded (no sweep.json; pass ablate export --command)"
    cpu = _hours(m["trial_cpu_time_s"])
    if m["trial_cpu_time_s"] is not None and m["trials_with_cpu_time"] < m["trials"]:
        cpu += f" (recorded by {m['trials_with_cpu_time']} of the {m['trials']} trials)"
    how = ""
    if m["command"] and not m["command_recorded"]:
        how = " (rebuilt from sweep.json; launcher flags such as --parallel are not recorded there)"
    return "\n".join(
        [
            f"# Results: {m['sweep']}",
            "",
            f"- Command{how}: {command}",
            f"- Commit: `{m['commit']}`"
            + {
                "trials": " (recorded by the trials)",
                "given": " (given at export, `--commit`: these trials did not record theirs)",
            }.get(m.get("commit_source", ""), " (of the checkout that exported: these trials did not record theirs)"),
            f"- Machine: {machines}",
            *filter(None, [environment_line(m.get("environment"))]),
            "- Wall time: "
            + (
                f"{_hours(m['wall_time_s'])}, from the sweep's start to its last trial's end (pauses included)"
                if m["wall_time_s"] is not None
                else "not recorded (no sweep.json)"
            ),
            f"- Trials: {m[RunStatus.FINISHED]} finished of {m['trials']}; {_hours(m['trial_wall_time_s'])} of trial wall time, "
            f"CPU time {cpu}",
            f"- Exported {m['exported_at']} with `{m['export_command']}`",
            "",
            "The table is `table.md` (`table.tex` for LaTeX) and the figures are in `plots/`. Each trial folder holds its",
            "`summary.json` and the hypotheses, references and sources (`*.txt.gz`) of the test splits and of the",
            "validation split (the validation whose dev scores summary.json reports, so dev BLEU can be re-checked; it",
            f"is never tested); the table rebuilds from these files alone: `{m['table_command']}`.",
            "",
        ]
    )
