"""``ablate bench``: throughput, memory and start-up measurements of every model variant.

This package holds what a run is (:class:`BenchOptions`, the sizes and budgets; :func:`quick`); its
modules: ``runner`` (the command and the run), ``timing`` (interleaved rounds, clocks, matmul peak,
FLOPs), ``speed`` (inputs, the ``torch.nn.Transformer`` reference, training and decoding),
``processes`` (memory, data stage and start-up in fresh processes) and ``report`` (ratios, targets,
tables, JSON). The GPU acceptance check (``scripts/gpu-check.sh``) is built from these parts but is
no command of the package: it lives in ``scripts/gpu_check/``.

Importing this package imports neither torch nor Lightning (the subprocess entry points rely on it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ablate.errors import AblateError

SECTIONS = ("training", "decoding", "memory", "data", "startup")
"""Every measurement, in the order the runner takes them."""

DEFAULT_DATA = "../shared/data/multi30k"
"""Real Multi30k text: a folder ``shared/data/multi30k`` beside the checkout, relative to the checkout
(where ``ablate bench`` is run from); ``--data`` names any other (or ``builtin``)."""


class BenchError(AblateError):
    """A benchmark option that cannot work; the message says which and what to do."""


@dataclass(frozen=True)
class BenchOptions:
    """Sizes, inputs and budgets of one ``ablate bench`` run.

    Attributes:
        data: ``DataConfig.source`` of the text (a folder, ``builtin``, ``hf:...``).
        vocab_size: BPE vocabulary size.
        builtin_pairs: training pairs of the built-in task (when ``data`` is ``builtin``).
        d_model, layers, heads, d_ff: model size (``layers`` encoder and ``layers`` decoder layers).
        max_tokens: padded tokens per training batch.
        batches: number of fixed training batches; one timed repetition runs them all.
        reps: timed repetitions (the median is reported); ``warmup`` untimed ones come first.
        threads: torch intra-op threads; 0 keeps torch's default.
        variants: training variants to run (empty: all, see :func:`ablate.bench.speed.variants`).
        plugins: plugin modules or ``.py`` files to import first (their scores and positions are variants).
        decode_sentences: source sentences decoded per repetition.
        decode_len: output length every hypothesis is held to (EOS is suppressed until then).
        beam: beam size of the beam-search measurement.
        mem_length, mem_batch: sequence length and batch of the additive-attention memory test.
        mem_chunk_mb: the chunked side's ``model.attention.params.chunk_mb`` (the config default).
        mem_train: also measure forward + backward (not only the forward pass).
        data_scale: pairs of the generated corpus for the data-stage scale test (0: skip it).
        startup_wandb: also time start-up with W&B in offline mode (not just disabled).
        flops: count model FLOPs (for GFLOP/s, MFU and the SDPA backend); the count doubles as
            the first warm-up round.
        sections: measurements to take (subset of :data:`SECTIONS`).
        seed: seed of the batch choice and of every model's initialisation.
        cache_dir: tokenizer/corpus cache of the training data ("" = the usual one).
        quick: the run is a smoke test (recorded in the JSON).
    """

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
    mem_train: bool = True
    data_scale: int = 0
    startup_wandb: bool = True
    flops: bool = True
    sections: tuple[str, ...] = SECTIONS
    seed: int = 1
    cache_dir: str = ""
    quick: bool = False

    def replace(self, **changes) -> BenchOptions:
        """A copy with ``changes`` applied and checked."""
        out = dataclasses.replace(self, **changes)
        out.check()
        return out

    def check(self) -> None:
        """Raise :class:`BenchError` for values no run can use."""
        unknown = [s for s in self.sections if s not in SECTIONS]
        if unknown:
            raise BenchError(f"unknown bench section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
        for name in (
            "vocab_size",
            "d_model",
            "layers",
            "heads",
            "d_ff",
            "max_tokens",
            "batches",
            "reps",
            "decode_sentences",
            "decode_len",
            "beam",
            "mem_length",
            "mem_batch",
            "mem_chunk_mb",
        ):
            if getattr(self, name) <= 0:
                raise BenchError(f"--{name.replace('_', '-')}={getattr(self, name)} must be positive")
        if self.warmup < 0 or self.threads < 0 or self.data_scale < 0:
            raise BenchError("--warmup, --threads and --data-scale must not be negative")


def quick(opts: BenchOptions) -> BenchOptions:
    """The ``--quick`` preset: few small batches and rounds, short sequences and small chunks, no FLOP
    count, no W&B start-up measurement."""
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
