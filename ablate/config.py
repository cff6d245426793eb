"""Typed configuration: nested frozen dataclasses, YAML files and dotted overrides.

``load_config`` merges the defaults, an optional YAML file and ``key=value`` overrides (values parsed as
YAML), then validates the result; any mistake is a :class:`ConfigError` of one line naming the key and,
for a misspelled key or choice, the closest valid one. :func:`from_flat`, which every config goes through,
imports the config's ``plugins`` first, so their components are valid choices.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Sequence, Union

from ablate.errors import closest, did_you_mean
from ablate.registry import check_params, resolve
from ablate.utils import plugins as plugin_loader
from ablate.utils.typed import (  # noqa: F401 - ConfigError, to_dict, parse_override, ... re-exported
    ConfigError,
    OneOf,
    callback_modules,
    check_trainer_options,
    class_spec,
    coerce,
    complete_override,
    describe_fields,
    field_types,
    flatten,
    leaf_types,
    nest,
    parse_override,
    read_yaml,
    to_dict,
)

# Choices that a registry lists: each registry is the only list of its variants (see OneOf).
Score = Annotated[str, OneOf("ablate.model.scores", "SCORES", extra=("none",))]
Positions = Annotated[str, OneOf("ablate.model.positions", "POSITIONS")]
Arch = Annotated[str, OneOf("ablate.model.build", "ARCHS")]
Schedule = Annotated[str, OneOf("ablate.training.module", "schedules")]
LengthPenalty = Annotated[str, OneOf("ablate.model.decoding", "LENGTH_PENALTIES")]


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is segmented."""

    source: str = "builtin"
    """``builtin`` (synthetic task), a local folder of ``{split}.{lang}[.gz]`` files, or
    ``hf:<dataset>[@<revision>][:<config>]`` for a Hugging Face hub dataset (``@<commit sha>`` pins it)."""
    src_lang: str = "en"
    """Source language: the ``{split}.{lang}`` file suffix, or the language key of a hub dataset."""
    tgt_lang: str = "de"
    """Target language, named as ``src_lang``."""
    vocab_size: int = 8000
    """BPE vocabulary size (joint over both languages unless ``joint_vocab`` is false); a corpus with fewer merges
    (the built-in task's 4000 pairs: 3759) gives fewer, and a status line names the size the run trains."""
    joint_vocab: bool = True
    """One BPE vocabulary over both languages (false: one per language)."""
    max_len: int = 128
    """Pairs with a side longer than this many subwords are dropped from training; validation and test pairs are
    kept, cut to it (a warning counts them)."""
    builtin_pairs: int = 4000
    """Training pairs generated for the built-in task."""
    builtin_eval_pairs: int = 500
    """Validation and test pairs of the built-in task, each (the first N of the same fixed streams, so a smaller
    set is a prefix of the default one); fewer make smoke runs and tutorial sweeps faster, at noisier BLEU."""
    cache_dir: str = ""
    """Tokenizer and encoded-corpus cache; empty means ``$ABLATE_CACHE`` or ``~/.cache/ablate``."""


@dataclass(frozen=True)
class AttentionConfig:
    """Attention scoring, shared by every attention site unless a site overrides it."""

    score: Score = "dot"
    """Attention score: dot-product, additive (Bahdanau et al. 2015), general (bilinear), gaussian (kernel),
    or one a plugin registers; ``none``: the RNN without attention."""
    params: dict[str, Any] = field(default_factory=dict)
    """Hyperparameters of ``score``, e.g. ``model.attention.params.bandwidth=true`` (gaussian) or
    ``model.attention.params.chunk_mb=16`` (additive): keyword arguments of its constructor, checked against
    the parameters it declares after the ones every score takes (a different ``cross_score`` gets none)."""
    scale: Union[Literal["auto"], bool, float] = "auto"
    """Factor on the scores. ``auto``: what the score's paper uses (``Score.paper_scale``): 1/sqrt(d_k)
    for the dot-product family (dot, general, gaussian; Vaswani et al. 2017, sec. 3.2.1), none for
    additive (Bahdanau et al. 2015); ``true``: 1/sqrt(d_k) for every score; ``false``: no scaling;
    a number: that factor. ``true``/``false``/numbers are for scoring x scaling grids."""
    cross_score: Optional[Score] = None
    """Score for encoder-decoder attention only (defaults to ``score``): dot, additive, general, gaussian, none,
    or one a plugin registers."""


