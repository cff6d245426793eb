"""The data stage: first run vs cached run, and its scale on a generated corpus.

Each preparation runs ``ablate.data.cache.prepare`` in a fresh process
(``python -m ablate.bench.data_stage``), against a private cache folder, three times:

1. **first**: empty cache -- load the text, train the BPE tokenizer, encode every split;
2. **encode**: ``max_len`` changed by one, so the tokenizer comes from the cache (its key has no
   ``max_len``) and only encoding runs: ``pairs / seconds`` is the encoding rate;
3. **cached**: the same config again -- nothing is built, the Arrow files are memory-mapped.

Seconds exclude the child's imports (reported apart); ``cpu_s`` is the child's CPU time over the same span.
The tokenizer's training is timed where it happens, inside the first run (``tokenizer_s``): it used to be
the first run's seconds minus the encode-only run's, a difference of wall-clock times of two processes,
which came out negative (-5.33 s) on a shared machine whenever the encode-only run was slowed more than
the tokenizer took. Peak memory is the child's peak RSS during
``prepare`` minus its RSS before (see :mod:`ablate.bench.memory` for the method). The scale test
writes a corpus of ``pairs`` training pairs (the benchmark corpus's training text repeated, each
repetition's words rotated and its first words marked, so sentences and word types differ) and
prepares it the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from ablate.bench.memory import peak_mb, reset_peak, rss_mb

GIB = 1024.0
"""MiB in a GiB."""


def _child(argv: list[str]) -> None:
    start = time.perf_counter()
    parser = argparse.ArgumentParser(prog="python -m ablate.bench.data_stage")
    parser.add_argument("--source", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--max-len", type=int, required=True)
    parser.add_argument("--builtin-pairs", type=int, required=True)
    args = parser.parse_args(argv)

    from ablate.config import DataConfig
    from ablate.data.cache import prepare
    from ablate.data.tokenizer import SubwordTokenizer

    learn, learned = SubwordTokenizer.train, {"tokenizer_s": 0.0, "tokenizer_cpu_s": 0.0}

    def timed_learn(*args, **kwargs):  # this child process only: time the tokenizer where it is trained
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return learn(*args, **kwargs)
        finally:
            learned["tokenizer_s"] += time.perf_counter() - wall
            learned["tokenizer_cpu_s"] += time.process_time() - cpu

    SubwordTokenizer.train = timed_learn  # type: ignore[method-assign]
    imported = time.perf_counter()
    cpu = time.process_time()
    before = rss_mb()
    exact = reset_peak()
    cfg = DataConfig(
        source=args.source,
        vocab_size=args.vocab_size,
        max_len=args.max_len,
        builtin_pairs=args.builtin_pairs,
        cache_dir=args.cache,
    )
    prepared = prepare(cfg)
    done = time.perf_counter()
    cpu = time.process_time() - cpu
    peak = peak_mb()
    stats = prepared.stats
    print(
        json.dumps(
            {
                "seconds": done - imported,
                "cpu_s": cpu,
                **learned,
                "import_s": imported - start,
                "cached": stats["cached"],
                "tokenizer_cached": stats["tokenizer_cached"],
                "pairs": stats["pairs"],
                "rss_before_mb": before,
                "peak_mb": peak,
                "delta_mb": peak - before,
                "exact": exact,
            }
        )
    )


def prepare_in_subprocess(source: str, cache: Path, vocab_size: int, max_len: int, builtin_pairs: int) -> dict:
    """One ``prepare`` in a fresh process; its JSON line (seconds, cached, peak memory, ...)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    cmd = [
        sys.executable,
        "-m",
        "ablate.bench.data_stage",
        "--source",
        source,
        "--cache",
        str(cache),
        "--vocab-size",
        str(vocab_size),
        "--max-len",
        str(max_len),
        "--builtin-pairs",
        str(builtin_pairs),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"data preparation of {source} failed: {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def three_runs(
    source: str, cache: Path, vocab_size: int, builtin_pairs: int, max_len: int = 128, echo=lambda s: None
) -> dict[str, Any]:
    """First, encode-only and cached preparations of ``source`` in the empty cache ``cache``.

    Returns:
        The three child reports plus ``train_pairs``, ``tokenizer_s`` (timed in the first run),
        ``encode_pairs_per_s`` (all pairs / encode seconds), ``cached_speedup`` (first / cached) and
        ``peak_delta_mb`` (the largest of the three).
    """
    runs = {}
    for name, length in (("first", max_len), ("encode", max_len + 1), ("cached", max_len + 1)):
        echo(f"data stage: {name} run of {source}")
        runs[name] = prepare_in_subprocess(source, cache, vocab_size, length, builtin_pairs)
    pairs = sum(runs["encode"]["pairs"].values())
    return {
        **runs,
        "train_pairs": runs["encode"]["pairs"]["train"],
        "pairs": pairs,
        "tokenizer_s": runs["first"]["tokenizer_s"],
        "encode_pairs_per_s": pairs / runs["encode"]["seconds"],
        "cached_speedup": runs["first"]["seconds"] / runs["cached"]["seconds"],
        "peak_delta_mb": max(r["delta_mb"] for r in runs.values()),
    }


