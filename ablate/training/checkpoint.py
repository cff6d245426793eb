"""Load a trained model back from its run directory (config, tokenizer and checkpoint)."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ablate.config import Config, ConfigError, flatten, from_flat, read_yaml
from ablate.data.tokenizer import SubwordTokenizer
from ablate.model.build import build_model
from ablate.training.checkpoint_io import CheckpointError, load_checkpoint_file


def load_trained(run_dir: str | Path, which: str = "best") -> tuple[Config, nn.Module, SubwordTokenizer]:
    """``(config, model in eval mode, tokenizer)`` of the run in ``run_dir``.

    Args:
        run_dir: A directory written by ``ablate train``.
        which: ``best`` or ``last`` checkpoint (falls back to the other when missing).
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml)")
    try:
        cfg = from_flat(flatten(read_yaml(run_dir / "config.yaml")), base=run_dir)
    except ConfigError as err:
        raise ConfigError(f"{run_dir} holds an unusable config.yaml: {err}") from None
    if not (run_dir / "tokenizer" / "tokenizer.json").exists():
        raise ConfigError(f"{run_dir} has no saved tokenizer; was it trained by this version of ablate?")
    tok = SubwordTokenizer.load(run_dir / "tokenizer")
    names = [f"{which}.ckpt", "last.ckpt", "best.ckpt"]
    path = next((run_dir / "checkpoints" / n for n in names if (run_dir / "checkpoints" / n).exists()), None)
    if path is None:
        raise ConfigError(f"{run_dir}/checkpoints holds no checkpoint yet")
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    try:
        state = load_checkpoint_file(path)["state_dict"]  # weights_only: never runs code from the file
    except CheckpointError as err:
        raise ConfigError(str(err)) from None
    try:
        model.load_state_dict({k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")})
    except (RuntimeError, AttributeError) as err:
        raise ConfigError(
            f"checkpoint {path} does not fit the model of {run_dir}/config.yaml "
            f"({str(err).strip().splitlines()[0][:160]})"
        ) from None
    return cfg, model.eval(), tok
