"""``ablate bench``: throughput, memory and start-up measurements of every model variant.

Defaults (:class:`BenchOptions`) give the reference run, about ten minutes on a 2-core CPU; :func:`quick`
shrinks the budgets (not the model sizes) to a smoke test. Importing this package imports neither torch
nor Lightning (the subprocess entry points rely on it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ablate.errors import AblateError

SECTIONS = ("training", "decoding", "memory", "data", "startup")  # in the order the runner takes them
DEFAULT_DATA = "../shared/data/multi30k"  # real Multi30k text beside the checkout (where ``ablate bench`` runs)


class BenchError(AblateError):
    """A benchmark option that cannot work; the message says which and what to do."""


POSITIVE = "vocab_size d_model layers heads d_ff max_tokens batches reps decode_sentences decode_len beam".split()
POSITIVE += ["mem_length", "mem_batch", "mem_chunk_mb"]


@dataclass(frozen=True)
class BenchOptions:
    """Sizes, inputs and budgets of one ``ablate bench`` run (each an option of the command); ``variants``
    empty runs all; ``flops``: the count doubles as the first warm-up round."""

    data: str = DEFAULT_DATA
    vocab_size: int = 8000
    builtin_pairs: int = 6000
    d_model: int = 256
    layers: int = 3
    heads: int = 4
    d_ff: int = 1024
    max_tokens: int = 3000
    batches: int = 1
    reps: int = 5
    warmup: int = 1
    threads: int = 0
    variants: tuple[str, ...] = ()
    plugins: tuple[str, ...] = ()
    decode_sentences: int = 8
    decode_len: int = 50
    beam: int = 5
    mem_length: int = 512
    mem_batch: int = 2
    mem_chunk_mb: float = 64.0
    data_scale: int = 0
    startup_wandb: bool = True
    flops: bool = True
    sections: tuple[str, ...] = SECTIONS
    seed: int = 1
    cache_dir: str = ""
    quick: bool = False

    def replace(self, **changes) -> BenchOptions:
        out = dataclasses.replace(self, **changes)
        out.check()
        return out

    def check(self) -> None:
        """Raise :class:`BenchError` for values no run can use."""
        unknown = [s for s in self.sections if s not in SECTIONS]
        if unknown:
            raise BenchError(f"unknown bench section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
        for name in POSITIVE:
            if getattr(self, name) <= 0:
                raise BenchError(f"--{name.replace('_', '-')}={getattr(self, name)} must be positive")
        if self.warmup < 0 or self.threads < 0 or self.data_scale < 0:
            raise BenchError("--warmup, --threads and --data-scale must not be negative")


def quick(opts: BenchOptions) -> BenchOptions:
    """The ``--quick`` preset: few small batches and rounds, short sequences, no FLOPs or W&B start-up."""
    return opts.replace(
        max_tokens=min(opts.max_tokens, 600),
        batches=min(opts.batches, 2),
        reps=min(opts.reps, 2),
        warmup=min(opts.warmup, 1),
        decode_sentences=min(opts.decode_sentences, 4),
        decode_len=min(opts.decode_len, 12),
        mem_length=min(opts.mem_length, 128),
        mem_batch=min(opts.mem_batch, 2),
        mem_chunk_mb=min(opts.mem_chunk_mb, 0.5),
        data_scale=min(opts.data_scale, 20000),
        startup_wandb=False,
        flops=False,
        quick=True,
    )
