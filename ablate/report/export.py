"""Publishing a sweep: ``ablate export`` (a results folder) and ``ablate report`` (a W&B Report).

``results/<sweep>/`` holds what a reader needs to check the table and nothing only for training::

    README.md, manifest.json   what was run (the exact command), commit, machine, packages, time
    environment.txt      the packages the trials ran with (the freeze most trials recorded; others as
                         environment-<sha256[:12]>.txt; the exporting machine's for runs without one)
    table.md, table.tex  ``ablate table`` (with ``--reference``: the paper beside it)
    plots/               ``ablate plot``'s figures
    sweep.json           the launcher's record of the sweep
    <trial>/summary.json every trial's summary
    <trial>/{hyps,refs,sources}/<split>.txt.gz   the test and validation texts, gzip'd
    plugins/<name>-<sha256 prefix>.py   the plugin files the trials imported

``ablate table results/<sweep>`` rebuilds the same table from these files alone. The W&B Report
(``wandb_workspaces.reports.v2``) holds the table as Markdown and panels over the sweep's runs:
:func:`build_report` touches no network, :func:`publish` saves it, :func:`offline_spec` serialises what
``save`` would send (``ablate report --dry-run``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import re
import shlex
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ablate.record import DEV_BLEU, SUMMARY_FILE, SWEEP_FILE, TEST_BLEU, TEXT_KINDS, TOKENS_PER_SEC, RunStatus
from ablate.report.layout import Table, build_table
from ablate.report.render import render, to_markdown
from ablate.report.stats import DEFAULT_ALPHA, DEFAULT_TEST, Sweep, check_sigma_from, load, table_comparisons
from ablate.report.trials import VALIDATION_SPLITS, ReportError, collect_folder, local_folders
from ablate.utils.io import (
    atomic_write_json,
    atomic_write_text,
    dumps,
    loads_json,
    output_folder,
    read_inside,
    read_json,
)
from ablate.utils.provenance import (
    ENVIRONMENT_FILE as LOCK,
    freeze,
    freeze_sha256,
    freeze_text,
    git_commit,
    package_versions,
)

_LINE = re.compile(r"[a-z0-9][a-z0-9-]*==\S+")
MAX_BYTES = 1 << 20  # a freeze is a few kB; a bigger file is not one


def recorded_environment(summary: dict[str, Any]) -> dict[str, Any]:
    env = summary.get("environment")
    return env if isinstance(env, dict) else {}


def recorded_freeze(run_dir: Path, summary: dict[str, Any]) -> Optional[list[str]]:
    """The freeze ``run_dir`` recorded (``environment.txt`` matching the summary's sha256), or None."""
    sha = recorded_environment(summary).get("freeze_sha256")
    path = run_dir / LOCK
    if not isinstance(sha, str) or not path.is_file() or path.stat().st_size > MAX_BYTES:
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return lines if freeze_sha256(lines) == sha and all(_LINE.fullmatch(line) for line in lines) else None


def write_environment_lock(
    source: Path, summaries: list[dict[str, Any]], out: Path, exported: Any = None
) -> dict[str, Any]:
    """Write the lock file(s) of an export of ``source`` into ``out``; return the manifest's ``environment``.

    ``summaries`` are the trials' summaries, each with its folder name under ``_name``. ``exported``: the
    ``environment`` of ``source``'s own manifest where it is a results folder exported before; its lock
    files are carried over when the trials recorded none.
    """
    found: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
    for summary in summaries:
        name = summary.get("_name")
        lines = recorded_freeze(source / name, summary) if isinstance(name, str) else None
        if lines is not None:
            found.setdefault(freeze_sha256(lines), (lines, []))[1].append(summary)
    files = exported.get("files") if isinstance(exported, dict) else None
    if not found and isinstance(files, list) and files:
        names: list[Any] = [f.get("file") for f in files if isinstance(f, dict)]  # checked below: str names
        if all(isinstance(n, str) and Path(n).name == n and (source / n).is_file() for n in names):
            for n in names:
                (out / n).write_bytes(read_inside(source / n, source))
            return exported
    ordered = sorted(found.items(), key=lambda item: (-len(item[1][1]), item[0]))
    if not found:  # the exporting machine's packages
        ordered = [(freeze_sha256(lines := freeze()), (lines, []))]
    files = []
    for i, (sha, (lines, trials)) in enumerate(ordered):
        file = LOCK if i == 0 else f"environment-{sha[:12]}.txt"
        (out / file).write_text(freeze_text(lines), encoding="utf-8")
        files.append({"file": file, "freeze_sha256": sha, "trials": len(trials)})
    versions = recorded_environment(ordered[0][1][1][0]).get("versions") if found else package_versions()
    return {
        "source": "trials" if found else "export",
        "files": files,
        "versions": versions if isinstance(versions, dict) else {},
        "trials_without": len(summaries) - sum(f["trials"] for f in files),
    }


def readme_line(env: Optional[dict[str, Any]]) -> Optional[str]:
    """The README's ``- Environment:`` line, or None for a manifest from before exports wrote one."""
    if not env:
        return None
    files = env.get("files") or []
    names = ", ".join(f"`{f['file']}` ({f['trials']} trials)" for f in files) if len(files) > 1 else f"`{LOCK}`"
    if env.get("source") == "export":
        where = "the packages of the machine that exported: these trials did not record theirs"
    else:
        where = "the packages the trials ran with (`pip install -r` reads it)"
        if env.get("trials_without"):
            where += f"; {env['trials_without']} trials did not record theirs"
    versions = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items() if v)
    return f"- Environment: {names}, {where}" + (f"; {versions}" if versions else "")