@dataclass(frozen=True)
class RNNConfig:
    """The recurrent baseline (``model.arch=rnn``)."""

    cell: Literal["gru", "lstm"] = "gru"
    """Recurrent cell of the encoder and the decoder."""
    hidden: int = 256
    """Hidden size of each encoder direction and of the decoder."""
    layers: int = 1
    """Stacked layers of the bidirectional encoder and of the decoder; each decoder layer starts from its encoder
    layer's final states, and with more than one ``model.dropout`` applies between layers."""


@dataclass(frozen=True)
class ModelConfig:
    """Architecture. ``build_model`` is the only reader of this section."""

    arch: Arch = "transformer"
    """The Transformer (Vaswani et al. 2017) or the recurrent encoder-decoder baseline (``model.rnn``); a run names
    the keys it sets that its architecture does not read (the RNN reads ``d_model``, ``dropout``, ``attention``,
    ``attention_dropout``, ``tie_embeddings`` and ``rnn``; the Transformer never ``rnn``)."""
    layers: int = 3
    """Encoder and decoder layers (Transformer); ``encoder_layers``/``decoder_layers`` override."""
    encoder_layers: Optional[int] = None
    """Encoder layers, where they differ from ``layers``."""
    decoder_layers: Optional[int] = None
    """Decoder layers, where they differ from ``layers``."""
    d_model: int = 128
    """Width of the embeddings and of every residual stream."""
    d_ff: int = 512
    """Inner size of the position-wise feed-forward layers."""
    heads: int = 4
    """Attention heads of every Transformer attention site (Table 3 row A varies it)."""
    d_k: Optional[int] = None
    """Per-head query/key size; default d_model / heads (Table 3 row B varies it)."""
    d_v: Optional[int] = None
    """Per-head value size; default d_k when d_k is set, else d_model / heads."""
    dropout: float = 0.1
    """P_drop: dropout on each sublayer output and on embeddings plus positions (Vaswani et al. 2017, sec. 5.4)."""
    attention_dropout: float = 0.0
    """Dropout on the attention weights."""
    positions: Positions = "sinusoidal"
    """Transformer position scheme: sinusoidal (Vaswani et al. 2017), learned absolute, none, rotary (RoPE) or ALiBi,
    or one a plugin registers."""
    positions_params: dict[str, Any] = field(default_factory=dict)
    """Hyperparameters of ``positions``, e.g. ``model.positions_params.base=500`` (rotary): keyword arguments
    of its constructor, checked against the parameters it declares after the ones every scheme takes."""
    max_positions: int = 1024
    """Longest sequence a table-based position scheme covers (with ``learned`` positions, decoding stops an output
    there, and training needs more than ``data.max_len``)."""
    share_positions: bool = False
    """Learned positions: one table for encoder and decoder (true) or one per side (false, as fairseq
    and Gehring et al. 2017). Parameter-free schemes are unaffected."""
    norm: Literal["post", "pre"] = "pre"
    """Layer-norm placement: ``pre`` (Xiong et al. 2020; trains at the default peak learning rate) or
    ``post`` (the paper's layers; use a lower ``train.lr``, e.g. 1e-3)."""
    tie_embeddings: bool = True
    """Share target input and output embeddings (and the source embedding with a joint vocab)."""
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    rnn: RNNConfig = field(default_factory=RNNConfig)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, budgets and hardware."""

    max_time: Optional[float] = None
    """Budget in seconds of training (data loading and optimizer steps); validation is not counted."""
    max_steps: int = -1
    """Budget in optimizer steps; -1: none. Every shipped sweep budgets by steps."""
    max_epochs: Optional[int] = 10
    """Budget in epochs; null: none."""
    max_tokens: int = 1536
    """Tokens per batch and device, padding included, on the longer side; a training pair longer than this is
    refused (``data.max_len`` below it drops such pairs)."""
    lr: Optional[float] = None
    """Peak learning rate, reached after ``warmup`` steps, then decayed as ``schedule`` says (linearly by default).
    Default: d_model^-0.5 * warmup^-0.5, the peak of the schedule of Vaswani et al. (2017), Eq. 3."""
    warmup: int = 400
    """Steps of linear warm-up to the peak ``lr``."""
    schedule: Schedule = "linear"
    """After warm-up: ``inverse_sqrt`` (Vaswani et al.), or ``linear``/``cosine`` decay to ``min_lr``
    when the nearest budget (steps, epochs or ``max_time``) runs out."""
    min_lr: float = 0.0
    """The schedule's floor: where a ``linear`` or ``cosine`` decay ends; ``inverse_sqrt`` never goes below it,
    warm-up included (at most the peak rate)."""
    label_smoothing: float = 0.1
    """eps_ls of the cross-entropy (Vaswani et al. 2017, sec. 5.4)."""
    weight_decay: float = 0.0
    """AdamW weight decay (never on biases and norms)."""
    betas: tuple[float, float] = (0.9, 0.98)
    """Adam's beta1, beta2 (the paper's 0.9, 0.98)."""
    clip_norm: float = 1.0
    """Gradient-norm clipping threshold; 0: no clipping."""
    accumulate: int = 1
    """Batches whose gradients make one optimizer step."""
    devices: Union[int, str] = 1
    """Number of devices (``auto`` for all); more than one trains with DDP."""
    nodes: int = 1
    """Machines for one training (DDP across them, e.g. a SLURM job of several nodes)."""
    accelerator: Literal["auto", "cpu", "gpu"] = "auto"
    """``auto``: a GPU when one is visible, else the CPU."""
    precision: Literal["auto", "32", "bf16-mixed", "16-mixed"] = "auto"
    """``auto``: bf16 autocast on a GPU that supports it, fp32 elsewhere; ``16-mixed`` (fp16) needs a GPU."""
    val_every: Optional[int] = None
    """Validate every N training batches; default once per epoch."""
    checkpoint_every: int = 200
    """Save ``last.ckpt`` (for resuming) every N optimizer steps, and at every epoch end."""
    inject_fault: Optional[str] = None
    """Reliability drills: ``nan:STEP`` (weights poisoned), ``oom:STEP`` (simulated out of memory),
    ``kill:STEP`` (SIGKILL, once per run directory) or ``term:STEP`` (SIGTERM, once) at that step."""
    num_workers: int = 0
    """DataLoader worker processes; 0 loads batches in the training process."""
    threads: int = 0
    """torch intra-op threads on CPU; 0 keeps torch's default."""
    init_from: Optional[str] = None
    """Start from another run's weights: its folder (``checkpoints/best.ckpt``) or a ``.ckpt`` file. Weights
    only (optimizer, schedule and step start afresh); the model and vocabulary must be that run's. To give a
    finished run a larger budget, start a new run with ``train.init_from=<its folder>``."""


