"""Cross-field checks of a config that types alone cannot express, and the per-head sizes.

:func:`validate` runs on every config :func:`ablate.config.load_config` builds; each mistake is one
:class:`ConfigError` line naming the key. Split from ``config.py`` so that file holds the keys and
this one the rules between them; both names are re-exported from :mod:`ablate.config`.
"""

from __future__ import annotations

from typing import Any

from ablate.utils.typed import ConfigError, OneOf

FAULTS = OneOf("ablate.training.trainer", "FAULTS")
"""The kinds of ``train.inject_fault``."""


def validate(cfg: Any) -> None:
    """Cross-field checks that types alone cannot express."""
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
    if m.positions == "rotary" and head_dims(m)[0] % 2:
        raise ConfigError("model.positions=rotary needs an even per-head size d_k")
    if isinstance(m.attention.scale, float) and m.attention.scale <= 0:
        raise ConfigError(f"model.attention.scale={m.attention.scale} must be positive, auto, true or false")
    if t.nodes < 1:
        raise ConfigError(f"train.nodes={t.nodes} must be at least 1")
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
        from ablate.utils.trainer_options import check

        check(cfg.trainer)


LOGGERS = ("wandb", "tensorboard", "csv", "mlflow")
"""The logger names of ``tracking.loggers`` (built by :mod:`ablate.training.tracking`); anything else is a class path."""


def check_loggers(entries: Any) -> None:
    """Each ``tracking.loggers`` entry is a logger name, a class path or ``{class_path, init_args}``, at most once."""
    from ablate.errors import did_you_mean
    from ablate.utils.trainer_options import class_spec

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


def check_ranges(cfg: Any) -> None:
    """Each number in its range: sizes positive, probabilities in [0, 1), rates and lengths not negative."""
    m, t, e = cfg.model, cfg.train, cfg.eval
    positive: dict[str, float] = {
        "model.layers": m.layers,
        "model.d_model": m.d_model,
        "model.d_ff": m.d_ff,
        "model.heads": m.heads,
        "data.vocab_size": cfg.data.vocab_size,
        "data.max_len": cfg.data.max_len,
        "train.max_tokens": t.max_tokens,
        "train.accumulate": t.accumulate,
        "eval.beam": e.beam,
        "eval.val_beam": e.val_beam,
        "model.rnn.hidden": m.rnn.hidden,
        "model.rnn.layers": m.rnn.layers,
        "eval.max_sentences": e.max_sentences,
        "train.checkpoint_every": t.checkpoint_every,
        "model.max_positions": m.max_positions,
    }
    for key in ("encoder_layers", "decoder_layers", "d_k", "d_v"):
        if getattr(m, key) is not None:
            positive[f"model.{key}"] = getattr(m, key)
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{key}={value} must be positive")
    for key, value in {
        "model.dropout": m.dropout,
        "model.attention_dropout": m.attention_dropout,
        "train.label_smoothing": t.label_smoothing,
    }.items():
        if not 0.0 <= value < 1.0:
            raise ConfigError(f"{key}={value} must be in [0, 1)")
    if t.lr is not None and t.lr <= 0:
        raise ConfigError(f"train.lr={t.lr} must be positive")
    for key, value in {
        "train.weight_decay": t.weight_decay,
        "train.min_lr": t.min_lr,
        "train.clip_norm": t.clip_norm,
        "train.warmup": t.warmup,
        "eval.len_penalty": e.len_penalty,
        "eval.max_len_a": e.max_len_a,
        "eval.max_len_b": e.max_len_b,
    }.items():
        if value < 0:
            raise ConfigError(f"{key}={value} must not be negative")
    if not all(0.0 <= b < 1.0 for b in t.betas):
        raise ConfigError(f"train.betas={list(t.betas)} must both be in [0, 1)")


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