def place(entity: str, project: str) -> str:
    """``entity/project``, or ``project NAME`` for runs that left the entity to W&B's default (known only online)."""
    return f"{entity}/{project}" if entity else f"project {project}"


def _workspaces():
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError:  # pragma: no cover - a declared dependency
        raise ReportError("W&B reports need the wandb-workspaces package: pip install wandb-workspaces") from None
    return wr


def build_report(
    entity: str,
    project: str,
    group: Optional[str],
    table: Table,
    sweep: Sweep,
    title: Optional[str] = None,
    beside: Optional[str] = None,
) -> Any:
    """The ``wandb_workspaces.reports.v2.Report`` for one sweep, not yet saved.

    Args:
        group: the W&B run group of the sweep; None reports every run of the project.
        title: report title (default: the table's title).
        beside: the title of the published table the sweep is read against, named in the results heading.
    """
    wr = _workspaces()
    splits = sweep.test_splits
    test_keys = [TEST_BLEU.split_key(s) for s in splits] or [TEST_BLEU.key]
    # group-by keys that separate the table's rows: the variant (a name in every run's config: local, SLURM and
    # agent runs alike), else the varying keys
    keys = ["config.variant"] if sweep.uses_variants else [f"config.{k}" for k in sweep.keys]
    one_key = keys[0] if len(keys) == 1 else None
    runset = wr.Runset(
        entity=entity,
        project=project,
        name=group or project,
        filters=f"Group = {_literal(group)}" if group else "",
        groupby=keys,
    )
    panels = [
        wr.BarPlot(
            title="Test BLEU by variant (mean ± std over seeds)",
            metrics=[wr.SummaryMetric(k) for k in test_keys],
            groupby=one_key,
            groupby_aggfunc="mean",
            groupby_rangefunc="stddev",
            title_y="BLEU",
            layout=wr.Layout(x=0, y=0, w=12, h=8),
        ),
        wr.ScatterPlot(
            title="Test BLEU vs training tokens/s",
            x=wr.SummaryMetric(TOKENS_PER_SEC.key),
            y=wr.SummaryMetric(test_keys[0]),
            layout=wr.Layout(x=12, y=0, w=12, h=8),
        ),
        wr.LinePlot(
            title="Learning curves: validation BLEU (mean ± std over seeds)",
            x="trainer/global_step",  # Lightning's WandbLogger logs the optimizer step under this key
            y=[DEV_BLEU.key],
            groupby=one_key,
            groupby_aggfunc="mean",
            groupby_rangefunc="stddev",
            title_x="step",
            title_y="validation BLEU",
            layout=wr.Layout(x=0, y=8, w=24, h=9),
        ),
    ]
    what = (f"group `{group}` of " if group else "") + place(entity, project)
    blocks = [
        wr.P(
            f"Ablation sweep: {what}. {len(sweep.rows)} configurations, "
            f"{sum(len(r.trials) for r in sweep.rows)} finished runs, {len(sweep.unfinished)} unfinished."
        ),
        wr.H2(f"Results of {sweep.name or 'the sweep'}" + (f", beside {beside}" if beside else "")),
        wr.MarkdownBlock(to_markdown(table)),
        wr.H2("Panels"),
        wr.PanelGrid(runsets=[runset], panels=panels),
    ]
    return wr.Report(
        project=project,
        entity=entity,
        title=(title or table.title)[:128],
        description=f"Paper-style ablation table and panels for {what}.",
        blocks=blocks,
    )