@dataclass(frozen=True)
class EvalConfig:
    """Decoding and scoring."""

    beam: int = 5
    """Beam size for the test sets (1 = greedy)."""
    val_beam: int = 1
    """Beam size for validation BLEU during training."""
    length_penalty: LengthPenalty = "fairseq"
    """How beam search normalises a finished hypothesis' log-probability by its length |Y| (EOS
    included): ``fairseq`` divides by ``|Y|^alpha``, ``gnmt`` by ``((5 + |Y|) / 6)^alpha`` (Wu et al.
    2016, eq. 14; the alpha 0.6 of Vaswani et al. 2017, sec. 6.1)."""
    len_penalty: float = 1.0
    """The exponent alpha of ``length_penalty`` (0 ranks by raw log-probability)."""
    max_len_a: float = 1.5
    """The factor a of the decoding length limit (see ``max_len_b``)."""
    max_len_b: int = 10
    """Hypotheses stop after ``a * source_length + b`` tokens."""
    max_sentences: int = 128
    """Sentences per decoding batch."""


@dataclass(frozen=True)
class TrackingConfig:
    """Weights & Biases and run naming."""

    wandb: Literal["auto", "online", "offline", "disabled"] = "auto"
    """``auto``: online with W&B credentials (``wandb login``, ``WANDB_API_KEY``), else an offline run in
    ``<run_dir>/wandb``."""
    project: str = "ablate"
    """W&B project."""
    entity: Optional[str] = None
    """W&B entity (team or user); null: the account's default."""
    group: Optional[str] = None
    """W&B group; ``ablate sweep`` sets the sweep name."""
    name: Optional[str] = None
    """Run name (one folder name); the default run folder is ``runs/<name>``, else ``runs/<arch>-<config hash>``."""
    tags: tuple[str, ...] = ()
    """W&B tags; ``ablate sweep`` tags each run with what it varies."""
    variant: Optional[str] = None
    """Name of the sweep variant this run belongs to (set by ``ablate sweep``), for tables."""
    log_every: int = 50
    """Log training metrics every N optimizer steps."""
    system_metrics: bool = True
    """Let W&B record CPU/GPU utilisation and memory of the run (``false`` turns it off)."""
    log_checkpoints: bool = False
    """Upload ``best.ckpt`` as a W&B model artifact at the end of the run."""
    loggers: tuple[Union[str, dict[str, Any]], ...] = ("wandb",)
    """Lightning loggers that receive the run's train/val/test metrics, several at once: ``wandb`` (as
    ``tracking.wandb`` says), ``tensorboard`` (``<run_dir>/tensorboard``), ``csv`` (``<run_dir>/csv/metrics.csv``),
    ``mlflow`` (``<run_dir>/mlruns``; ``pip install mlflow``), or a logger class path (``{class_path, init_args}``)."""