def _perturbed(texts: list[str], repetition: int) -> Iterator[str]:
    """Repetition ``r`` of ``texts``: words rotated by ``r`` and the first word marked with ``r``."""
    for text in texts:
        words = text.split()
        if repetition and words:
            k = repetition % len(words)
            words = words[k:] + words[:k]
            words[0] = f"{words[0]}{repetition}"
        yield " ".join(words)


def write_corpus(
    folder: Path, splits: dict[str, tuple[list[str], list[str]]], pairs: int, langs: tuple[str, str] = ("en", "de")
) -> None:
    """Write a ``{split}.{lang}`` folder whose train split has ``pairs`` pairs grown from ``splits["train"]``.

    Args:
        folder: Output folder (created).
        splits: split name -> (source texts, target texts); every split but train is copied as is.
        pairs: Training pairs to write.
        langs: Source and target language codes of the file names.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for name, (src, tgt) in splits.items():
        with open(folder / f"{name}.{langs[0]}", "w") as fs, open(folder / f"{name}.{langs[1]}", "w") as ft:
            if name != "train":
                fs.write("\n".join(src) + "\n")
                ft.write("\n".join(tgt) + "\n")
                continue
            left, r = pairs, 0
            while left > 0:
                n = min(left, len(src))
                fs.write("\n".join(_perturbed(src[:n], r)) + "\n")
                ft.write("\n".join(_perturbed(tgt[:n], r)) + "\n")
                left, r = left - n, r + 1


def bench_data(
    source: str,
    vocab_size: int,
    builtin_pairs: int,
    scale: int,
    base=None,
    langs: tuple[str, str] = ("en", "de"),
    echo=lambda s: None,
) -> dict[str, Any]:
    """Three preparations of ``source`` and, when ``scale`` > 0, of a generated ``scale``-pair corpus.

    Args:
        source: ``DataConfig.source`` of the corpus.
        vocab_size, builtin_pairs: As in ``DataConfig``.
        scale: Training pairs of the generated corpus (0 skips it).
        base: The prepared ``source`` (its raw text seeds the generated corpus); needed when ``scale`` > 0.
        langs: Source/target languages (file names of the generated corpus).
    """
    out: dict[str, Any] = {"source": source}
    with tempfile.TemporaryDirectory(prefix="ablate-bench-data-") as tmp:
        out["corpus"] = three_runs(source, Path(tmp) / "cache", vocab_size, builtin_pairs, echo=echo)
        if scale > 0:
            folder = Path(tmp) / "generated"
            echo(f"data stage: writing a {scale:,}-pair corpus")
            texts = {
                name: (ds.data.column("src").to_pylist(), ds.data.column("tgt").to_pylist())
                for name, ds in base.splits.items()
            }
            write_corpus(folder, texts, scale, langs)
            scaled = three_runs(str(folder), Path(tmp) / "cache-scale", vocab_size, builtin_pairs, echo=echo)
            scaled["target_peak_mb"] = GIB
            scaled["peak_under_1gib"] = scaled["peak_delta_mb"] < GIB
            out["scale"] = scaled
    return out


if __name__ == "__main__":
    _child(sys.argv[1:])
