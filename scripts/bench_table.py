"""Time ``ablate table`` on a generated sweep folder of many trials (issue 31 item 5).

Builds ``OUT`` from a shipped sweep folder (default ``results/mission-cpu``): the base's seeds, then
variants made by relabelling the shipped trials (each variant one shipped family with its own
``train.warmup``, so every variant is a distinct configuration with real saved texts), until there
are ``--trials`` trial folders. Each trial's hypotheses get a trailing space on the lines that spell its
index in binary, so no two trials share a text (nothing is scored once for several trials) while every
BLEU stays the one its summary records. Then runs ``ablate table OUT --format md`` twice in fresh processes
and prints, for each, CPU seconds (user + system of the child) and peak resident memory::

    python scripts/bench_table.py /tmp/table-1000 --trials 1000

The renders use a fresh, empty statistics cache (``ABLATE_CACHE``, a temporary folder): the first
render scores every trial's hypotheses and fills it, the second reads it back. The two renders must
print the same table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_folder(source: Path, out: Path, trials: int) -> None:
    """``out`` with ``trials`` trial folders relabelled from ``source``'s (base first, 3 seeds each)."""
    families: dict[str, list[Path]] = {}
    for run in sorted(p for p in source.iterdir() if (p / "summary.json").exists()):
        families.setdefault(run.name.rsplit("-seed=", 1)[0], []).append(run)
    names = ["base"] + sorted(f for f in families if f != "base")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    made, variant = 0, 0
    while made < trials:
        family = names[variant % len(names)]
        label = "base" if variant == 0 else f"v{variant:04d}-{family}"
        for run in families[family][: trials - made]:
            seed = run.name.rsplit("-seed=", 1)[1]
            target = out / f"{label}-seed={seed}"
            shutil.copytree(run, target)
            summary = json.loads((target / "summary.json").read_text())
            summary["config"]["train"]["warmup"] = 60 + variant  # a distinct configuration per variant
            summary["config"]["tracking"]["variant"] = label
            summary["variant"] = label
            (target / "summary.json").write_text(json.dumps(summary))
            _make_distinct(target / "hyps", made)
            made += 1
        variant += 1


def _make_distinct(hyps: Path, index: int) -> None:
    """A trailing space on line ``b`` of each saved hypothesis file for every bit ``b`` set in ``index``."""
    for path in hyps.glob("*.txt.gz"):
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")
        for bit in range(index.bit_length()):
            if index >> bit & 1:
                lines[bit] += " "
        path.write_bytes(gzip.compress("\n".join(lines).encode("utf-8")))


def time_table(folder: Path, cache: Path) -> tuple[float, float, float, bytes]:
    """CPU seconds, wall seconds, peak RSS (MB) and output of one ``ablate table FOLDER --format md`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "ablate", "table", str(folder), "--format", "md"]
    env = {**os.environ, "ABLATE_CACHE": str(cache)}
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, after.ru_maxrss / 1024, out  # Linux: KiB; the largest child so far


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to generate (replaced)")
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--source", type=Path, default=Path("results/mission-cpu"))
    args = parser.parse_args()
    make_folder(args.source, args.out, args.trials)
    outputs = []
    with tempfile.TemporaryDirectory() as cache:
        for label in ("first render (cold cache)", "second render (warm cache)"):
            cpu, wall, rss, out = time_table(args.out, Path(cache))
            outputs.append(out)
            print(f"{label}: {cpu:.1f} CPU-s, {wall:.1f} s wall, peak {rss:.0f} MB (largest render so far)")
    if outputs[0] != outputs[1]:
        sys.exit("the two renders printed different tables")


if __name__ == "__main__":
    main()