@dataclass(frozen=True)
class Config:
    """The whole run: what ``ablate train`` reads and ``summary.json`` records."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    seed: int = 1
    """Seed of initialisation, data order and dropout; a sweep replicates a row over its ``seed`` values."""
    trainer: dict[str, Any] = field(default_factory=dict)
    """Extra ``pytorch_lightning.Trainer`` arguments and ``callbacks`` (see ``ablate/utils/typed.py``)."""
    plugins: tuple[dict[str, Any], ...] = ()
    """Modules (``my_lab.scores``) or ``.py`` files (relative to the config file's folder) imported before the
    config is checked, so the components they register can be chosen. The resolved config records each as
    ``{kind, name, path, sha256}`` (installed ``ablate.plugins`` entry points too, with their package version)."""


def valid_keys() -> list[str]:
    """Every dotted leaf key of the config, e.g. ``model.attention.score``."""
    return list(leaf_types(Config))


def describe_keys() -> list[tuple[str, str, Any, str]]:
    """:func:`~ablate.utils.typed.describe_fields` of every config key, for ``ablate train --help``."""
    return describe_fields(Config)


def complete_overrides(incomplete: str) -> list[tuple[str, str]]:
    """Shell completion of one ``key=value`` override: keys, then a key's choices (typer's ``autocompletion=``)."""
    return complete_override(Config, incomplete)


def closest_key(key: str) -> Optional[str]:
    """The config key (or section) a misspelt ``key`` meant. Under a section that exists only its entries count,
    by their own name (``model.nonsense`` shares ``model.`` with every model key, and whole it guessed
    ``model.rnn``); then a key of another section by that name (``model.lr`` -> ``train.lr``); under a misspelt
    section the section, then its key (``modle.heads`` -> ``model.heads``), or the whole key (``modle`` -> ``model``).
    A weak likeness (difflib ratio under 0.7) counts only where one name holds the other (``clip`` -> ``clip_norm``):
    a plain 0.6 guessed for 12 of 288 unrelated words under the sections (``train.nonsense`` -> ``train.nodes``),
    this for 2 (``mode`` -> ``d_model``, ``param`` -> ``params``); of 2,694 one-edit typos of the keys it guesses
    2,534 right (2,549) and 86 wrong (96)."""
    keys = valid_keys()
    sections = {k.rsplit(".", n)[0] for k in keys for n in range(1, k.count(".") + 1)}
    parent, _, name = key.rpartition(".")
    if parent not in sections:
        if parent and (section := _guess(parent, sorted(sections), cutoff=0.5)):  # the section first, then its key
            return closest_key(f"{section}.{name}")
        return _guess(key, [*keys, *sorted(sections)], cutoff=0.5)
    here = _guess(name, sorted({k[len(parent) + 1 :].split(".")[0] for k in keys if k.startswith(f"{parent}.")}))
    return f"{parent}.{here}" if here else next((k for k in keys if k.rpartition(".")[2] == name), None)


def _guess(word: str, names: list[str], cutoff: float = 0.6) -> Optional[str]:
    """:func:`closest` at 0.7, else at ``cutoff`` among the names that hold ``word`` or that it holds."""
    return closest(word, names, cutoff=0.7) or closest(word, [n for n in names if word in n or n in word], cutoff)


def _unknown_key(key: str, value: Any) -> ConfigError:
    """The error for an unknown ``key``: under a misspelt section it names the first key set there
    (``modle.heads``), so the guess is the key meant (``model.heads``); sections are guessed too (``modle``)."""
    while isinstance(value, dict) and value:
        sub, value = next(iter(value.items()))
        key = f"{key}.{sub}"
    close, parent = closest_key(key), key.rpartition(".")[0]
    under = [k for k in valid_keys() if k.startswith(f"{parent}.")] or valid_keys()  # the section's, if it is one
    hint = f"; did you mean '{close}'?" if close else f"; valid keys: {', '.join(sorted(under))}"
    return ConfigError(f"unknown config key '{key}'{hint}")


def _build(cls: Any, values: dict[str, Any], prefix: str = "") -> Any:
    hints = field_types(cls)
    for key in values:
        if key not in hints:
            raise _unknown_key(prefix + key, values[key])
    kwargs = {}
    for name, tp in hints.items():
        if name not in values:
            continue
        value = values[name]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix}{name} is a section; set its keys, e.g. {prefix}{name}.<key>=...")
            kwargs[name] = _build(tp, value, f"{prefix}{name}.")
        else:
            kwargs[name] = coerce(prefix + name, value, tp)
    return cls(**kwargs)


SELECTORS: dict[str, str] = {
    "model.attention.score": "score",
    "model.attention.cross_score": "score",
    "model.positions": "positions",
    "model.arch": "arch",
    "train.schedule": "schedule",
    "eval.length_penalty": "length_penalty",
}
"""Keys that select a registered component, by the kind of component they select."""


def from_flat(flat: dict[str, Any], base: str | Path | None = None, trust: plugin_loader.Trust = "import") -> Config:
    """Build and validate a :class:`Config` from dotted keys (missing keys keep defaults).

    The ``plugins`` are imported first (files relative to ``base``, default the working directory) as ``trust``
    allows (:data:`ablate.utils.plugins.Trust`), and recorded in the config; so are the classes
    ``trainer.callbacks`` names (``never``: not imported, ``recorded``: only from an installed module). A name a listed plugin registered
    beside a shipped one selects the plugin's (``cosine`` -> ``cosine:cosine``; :func:`ablate.registry.register`).
    """
    folder = Path(base) if base is not None else None
    flat = renamed_keys(flat)
    flat["plugins"] = plugin_loader.load(flat.get("plugins"), folder, trust)
    modules = [str(record.get("name", "")).split(":")[0] for record in flat["plugins"]]
    for key, kind in SELECTORS.items():
        if isinstance(flat.get(key), str):
            flat[key] = resolve(kind, flat[key], modules)
    cfg = _build(Config, nest(flat))
    cfg = _with_params(cfg)
    if trust == "recorded" and cfg.trainer:  # a callback's class path names code as a plugin does
        plugin_loader.check_named_modules(callback_modules(cfg.trainer), folder)
    validate(cfg, imports=trust != "never")
    return cfg


RENAMED: dict[str, tuple[str, str, Any]] = {
    "model.attention.bandwidth": ("gaussian", "model.attention.params.bandwidth", False),
    "model.attention.chunk_mb": ("additive", "model.attention.params.chunk_mb", 64.0),
}
"""Keys that became a score's parameter: old key -> (the score that read it, its new key, its old default)."""


