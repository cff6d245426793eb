"""Load a trained model back from its run directory (config, tokenizer and checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from torch import nn

from ablate.config import Config, ConfigError, flatten, from_flat, read_yaml
from ablate.data.tokenizer import SubwordTokenizer
from ablate.model.build import build_model
from ablate.training.checkpoint_io import CheckpointError, load_checkpoint_file
from ablate.utils import plugins as plugin_loader


def recorded_config(run_dir: Path, plugins: Sequence[str] = (), trust_plugins: bool = False) -> Config:
    """The config ``run_dir/config.yaml`` records, importing only the plugins the user vouched for.

    Args:
        plugins: the user's own plugins (``--plugins``: files relative to the working directory, or
            modules), imported first as ``ablate train plugins=...`` would; a plugin the record names
            is imported when it is one of them (same content), or an installed module ...
        trust_plugins: ... or always (``--trust-plugins``).

    Raises:
        PluginError: the record names a plugin the user did not vouch for (one line naming the flag).
        ConfigError: the config is unusable.
    """
    plugin_loader.load(list(plugins))
    try:
        return from_flat(
            flatten(read_yaml(run_dir / "config.yaml")), base=run_dir, trust="import" if trust_plugins else "recorded"
        )
    except ConfigError as err:
        raise ConfigError(f"{run_dir} holds an unusable config.yaml: {err}") from None


def load_trained(
    run_dir: str | Path, which: str = "best", plugins: Sequence[str] = (), trust_plugins: bool = False
) -> tuple[Config, nn.Module, SubwordTokenizer]:
    """``(config, model in eval mode, tokenizer)`` of the run in ``run_dir``.

    Args:
        run_dir: A directory written by ``ablate train``.
        which: ``best`` or ``last`` checkpoint (falls back to the other when missing).
        plugins, trust_plugins: which plugins the record names may be imported (:func:`recorded_config`).

    Raises:
        PluginError: the record names a plugin the user did not vouch for.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = recorded_config(run_dir, plugins, trust_plugins)
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
