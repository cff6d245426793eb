"""The GPU check: one run on one GPU, one JSON (``scripts/gpu-check.sh`` installs, then calls this).

``python -m scripts.gpu_check.check [--out FILE] [--stages ...] [--tiny] ...`` runs, each within its time
budget (the stages together within ``--budget-s``; a stage that overruns is stopped and keeps what it
measured):

1. ``tests``: ``pytest -m gpu tests``;
2. ``training``: the paper's base model on ~25k-token batches, ours vs ``torch.nn.Transformer`` in bf16
   and fp32, additive attention, the SDPA backend of every score, model FLOPs and MFU (one process);
3. ``shapes``: what a batch shape costs the first time, with cuDNN's attention first (PyTorch's order on
   Hopper) and off, and each order's warm tokens/s;
4. ``scaling``: tokens/s and MFU at ``max_tokens`` and twice it (is the step host-bound?);
5. ``packed``: 1, 2, 4, 8 small trials at once through ``ablate sweep run --parallel K``;
6. ``decoding``: greedy and beam-5 sentences/s, with and without the key/value cache;
7. ``compile``: ``torch.compile`` vs eager, with the compile time;
8. ``quality`` (only when asked, outside the budget): the Multi30k base-size run of ``--quality-config``.

The JSON (written after every stage, printed once at the end) holds ``meta``, ``stages`` (status and
seconds of each), one key per stage, ``summary`` (the headline figures) and ``targets_met``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ablate.bench import BenchError
from ablate.record import TEST_BLEU
from ablate.utils.io import atomic_write_text
from scripts.gpu_check.options import DEFAULT_STAGES, STAGES, GpuCheckOptions, tiny
from scripts.gpu_check.runs import ROOT, child_env, run_child, run_gpu_tests, run_packed, run_quality

TARGETS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "bf16_vs_torch_bf16": (">= 1.0", lambda r: r >= 1.0),
    "mfu_bf16": (">= 0.30", lambda r: r >= 0.30),
    "packed8_vs_1": (">= 3.0", lambda r: r >= 3.0),
    "additive_vs_dot": (">= 0.33", lambda r: r >= 0.33),
    "multi30k_test_bleu": (">= 36 (PAPERS.md: 36-41)", lambda r: r >= 36.0),
}
"""Summary figure -> (what issue 16 asks, check); a figure not measured gets ``None``."""

IN_PROCESS = ("training", "shapes", "scaling", "decoding", "compile")
"""Stages run as ``python -m scripts.gpu_check.stages STAGE`` children."""


def _get(tree: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """The headline figures of a (possibly partial) check; ``None`` where a stage did not measure them."""
    rows = _get(results, "training", "rows") or {}
    ratios = _get(results, "training", "ratios") or {}
    beam = _get(results, "decoding", "beam")
    tests = results.get("tests") or {}
    packed_runs = _get(results, "packed", "runs") or {}
    out: dict[str, Any] = {
        "gpu_tests": (
            {k: tests.get(k) for k in ("passed", "failed", "errors", "skipped")}
            if tests.get("total") is not None
            else None
        ),
        "tokens_per_s": {k: r.get("tokens_per_s") for k, r in rows.items()} or None,
        "bf16_vs_torch_bf16": ratios.get("bf16_vs_torch_bf16"),
        "fp32_vs_torch_fp32": ratios.get("fp32_vs_torch_fp32"),
        "bf16_vs_fp32": ratios.get("bf16_vs_fp32"),
        "additive_vs_dot": ratios.get("additive_vs_dot"),
        "non_padding_rows_vs_all_rows": ratios.get("non_padding_rows_vs_all_rows"),
        "adamw": _get(results, "training", "adamw"),
        "sdpa_unpadded": _get(results, "training", "sdpa_unpadded"),
        "mfu_bf16": _get(rows, "dot-scaled-bf16", "mfu"),
        "mfu_fp32": _get(rows, "dot-scaled-fp32", "mfu"),
        "torch_mfu_bf16": _get(rows, "torch-bf16", "mfu"),
        "mfu_peak": _get(rows, "dot-scaled-bf16", "mfu_peak"),
        "sdpa": _get(results, "training", "sdpa"),
        "new_shape_s": {
            order: {part: _get(row, part, "per_new_shape_s") for part in ("train", "greedy")}
            for order, row in (_get(results, "shapes", "orders") or {}).items()
        }
        or None,
        "beam_first_time_cost_s": {
            order: _get(row, "beam", "first_time_cost_s")
            for order, row in (_get(results, "shapes", "orders") or {}).items()
        }
        or None,
        "no_cudnn_vs_default_warm": _get(results, "shapes", "no_cudnn_vs_default_warm"),
        "mfu_bf16_2x_tokens": _get(results, "scaling", "scales", "x2", "mfu"),
        "x2_vs_x1_tokens_per_s": _get(results, "scaling", "x2_vs_x1_tokens_per_s"),
        "beam_sentences_per_s": _get(results, "decoding", "modes", f"beam{beam}-cache", "sentences_per_s"),
        "greedy_sentences_per_s": _get(results, "decoding", "modes", "greedy-cache", "sentences_per_s"),
        "packed_aggregate_tokens_per_s": {k: r.get("aggregate_tokens_per_s") for k, r in packed_runs.items()} or None,
        **(_get(results, "packed", "ratios") or {}),
        "compile_s": _get(results, "compile", "compile_s"),
        "compiled_vs_eager": _get(results, "compile", "compiled_vs_eager"),
        "multi30k_test_bleu": _get(results, "quality", TEST_BLEU.key),
        "multi30k_step": _get(results, "quality", "step"),
    }
    out.setdefault("packed8_vs_1", None)
    return out


def targets_met(summary: dict[str, Any]) -> dict[str, Optional[bool]]:
    from ablate.bench.report import targets_met as verdicts

    return verdicts(summary, TARGETS)


def meta(opts: GpuCheckOptions) -> dict[str, Any]:
    """Where and what ran: device, versions, commit, options."""
    import torch

    from ablate.bench import timing

    dev = timing.device()
    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": timing.describe(dev, torch.get_num_threads()),
        "cuda": torch.version.cuda,
        "gpus": torch.cuda.device_count(),
        "python": platform.python_version(),
        "options": opts.to_json(),
    }
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(
            gpu_memory_gib=props.total_memory / 2**30,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
        )
    for key, cmd in (
        ("driver", ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        ("commit", ["git", "-C", str(ROOT), "rev-parse", "HEAD"]),
    ):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
            info[key] = done.stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            info[key] = None
    return info


def write(results: dict[str, Any], path: Path) -> None:
    """The results with a fresh ``summary`` and ``targets_met`` (last, so the end of a printout shows them)."""
    from ablate.utils.io import finite

    results.pop("summary", None)
    results.pop("targets_met", None)
    results["summary"] = summarise(results)
    results["targets_met"] = targets_met(results["summary"])
    atomic_write_text(path, json.dumps(finite(results), indent=1) + "\n")


def _in_process(stage: str, opts: GpuCheckOptions, timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix=f"ablate-gpu-{stage}-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "scripts.gpu_check.stages", stage, json.dumps(opts.to_json()), str(result)]
        run = run_child(cmd, timeout, child_env(opts.cache_dir))
        data = json.loads(result.read_text()) if result.exists() else {}
    return data, run


def _status(run: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    if run.get("timed_out"):
        return {"status": "timed_out", "partial": bool(data)}
    if run.get("rc"):
        return {"status": "failed", "error": (run.get("tail") or ["no output"])[-1]}
    return {"status": "ok"}


def run_check(opts: GpuCheckOptions, out: Path, echo: Callable[[str], None]) -> dict[str, Any]:
    """Every selected stage within its budget; the JSON is rewritten after each. Returns the results."""
    opts.check()
    results: dict[str, Any] = {"meta": meta(opts), "stages": {}}
    write(results, out)
    deadline = time.time() + opts.budget_s
    with tempfile.TemporaryDirectory(prefix="ablate-gpu-cache-") as cache:
        if not opts.cache_dir:
            opts = opts.replace(cache_dir=cache)
        for stage in (s for s in STAGES if s in opts.stages):
            if stage == "quality":  # minutes of training: outside the budget of the others
                timeout = left = opts.cap(stage) + opts.quality_minutes * 60
            else:
                left = deadline - time.time()
                timeout = min(opts.cap(stage), left)
            if timeout < 5:
                results["stages"][stage] = {"status": "skipped", "reason": f"out of time ({left:.0f} s left)"}
                write(results, out)
                continue
            echo(f"stage {stage} (at most {timeout:.0f} s)")
            start = time.time()
            try:
                if stage in IN_PROCESS:
                    data, run = _in_process(stage, opts, timeout)
                    status = _status(run, data)
                elif stage == "tests":
                    data = run_gpu_tests(opts, timeout, echo)
                    status = _status(data, data)
                    if data.get("total") == 0:
                        status = {"status": "failed", "error": "no GPU test ran (pytest -m gpu collected nothing)"}
                elif stage == "packed":

                    def save(partial: dict[str, Any]) -> None:
                        results["packed"] = partial
                        write(results, out)

                    data = run_packed(opts, start + timeout, save, echo)
                    runs = data["runs"].values()
                    bad = [r for r in runs if r.get("rc") or r.get("timed_out") or "skipped" in r]
                    status = {"status": "ok"} if not bad else {"status": "partial", "runs_not_ok": len(bad)}
                else:
                    data = run_quality(opts, timeout, echo)
                    status = _status(data, data)
            except Exception as err:  # noqa: BLE001 - one stage's bug must not lose the others' results
                data, status = {}, {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            results[stage] = data
            results["stages"][stage] = {**status, "seconds": round(time.time() - start, 1), "budget_s": round(timeout)}
            write(results, out)
            echo(f"stage {stage}: {results['stages'][stage]['status']} in {time.time() - start:.0f} s")
    return results


def parse_args(argv: list[str]) -> tuple[GpuCheckOptions, Path]:
    base = GpuCheckOptions()
    p = argparse.ArgumentParser(prog="python -m scripts.gpu_check.check", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="JSON file (default results/gpu/<date>.json, <date>-tiny.json with --tiny)")
    p.add_argument("--stages", default=",".join(DEFAULT_STAGES), help=f"comma-separated subset of {', '.join(STAGES)}")
    p.add_argument("--tiny", action="store_true", help="CPU smoke preset: tiny model, built-in data, seconds")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile stage")
    carried = ROOT / ".gpu-data" / "multi30k"  # where scripts/gpu-prepare.sh puts the copy that travels
    data = base.data if Path(base.data).is_dir() or not carried.is_dir() else str(carried)
    p.add_argument(
        "--data",
        default=data,
        help="data.source of every stage (default ../shared/data/multi30k, else .gpu-data/multi30k)",
    )
    p.add_argument("--budget-s", type=float, default=base.budget_s, help="seconds for every stage but quality")
    p.add_argument("--max-tokens", type=int, default=base.max_tokens, help="padded tokens per side of a batch")
    p.add_argument("--reps", type=int, default=base.reps)
    p.add_argument("--packed", default=",".join(map(str, base.packed)), help="trials at once, e.g. 1,2,4,8")
    p.add_argument("--packed-seconds", type=float, default=base.packed_seconds)
    p.add_argument("--quality-minutes", type=float, default=base.quality_minutes)
    p.add_argument("--quality-config", default=base.quality_config)
    p.add_argument("--cache-dir", default="", help="tokenizer/corpus cache (default: a fresh temporary one)")
    p.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="STAGE=SECONDS",
        help="replace a stage's time cap, e.g. --cap compile=300 (repeatable; the budget still bounds all but quality)",
    )
    a = p.parse_args(argv)
    caps = []
    for given in a.cap:
        stage, _, seconds = given.partition("=")
        try:
            caps.append((stage.strip(), float(seconds)))
        except ValueError:
            raise BenchError(f"--cap {given!r}: give STAGE=SECONDS, e.g. compile=300") from None
    try:
        packed = tuple(int(k) for k in a.packed.split(",") if k.strip())
    except ValueError:
        raise BenchError(f"--packed {a.packed!r}: give trial counts such as 1,2,4,8") from None
    stages = tuple(s.strip() for s in a.stages.split(",") if s.strip())
    if a.no_compile:
        stages = tuple(s for s in stages if s != "compile")
    opts = base.replace(
        stages=stages,
        data=a.data,
        budget_s=a.budget_s,
        max_tokens=a.max_tokens,
        reps=a.reps,
        packed=packed,
        packed_seconds=a.packed_seconds,
        quality_minutes=a.quality_minutes,
        quality_config=a.quality_config,
        cache_dir=a.cache_dir,
        caps=tuple(caps),
    )
    if a.tiny:
        opts = tiny(opts)
    day = datetime.date.today().isoformat()
    out = a.out or ROOT / "results" / "gpu" / (f"{day}-tiny.json" if a.tiny else f"{day}.json")
    return opts, out


def main(argv: Optional[list[str]] = None) -> int:
    try:
        opts, out = parse_args(sys.argv[1:] if argv is None else argv)
        if (
            not opts.tiny
            and opts.data != "builtin"
            and not opts.data.startswith("hf:")
            and not Path(opts.data).is_dir()
        ):
            raise BenchError(
                f"--data {opts.data}: no such folder; copy Multi30k there (scripts/gpu-check.sh says how) "
                "or pass --data builtin"
            )
        results = run_check(opts, out, echo=lambda line: print(f"[gpu-check] {line}", file=sys.stderr, flush=True))
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(json.loads(out.read_text())), flush=True)  # the one JSON, as written
    print(f"[gpu-check] wrote {out}", file=sys.stderr)
    return 0 if all(s["status"] in ("ok", "skipped") for s in results["stages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