def renamed_keys(flat: dict[str, Any]) -> dict[str, Any]:
    """``flat`` with the keys of :data:`RENAMED` moved to their new place, so old records and configs load.

    An old key at its old default goes (it was the default); otherwise it becomes the score's parameter
    when ``model.attention.score`` is that score, and goes where the score ignored it.

    Raises:
        ConfigError: the old key set for a ``cross_score`` of its score, which a parameter cannot reach.
    """
    flat = dict(flat)
    score, cross = flat.get("model.attention.score", "dot"), flat.get("model.attention.cross_score")
    for old, (owner, new, default) in RENAMED.items():
        if old not in flat:
            continue
        value = flat.pop(old)
        if value == default:
            continue
        if score == owner:
            if flat.get(new.rsplit(".", 1)[0]) == {}:  # an empty params mapping, as a resolved config spells it
                del flat[new.rsplit(".", 1)[0]]
            flat.setdefault(new, value)
        elif cross == owner:
            raise ConfigError(
                f"{old} now reaches only model.attention.score; set model.attention.score={owner} and {new}"
            )
    return flat


def _with_params(cfg: Config) -> Config:
    """``cfg`` with the components' hyperparameters checked against what each declares, typed."""
    m, attention = cfg.model, cfg.model.attention
    if attention.score != "none":
        params = check_params("score", attention.score, attention.params, "model.attention.params")
        attention = dataclasses.replace(attention, params=params)
    elif attention.params:
        raise ConfigError("model.attention.params is set but model.attention.score=none has no parameters; remove it")
    positions_params = check_params("positions", m.positions, m.positions_params, "model.positions_params")
    return dataclasses.replace(
        cfg, model=dataclasses.replace(m, attention=attention, positions_params=positions_params)
    )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A config YAML file's dotted keys, its ``plugins`` paths made absolute against its folder."""
    flat = flatten(read_yaml(path))
    if "plugins" in flat:
        flat["plugins"] = plugin_loader.absolute(flat["plugins"], Path(path).resolve().parent)
    return flat


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """Defaults <- YAML file <- ``key=value`` overrides, validated.

    The file's ``plugins`` paths are relative to its folder; an override's to the working directory.
    """
    flat = read_config_file(path) if path is not None else {}
    flat.update(parse_override(item) for item in override_list(overrides))
    return from_flat(flat)