def _literal(text: str) -> str:
    """``text`` as a string literal of W&B's filter expressions, which are parsed as Python after rewriting
    ``=``, ``<`` and ``>`` (and ``within_last``) even inside quotes: every character but a letter, digit, space,
    ``_``, ``-`` or ``.`` is written as a ``\\U`` escape, so the parsed value is ``text`` exactly."""
    return "'" + "".join(c if c.isalnum() or c in " _-." else f"\\U{ord(c):08x}" for c in text) + "'"


def offline_spec(report: Any, draft: bool = False) -> dict[str, Any]:
    """What :func:`publish` would save, built without a W&B login: ``Report.save``'s ``upsertView`` request
    but for each runset's internal project id (W&B looks it up when the report is saved)."""
    with _no_project_lookup():
        model = report._to_model()
    return {
        "entityName": model.project.entity_name,
        "projectName": model.project.name,
        "displayName": model.display_name,
        "description": model.description,
        "type": "runs/draft" if draft else "runs",
        "spec": json.loads(model.spec.model_dump_json(by_alias=True, exclude_none=True)),
    }


@contextmanager
def _no_project_lookup() -> Iterator[None]:
    """``wandb_workspaces`` answering its runset project-id lookup offline (with no id) and refusing any
    other call to W&B in one line, while a report is serialised."""
    import wandb_workspaces.reports.v2.gql as gql
    import wandb_workspaces.reports.v2.interface as interface

    def lookup(api: Any, query: Any, variables: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        if query is not gql.projectInternalId:
            raise ReportError("serialising the W&B report offline needed W&B; publish it with a wandb: source")
        return {"project": {"internalId": None, "name": (variables or {}).get("projectName")}}

    saved = interface._get_api, interface.execute_graphql
    interface._get_api, interface.execute_graphql = (lambda: None), lookup
    try:
        yield
    finally:
        interface._get_api, interface.execute_graphql = saved


def publish(report: Any, draft: bool = False) -> str:
    """Save ``report`` to W&B (needs the network and a login); return its URL."""
    try:
        saved = report.save(draft=draft)
    except Exception as err:  # noqa: BLE001 - network, auth and server errors all end the command
        raise ReportError(f"could not save the W&B report: {' '.join(str(err).split())[:300]}") from None
    try:
        return str(saved.url)
    except Exception:  # noqa: BLE001 - the URL needs the API; the report is saved regardless
        return f"(saved report id {getattr(saved, 'id', '?')})"


PLUGINS = "plugins"
"""The results folder's copies of the plugin files the trials imported."""


def _copy_trial(source: Path, name: str, out: Path) -> int:
    """Copy one trial's summary and gzip its test and validation texts (a text already gzip'd, as a results
    folder holds it, is copied as it is); return the bytes written.

    Every file is read through :func:`~ablate.utils.io.read_inside`, so a link out of the sweep folder is refused.
    """
    run_dir = source / name
    summary_bytes = read_inside(run_dir / SUMMARY_FILE, source)
    try:
        summary = loads_json(summary_bytes)
    except ValueError:
        summary = {}
    summary = summary if isinstance(summary, dict) else {}
    (out / name).mkdir(parents=True)
    summary_bytes = _copy_plugins(summary, out) or summary_bytes
    (out / name / SUMMARY_FILE).write_bytes(summary_bytes)
    size = len(summary_bytes)
    # the test splits (those with a test_<split>/bleu, else every saved one but validation), then the validation
    # split whose hypotheses it saved (those of its best validation), if any
    saved = {p.name.removesuffix(".gz").removesuffix(".txt") for p in (run_dir / "hyps").glob("*.txt*")}
    tests = sorted(s for k in summary if (s := TEST_BLEU.split_of(k)) is not None) or sorted(
        saved - set(VALIDATION_SPLITS)
    )
    for split in tests + sorted(saved & set(VALIDATION_SPLITS) - set(tests)):
        for kind in TEXT_KINDS:
            src = run_dir / kind / f"{split}.txt"
            if src.exists():
                # mtime=0: the same texts give the same bytes, so a re-export changes nothing in git
                data = gzip.compress(read_inside(src, source), compresslevel=9, mtime=0)
            elif src.with_name(f"{split}.txt.gz").exists():  # a results folder's, exported again: as it is
                data = read_inside(src.with_name(f"{split}.txt.gz"), source)
            else:
                continue
            dst = out / name / kind / f"{split}.txt.gz"
            dst.parent.mkdir(exist_ok=True)
            dst.write_bytes(data)
            size += len(data)
    return size


def _copy_plugins(summary: dict[str, Any], out: Path) -> Optional[bytes]:
    """Copy the plugin files ``summary``'s config names into ``out/plugins/``, each only while it holds the code
    recorded (its sha256: a planted summary cannot name another file to publish); the summary, pointing to the
    copies, as bytes (None when it names no plugin file that still exists as recorded)."""
    config = summary.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("plugins"), list):
        return None
    changed, kept = False, []
    for record in config["plugins"]:
        path = Path(str(record.get("path"))) if isinstance(record, dict) and record.get("kind") == "file" else None
        code = path.read_bytes() if path is not None and path.is_file() else None
        if path is None or code is None or hashlib.sha256(code).hexdigest() != record.get("sha256"):
            kept.append(record)
            continue
        copy = out / PLUGINS / f"{path.stem}-{str(record['sha256'])[:12]}.py"
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(code)
        kept.append({**record, "path": f"../{PLUGINS}/{copy.name}"})
        changed = True
    if not changed:
        return None
    return (dumps({**summary, "config": {**config, "plugins": kept}}, indent=2, sort_keys=True) + "\n").encode()


