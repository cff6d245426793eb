"""The knobs of one GPU check (``python -m scripts.gpu_check.check``, ``scripts/gpu-check.sh``).

Defaults are the issue's run on one GPU: the paper's base model (d_model 512, 6+6 layers, 8 heads,
d_ff 2048) on ~25k-token batches of Multi30k, small trials for packing, and stage budgets that
add up to less than 8 minutes. :func:`tiny` shrinks everything to a CPU smoke test of each code path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ablate.bench import DEFAULT_DATA, BenchError, BenchOptions

STAGES = ("tests", "training", "shapes", "scaling", "packed", "decoding", "compile", "quality")
"""Every stage, in the order they run (the targets' stages first after the GPU tests)."""

DEFAULT_STAGES = ("tests", "training", "shapes", "scaling", "packed", "decoding", "compile")
"""What runs without ``--stages``: ``quality`` (minutes of training) is asked for explicitly."""

STAGE_CAP_S = {
    "tests": 150.0,
    "training": 110.0,
    "shapes": 60.0,
    "scaling": 45.0,
    "packed": 170.0,
    "decoding": 45.0,
    "compile": 90.0,
    "quality": 120.0,
}
"""Most seconds a stage may take; ``quality`` gets its training minutes on top (start-up, validation and
the final beam-5 decoding are not training time)."""

SMALL_TRIAL = ("model.d_model=256", "model.layers=3", "model.heads=4", "model.d_ff=1024", "train.max_tokens=1536")
"""The small trial that packing runs several of at once: the size of the training-defaults table in
``docs/getting-started.md``."""


@dataclass(frozen=True)
class GpuCheckOptions:
    """Sizes, inputs and budgets of one GPU check.

    Attributes:
        data: ``DataConfig.source`` of every stage (Multi30k beside the checkout, or a carried copy).
        vocab_size, builtin_pairs: As in ``DataConfig``.
        d_model, layers, heads, d_ff: the measured model (``layers`` encoder + ``layers`` decoder layers).
        max_tokens: padded tokens per side of each training batch (the paper's ~25k).
        batches, reps, warmup: fixed batches per round, timed rounds (median), untimed rounds first.
        decode_sentences, decode_len, beam, decode_reps: the decoding stage (outputs held to ``decode_len``).
        shape_batches: batches of distinct shapes the ``shapes`` stage passes over (the first only warms up).
        packed: trials at once (``ablate sweep run --parallel K``) for each packed measurement.
        packed_seconds: training seconds (``train.max_time``) of each packed trial.
        small_trial: the packed trials' model and batch overrides.
        compile_backend: ``torch.compile``'s backend (``eager`` only traces: a CPU test of the stage).
        quality_minutes: training minutes of the Multi30k base-size run (``quality`` stage).
        quality_config: its YAML config.
        stages: stages to run (subset of :data:`STAGES`).
        caps: (stage, seconds) pairs that replace :data:`STAGE_CAP_S`'s cap of those stages (``--cap``).
        budget_s: seconds every stage together may take; a stage gets ``min(its cap, what is left)``.
        cache_dir: tokenizer/corpus cache shared by every stage and trial ("" = a fresh temporary one).
        seed: batch choice and model initialisation.
        tiny: the CPU smoke preset (recorded in the JSON).
    """

    data: str = DEFAULT_DATA
    vocab_size: int = 8000
    builtin_pairs: int = 6000
    d_model: int = 512
    layers: int = 6
    heads: int = 8
    d_ff: int = 2048
    max_tokens: int = 25000
    batches: int = 3
    reps: int = 10
    warmup: int = 1
    decode_sentences: int = 128
    decode_len: int = 50
    beam: int = 5
    decode_reps: int = 3
    shape_batches: int = 12
    packed: tuple[int, ...] = (1, 2, 4, 8)
    packed_seconds: float = 15.0
    small_trial: tuple[str, ...] = SMALL_TRIAL
    compile_backend: str = "inductor"
    quality_minutes: float = 7.5
    quality_config: str = "scripts/multi30k-base-gpu.yaml"
    stages: tuple[str, ...] = DEFAULT_STAGES
    caps: tuple[tuple[str, float], ...] = ()
    budget_s: float = 500.0
    cache_dir: str = ""
    seed: int = 1
    tiny: bool = False

    def replace(self, **changes: Any) -> GpuCheckOptions:
        out = dataclasses.replace(self, **changes)
        out.check()
        return out

    def check(self) -> None:
        """Raise :class:`BenchError` (one line) for options no run can use."""
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise BenchError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(STAGES)}")
        bad = [f"{stage}={seconds:g}" for stage, seconds in self.caps if stage not in STAGES or not seconds > 0]
        if bad:
            raise BenchError(
                f"--cap {', '.join(bad)}: give STAGE=SECONDS with a positive number of seconds and a stage of "
                f"{', '.join(STAGES)}"
            )
        if not self.packed or min(self.packed) < 1:
            raise BenchError(
                f"--packed {','.join(map(str, self.packed))}: give trial counts of at least 1, e.g. 1,2,4,8"
            )
        if self.budget_s <= 0 or self.packed_seconds <= 0 or self.quality_minutes <= 0:
            raise BenchError("--budget-s, --packed-seconds and --quality-minutes must be positive")
        self.bench().check()

    def bench(self, **changes: Any) -> BenchOptions:
        """The :class:`BenchOptions` of the in-process stages (training, decoding, compile)."""
        fields: dict[str, Any] = dict(
            data=self.data,
            vocab_size=self.vocab_size,
            builtin_pairs=self.builtin_pairs,
            d_model=self.d_model,
            layers=self.layers,
            heads=self.heads,
            d_ff=self.d_ff,
            max_tokens=self.max_tokens,
            batches=self.batches,
            reps=self.reps,
            warmup=self.warmup,
            decode_sentences=self.decode_sentences,
            decode_len=self.decode_len,
            beam=self.beam,
            seed=self.seed,
            cache_dir=self.cache_dir,
        )
        fields.update(changes)
        return BenchOptions(**fields)

    def cap(self, stage: str) -> float:
        """Most seconds ``stage`` may take: its ``--cap``, else :data:`STAGE_CAP_S`'s."""
        return dict(self.caps).get(stage, STAGE_CAP_S[stage])

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuCheckOptions:
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        values["caps"] = tuple((stage, seconds) for stage, seconds in values.get("caps", ()))
        return cls(**values)


def tiny(opts: GpuCheckOptions) -> GpuCheckOptions:
    """The CPU smoke preset: built-in data, a one-layer model, one small batch, one round, 1 and 2 packed
    trials of two seconds, short budgets."""
    return opts.replace(
        data="builtin",
        vocab_size=120,
        builtin_pairs=300,
        d_model=16,
        layers=1,
        heads=2,
        d_ff=32,
        max_tokens=300,
        batches=1,
        reps=1,
        warmup=0,
        decode_sentences=3,
        decode_len=4,
        decode_reps=1,
        shape_batches=3,
        packed=(1, 2),
        packed_seconds=2.0,
        quality_minutes=0.05,
        tiny=True,
        small_trial=(
            "model.d_model=16",
            "model.layers=1",
            "model.heads=2",
            "model.d_ff=32",
            "train.max_tokens=300",
            "eval.max_len_a=0",
            "eval.max_len_b=1",
        ),  # one-token hypotheses: decoding takes no time
    )