def override_list(overrides: Sequence[str]) -> list[str]:
    """``overrides`` as a list of ``key=value`` strings; one string is refused (iterated, it is one per character)."""
    if isinstance(overrides, str):
        raise ConfigError(f"overrides takes a list of key=value strings, not one string: overrides=[{overrides!r}]")
    return [str(item) for item in overrides]


def is_key(key: str) -> bool:
    """``key`` is a config key: a leaf (``model.heads``) or inside a mapping key
    (``model.attention.params.temperature``, ``trainer.gradient_clip_algorithm``)."""
    leaves = leaf_types(Config)
    mappings = [name for name, tp in leaves.items() if tp is dict or typing.get_origin(tp) is dict]
    return key in leaves or any(key.startswith(f"{mapping}.") for mapping in mappings)


def replace(cfg: Config, **dotted: Any) -> Config:
    """A copy of ``cfg`` with dotted keys changed: ``replace(cfg, **{"model.heads": 8})``."""
    flat = flatten(to_dict(cfg))
    flat.update(dotted)
    return from_flat(flat)


NOT_TRAINING = (
    "tracking.", "train.devices", "train.num_workers", "train.threads", "data.cache_dir",
    "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.profiler",
)  # fmt: skip
"""Keys (and prefixes) that leave the trained model as it is, so a resume may change them: W&B naming, the
device count (but ``train.max_tokens`` is per device: a resume on another count says so, as its batches change),
loader processes, CPU threads, where the cache lies, and Trainer options that only change what the console shows
(a table's rows ignore them all, and the device kind). ``train.accelerator`` counts: ``auto`` precision follows it."""

SCALES_BATCH = {"train.devices": 1}
""":data:`NOT_TRAINING` keys that still tell two configurations apart: ``train.max_tokens`` is per device, so 2
devices train on twice the batch. They split a table's rows, and away from their default (given) they enter a
run's fingerprint (its default folder), while a resume may still change them (with a warning)."""


NOT_READ = {
    "transformer": ("model.rnn.",),
    "rnn": (
        "model.layers", "model.encoder_layers", "model.decoder_layers", "model.d_ff", "model.heads", "model.d_k",
        "model.d_v", "model.positions", "model.positions_params", "model.max_positions", "model.share_positions",
        "model.norm",
    ),
}  # fmt: skip
"""Keys (and prefixes) each shipped architecture's builder never reads: the other architecture's. A sweep may set
them for all its rows (``sweeps/rnn-vs-transformer.yaml``), so they are not refused; training names them."""


def unused_keys(cfg: Config) -> list[str]:
    """``key=value`` of each key set away from its default that ``cfg.model.arch`` does not read (:data:`NOT_READ`),
    e.g. ``["model.heads=8"]`` for an RNN; and an RNN's ``model.attention.score`` and ``params`` where another
    ``cross_score`` is its one attention."""
    prefixes = NOT_READ.get(cfg.model.arch, ())
    att = cfg.model.attention
    if cfg.model.arch == "rnn" and att.cross_score not in (None, att.score):
        prefixes += ("model.attention.score", "model.attention.params")
    default = flatten(to_dict(Config()))
    return [f"{k}={v}" for k, v in flatten(to_dict(cfg)).items() if k.startswith(prefixes) and v != default.get(k)]