def provenance(
    source: Path,
    summaries: list[dict[str, Any]],
    planned: int,
    command: Optional[str],
    commit: Optional[str],
    first: dict[str, Any],
) -> dict[str, Any]:
    """The manifest's command, times, machines and commit, from ``sweep.json`` and the trials' summaries
    (``planned``: the trials found or planned, those without a summary yet included). The commit is the ones
    the trials recorded, else ``commit``, else this checkout's. Where ``source`` is a results folder exported
    before (``first``, its manifest), the command, sweep wall time and commit that export recorded, which its
    copied files no longer show."""
    state = _read_json(source / SWEEP_FILE)
    rebuilt = None
    if state.get("source"):
        rebuilt = shlex.join(
            ["ablate", "sweep", "run", str(state["source"]), "--out", str(source), *(state.get("overrides") or [])]
        )
    ends = [(source / name / SUMMARY_FILE).stat().st_mtime for name in (s.get("_name") for s in summaries) if name]
    started = state.get("created_at")
    started = started if _is_number(started) else None  # "yesterday": not recorded
    wall = round(max(ends) - float(started), 1) if started and ends else None
    if first:
        rebuilt = first.get("command") if isinstance(first.get("command"), str) else rebuilt
        wall = first.get("wall_time_s") if _is_number(first.get("wall_time_s")) else None
    commits = list(dict.fromkeys(c for s in summaries for c in s.get("commits") or [] if isinstance(c, str)))
    if commits:
        facts = {"commit": ", ".join(commits), "commit_source": "trials"}
    elif commit:
        facts = {"commit": commit, "commit_source": "given"}
    elif isinstance(first.get("commit"), str):
        facts = {"commit": first["commit"], "commit_source": first.get("commit_source", "given")}
    else:
        facts = {"commit": git_commit(), "commit_source": "export"}
    machines = {json.dumps(s["machine"], sort_keys=True) for s in summaries if isinstance(s.get("machine"), dict)}
    total = lambda key: round(sum(float(s[key]) for s in summaries if _is_number(s.get(key))), 1)  # noqa: E731
    return {
        "command": command or rebuilt,
        "command_recorded": command is not None or bool(first.get("command_recorded")),
        "trials": max(len(summaries), planned),
        RunStatus.FINISHED: sum(s.get("status") == RunStatus.FINISHED for s in summaries),
        "wall_time_s": wall,
        "trial_wall_time_s": total("wall_time_s"),
        "trial_cpu_time_s": total("cpu_time_s") if any("cpu_time_s" in s for s in summaries) else None,
        "trials_with_cpu_time": sum("cpu_time_s" in s for s in summaries),
        "machines": [json.loads(m) for m in sorted(machines)],
        **facts,
    }


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def export_sweep(
    source: Path,
    out: Path,
    command: Optional[str] = None,
    reference: Optional[str] = None,
    plots: bool = True,
    alpha: float = DEFAULT_ALPHA,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    force: bool = False,
    commit: Optional[str] = None,
    sigma_from: Optional[str] = None,
) -> dict[str, Any]:
    """Write ``out`` from the sweep folder ``source``, whole or not at all; return the manifest.

    Args:
        command: the exact command that ran the sweep; default: rebuilt from ``sweep.json``.
        reference: a shipped reference (``ablate table --reference``) to print beside the table.
        commit: the commit the trials ran, for runs too old to record it (what the trials recorded wins).
        sigma_from: another source's seeds of the base configuration, pooled into the seed σ of the table and
            the plots (``ablate table --sigma-from``); recorded, not copied: the README says how to rebuild.

    Raises:
        ReportError: ``source`` holds no trials; ``sigma_from`` is refused as ``ablate table`` refuses it.
        OutputError: ``out`` exists (without ``force``), is a file, is ``source``, lies inside it or
            contains it; or a file of ``source`` is a link that leads out of it.
    """
    from ablate.report.figures import plot_all
    from ablate.report.papers import get as get_reference, render as render_reference, side_by_side

    source, out = Path(source), Path(out)
    paper = get_reference(reference) if reference else None
    check_sigma_from(sigma_from, test)
    trials = collect_folder(source)  # a missing or empty folder fails here, before anything is written
    # all of it, renamed into place at the end, or nothing; never over source or sigma_from's folder
    with output_folder(out, [source, *local_folders(sigma_from)], force) as tmp:
        summaries, size = [], 0
        for trial in trials:
            if (source / trial.name / SUMMARY_FILE).is_file():  # else planned, no record yet: the table lists it
                size += _copy_trial(source, trial.name, tmp)
                summaries.append({**_read_json(tmp / trial.name / SUMMARY_FILE), "_name": trial.name})
        if (source / SWEEP_FILE).exists():
            (tmp / SWEEP_FILE).write_bytes(read_inside(source / SWEEP_FILE, source))
        planned = sum(t.name != SWEEP_FILE for t in trials)  # every trial found or planned, pending ones too

        # everything below is read back from the export, so it shows what the export alone rebuilds
        sweep = load(str(tmp))
        # the comparisons of the table and the plots; --sigma-from checked against the source, not the copy
        _, comps = table_comparisons(str(source), test, samples, sigma_from=sigma_from, sweep=sweep, alpha=alpha)
        table = build_table(sweep, comps, alpha, test, samples)
        sbs = side_by_side(sweep, table, paper) if paper is not None else None
        for fmt, name in (("md", "table.md"), ("latex", "table.tex")):  # the paper beside, as --reference prints it
            atomic_write_text(
                tmp / name, render(table, fmt) + ("" if sbs is None else "\n" + render_reference(sbs, fmt))
            )
        figures = [p.name for p in plot_all(sweep, tmp / "plots", comps, alpha)] if plots else []

        # a results folder that `ablate export` wrote, exported again: what its manifest recorded stands
        first = _read_json(source / "manifest.json")
        first = first if isinstance(first.get("export_command"), str) else {}
        with_reference = [f"--reference {reference}"] if reference else []
        # what changes the table, where not at `ablate table`'s defaults: in both commands, so the recorded table
        # command prints the table.md shipped
        tested = [] if alpha == DEFAULT_ALPHA else [f"--alpha {shlex.quote(repr(float(alpha)))}"]
        tested += [] if test == DEFAULT_TEST else [f"--test {shlex.quote(test)}"]
        tested += [f"--samples {int(samples)}"] if samples else []
        tested += [f"--sigma-from {shlex.quote(sigma_from)}"] if sigma_from is not None else []
        manifest = {
            "sweep": sweep.name or out.name,
            **provenance(source, summaries, planned, command, commit, first),
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "export_command": " ".join(
                ["ablate export", shlex.quote(str(source)), shlex.quote(str(out)), *with_reference, *tested]
                + ([f"--command {shlex.quote(command)}"] if command is not None else [])
                + ([] if plots else ["--no-plots"])
                + ([f"--commit {commit}"] if commit else [])
            ),
            "table_command": " ".join(["ablate table", shlex.quote(str(out)), "--format md", *with_reference, *tested]),
            "sigma_from": sigma_from,
            "texts_bytes": size,
            "plots": figures,
            "environment": write_environment_lock(source, summaries, tmp, first.get("environment")),
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
    lent, rebuilds, lent_line = m.get("sigma_from"), "from these files alone", None
    if lent is not None:  # --sigma-from: another sweep's runs, recorded here but not copied
        rebuilds = f"from these files and `{lent}`'s runs"
        lent_line = (
            f"- Seed σ: pooled with the seeds of `{lent}`, the base configuration's runs of another sweep "
            "(`--sigma-from`; the footnote of `table.md` gives their number, σ and df). They are not copied here, and "
            "the path is as the export was given it: where it is at hand, the command below rebuilds `table.md`; "
            "without it, `ablate table` on this folder tests with the table's own seed σ, and its CIs and † marks can "
            "differ from `table.md`'s."
        )
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
            *filter(None, [readme_line(m.get("environment"))]),
            "- Wall time: "
            + (
                f"{_hours(m['wall_time_s'])}, from the sweep's start to its last trial's end (pauses included)"
                if m["wall_time_s"] is not None
                else "not recorded (no sweep.json)"
            ),
            f"- Trials: {m[RunStatus.FINISHED]} finished of {m['trials']}; {_hours(m['trial_wall_time_s'])} of trial wall time, "
            f"CPU time {cpu}",
            f"- Exported {m['exported_at']} with `{m['export_command']}`",
            *filter(None, [lent_line]),
            "",
            "The table is `table.md` (`table.tex` for LaTeX) and the figures are in `plots/`. Each trial folder holds its",
            "`summary.json` and the hypotheses, references and sources (`*.txt.gz`) of the test splits and of the",
            "validation split (the validation whose dev scores summary.json reports, so dev BLEU can be re-checked; it",
            f"is never tested); the table rebuilds {rebuilds}: `{m['table_command']}`.",
            "",
        ]
    )