def fingerprint(cfg: Config, exclude: tuple[str, ...] = NOT_TRAINING, resume: bool = False) -> str:
    """A short stable hash of what determines the trained model (:data:`NOT_TRAINING` excluded, but
    :data:`SCALES_BATCH` away from its default; ``resume``: excluded too, as a resume may change them).

    A plugin counts by its name and content (sha256), not by where its file lies; a config without
    plugins hashes as it did before the key existed.
    """
    full = flatten(to_dict(cfg))
    flat = {k: v for k, v in full.items() if not k.startswith(exclude) and v not in ({}, [])}
    if not resume:  # at its default, a SCALES_BATCH key hashes as before the rule (one device keeps its folder)
        flat.update({k: full[k] for k, default in SCALES_BATCH.items() if full[k] != default})
    if "plugins" in flat:
        flat["plugins"] = sorted((r.get("name"), r.get("sha256") or r.get("version")) for r in flat["plugins"])
    blob = json.dumps(flat, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:8]


def peak_lr(cfg: Config) -> float:
    """``train.lr``, or the peak of the paper's schedule: d_model^-0.5 * warmup^-0.5 (Eq. 3)."""
    if cfg.train.lr is not None:
        return cfg.train.lr
    return cfg.model.d_model**-0.5 * max(cfg.train.warmup, 1) ** -0.5


FAULTS = OneOf("ablate.training.trainer", "FAULTS")
"""The kinds of ``train.inject_fault``."""


def validate(cfg: Any, imports: bool = True) -> None:
    """Cross-field checks that types alone cannot express; ``imports``: import the classes ``trainer.callbacks``
    names (``False``: check their form only)."""
    check_ranges(cfg)
    m, t = cfg.model, cfg.train
    if m.arch == "transformer":
        if m.d_k is None and m.d_model % m.heads:
            raise ConfigError(
                f"model.heads={m.heads} does not divide model.d_model={m.d_model}; "
                f"pick a divisor or set model.d_k explicitly"
            )
        if m.attention.score == "none" or m.attention.cross_score == "none":
            raise ConfigError("model.attention.score=none is only for model.arch=rnn (the no-attention baseline)")
    if m.arch != "rnn" and m.positions == "rotary" and head_dims(m)[0] % 2:  # the RNN has no positions
        raise ConfigError("model.positions=rotary needs an even per-head size d_k")
    if isinstance(m.attention.scale, float) and m.attention.scale <= 0:
        raise ConfigError(f"model.attention.scale={m.attention.scale} must be positive, auto, true or false")
    if t.nodes < 1:
        raise ConfigError(f"train.nodes={t.nodes} must be at least 1")
    if t.min_lr > (peak := peak_lr(cfg)):  # the schedule floors at min_lr: it would jump there after warm-up
        what = "train.lr" if t.lr is not None else "train.lr: d_model^-0.5 * warmup^-0.5"
        raise ConfigError(f"train.min_lr={t.min_lr} is above the peak learning rate {peak:.4g} ({what}); lower it")
    if t.inject_fault is not None:
        kind, _, step = t.inject_fault.partition(":")
        if kind not in FAULTS.choices() or not step.isdigit():
            raise ConfigError(
                f"train.inject_fault={t.inject_fault!r} must be KIND:STEP with KIND one of "
                f"{', '.join(FAULTS.choices())} (e.g. kill:30)"
            )
    if isinstance(t.devices, str) and t.devices != "auto":
        raise ConfigError(f"train.devices={t.devices!r} must be a number or 'auto'")
    if isinstance(t.devices, int) and t.devices < 1:
        raise ConfigError(f"train.devices={t.devices} must be at least 1 (or 'auto' for every GPU)")
    if not 0 <= cfg.seed < 2**32:
        raise ConfigError(f"seed={cfg.seed} must be in [0, 2**32 - 1]")
    if t.val_every is not None and t.val_every < 1:
        raise ConfigError(
            f"train.val_every={t.val_every} must be at least 1 (training batches), or null for once per epoch"
        )
    if cfg.tracking.log_every < 1:
        raise ConfigError(f"tracking.log_every={cfg.tracking.log_every} must be at least 1 (steps)")
    check_budget(t)
    check_loggers(cfg.tracking.loggers)
    if cfg.trainer:
        check_trainer_options(cfg.trainer, imports)


LOGGERS = ("wandb", "tensorboard", "csv", "mlflow")
"""The logger names of ``tracking.loggers`` (built by :mod:`ablate.training.tracking`); anything else is a class path."""


def check_loggers(entries: Any) -> None:
    """Each ``tracking.loggers`` entry is a logger name, a class path or ``{class_path, init_args}``, at most once."""
    seen = []
    for entry in entries:
        name = class_spec(entry, "tracking.loggers")[0]
        if name not in LOGGERS and "." not in name:
            raise ConfigError(
                f"unknown logger tracking.loggers={name!r}{did_you_mean(name, LOGGERS)}; use one of "
                f"{', '.join(LOGGERS)} or a Lightning logger class path (package.module.Class)"
            )
        if name in seen:
            raise ConfigError(f"tracking.loggers names {name!r} twice; list each logger once")
        seen.append(name)


POSITIVE = (
    "model.layers model.d_model model.d_ff model.heads data.vocab_size data.max_len train.max_tokens "
    "train.accumulate eval.beam eval.val_beam model.rnn.hidden model.rnn.layers eval.max_sentences "
    "train.checkpoint_every model.max_positions model.encoder_layers model.decoder_layers model.d_k model.d_v "
    "data.builtin_pairs data.builtin_eval_pairs"
).split()
"""Keys whose number must be positive where it is set (in the order they are checked)."""
FRACTIONS = ("model.dropout", "model.attention_dropout", "train.label_smoothing")
"""Keys whose number must be in [0, 1)."""
NON_NEGATIVE = (
    "train.weight_decay train.min_lr train.clip_norm train.warmup eval.len_penalty eval.max_len_a eval.max_len_b "
    "train.threads train.num_workers"
).split()
"""Keys whose number must not be negative."""


def check_ranges(cfg: Any) -> None:
    """Each number in its range: sizes positive, probabilities in [0, 1), rates and lengths not negative."""
    values = {key: functools.reduce(getattr, key.split("."), cfg) for key in (*POSITIVE, *FRACTIONS, *NON_NEGATIVE)}
    for key in POSITIVE:
        if values[key] is not None and values[key] <= 0:
            raise ConfigError(f"{key}={values[key]} must be positive")
    for key in FRACTIONS:
        if not 0.0 <= values[key] < 1.0:
            raise ConfigError(f"{key}={values[key]} must be in [0, 1)")
    if cfg.train.lr is not None and cfg.train.lr <= 0:
        raise ConfigError(f"train.lr={cfg.train.lr} must be positive")
    for key in NON_NEGATIVE:
        if values[key] < 0:
            raise ConfigError(f"{key}={values[key]} must not be negative")
    if not all(0.0 <= b < 1.0 for b in cfg.train.betas):
        raise ConfigError(f"train.betas={list(cfg.train.betas)} must both be in [0, 1)")


def check_budget(t: Any) -> None:
    """A run stops: some budget is finite, and each is one Lightning reads the same way.

    Lightning reads ``max_steps=-1`` and ``max_epochs=-1`` (or none) as "no limit"; ablate passes
    ``max_epochs=-1`` when neither is set, so without a finite ``max_time`` such a run never ends.
    """
    if t.max_steps != -1 and t.max_steps < 1:
        raise ConfigError(f"train.max_steps={t.max_steps} must be a positive number of steps, or -1 for no limit")
    if t.max_epochs is not None and t.max_epochs != -1 and t.max_epochs < 1:
        raise ConfigError(
            f"train.max_epochs={t.max_epochs} must be a positive number of epochs, or -1/null for no limit"
        )
    if t.max_time is not None and t.max_time <= 0:
        raise ConfigError(f"train.max_time={t.max_time} must be positive (seconds), or null for no limit")
    if t.max_steps == -1 and (t.max_epochs is None or t.max_epochs == -1) and t.max_time is None:
        raise ConfigError(
            "set a training budget: train.max_steps, train.max_epochs or train.max_time "
            f"(max_steps={t.max_steps}, max_epochs={t.max_epochs}, max_time={t.max_time} would train forever)"
        )


def head_dims(m: Any) -> tuple[int, int]:
    """Per-head ``(d_k, d_v)`` the model uses: ``model.d_k`` or d_model / heads, and ``model.d_v`` or d_k.

    The RNN's single attention head works in the decoder's hidden size (``model.rnn.hidden``).
    """
    if m.arch == "rnn":
        return m.rnn.hidden, m.rnn.hidden
    d_k = m.d_k or m.d_model // m.heads
    return d_k, m.d_v or d_k
