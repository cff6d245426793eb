"""``train.init_from=RUN``: a new run that starts from another run's weights.

For fine-tuning, or for continuing a finished run with a larger budget as a new run (a finished run
folder is never trained again, and a changed ``train.max_steps`` is another config: see
:func:`ablate.training.run_dir.prepare_run_dir`). Only the weights are taken: the optimizer, the
learning-rate schedule (warm-up included), the step count and the clock start afresh, from this
run's ``train.*`` keys.

``RUN`` is a run folder (its ``checkpoints/best.ckpt``: the weights it tested) or a checkpoint file
(``<run>/checkpoints/last.ckpt`` for the final weights). The weights must fit this run's model
(same parameter names and shapes) and its vocabulary (the same tokens at the same ids, checked
against the tokenizer beside the checkpoint); otherwise the run is refused in one line naming the
``model.*``/``data.*`` keys that differ.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any, Callable

from torch import nn

from ablate.config import Config, ConfigError, flatten, to_dict
from ablate.training.checkpoint_io import CheckpointError, load_checkpoint_file

log = logging.getLogger(__name__)

PREFIX = "model."  # the LightningModule holds the plain model as ``.model``
VOCAB_KEYS = ("data.source", "data.src_lang", "data.tgt_lang", "data.vocab_size", "data.joint_vocab")
"""The keys that decide a run's vocabulary (its tokenizer is trained on ``data.source``'s train split)."""


def checkpoint_of(ref: str) -> Path:
    """The checkpoint ``train.init_from`` names: a file, or a run folder's ``checkpoints/best.ckpt``."""
    path = Path(ref).expanduser()
    if path.is_dir():
        best = path / "checkpoints" / "best.ckpt"
        if not best.is_file():
            raise ConfigError(
                f"train.init_from={ref}: the folder has no checkpoints/best.ckpt (is it a finished run?); "
                f"give a run folder or a .ckpt file"
            )
        return best
    if not path.is_file():
        raise ConfigError(f"train.init_from={ref} is neither a run folder nor a checkpoint file")
    return path


def _differing(theirs: dict[str, Any], ours: dict[str, Any], keys: tuple[str, ...] | None = None) -> list[str]:
    names = keys or tuple(sorted(set(theirs) | set(ours)))
    return [k for k in names if theirs.get(k) != ours.get(k)]


def _vocabularies(folder: Path) -> list[dict[str, int]]:
    """The token -> id maps of a saved :class:`~ablate.data.tokenizer.SubwordTokenizer` folder."""
    from tokenizers import Tokenizer

    names = ["joint.json"] if (folder / "joint.json").is_file() else ["src.json", "tgt.json"]
    return [Tokenizer.from_file(str(folder / n)).get_vocab() for n in names]


def same_vocabulary(tokenizer, folder: Path) -> bool:
    """Whether ``tokenizer`` maps the same tokens to the same ids as the one saved in ``folder``."""
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save(tmp)
        return _vocabularies(Path(tmp)) == _vocabularies(folder)


def initialise(model: nn.Module, cfg: Config, tokenizer, echo: Callable[[str], Any] = log.warning) -> dict[str, Any]:
    """Load ``cfg.train.init_from``'s weights into ``model``; return what the run record keeps of it.

    Raises:
        ConfigError: no such run or checkpoint, an unreadable one, or weights that do not fit (one line).
    """
    ref = str(cfg.train.init_from)
    path = checkpoint_of(ref)
    try:
        checkpoint = load_checkpoint_file(path)
    except CheckpointError as err:
        raise ConfigError(f"train.init_from: {err}") from None
    weights = {k[len(PREFIX) :]: v for k, v in checkpoint["state_dict"].items() if k.startswith(PREFIX)}
    hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint.get("hyper_parameters"), dict) else {}
    their_cfg = flatten(hparams.get("cfg")) if isinstance(hparams.get("cfg"), dict) else {}
    our_cfg = flatten(to_dict(cfg))
    model_keys = _differing(
        {k: v for k, v in their_cfg.items() if k.startswith("model.")},
        {k: v for k, v in our_cfg.items() if k.startswith("model.")},
    )
    own = model.state_dict()
    unfit = [k for k in own if k not in weights or weights[k].shape != own[k].shape] + [
        k for k in weights if k not in own
    ]
    if unfit:
        keys = model_keys + _differing(their_cfg, our_cfg, VOCAB_KEYS)
        what = ", ".join(keys) if keys else f"parameters {', '.join(unfit[:3])}"
        raise ConfigError(
            f"train.init_from={ref}: its weights do not fit this model ({what} differ); "
            f"use the same model.* keys and vocabulary as that run"
        )
    tok_dir = path.parent.parent / "tokenizer"
    if (tok_dir / "tokenizer.json").is_file():
        if not same_vocabulary(tokenizer, tok_dir):
            keys = _differing(their_cfg, our_cfg, VOCAB_KEYS)
            raise ConfigError(
                f"train.init_from={ref}: its vocabulary is not this run's ({', '.join(keys) or 'the tokenizers'} "
                f"differ): the same ids would mean other tokens; train on the same data.* keys as that run"
            )
    else:
        echo(f"train.init_from: no tokenizer beside {path}; its vocabulary is taken to be this run's")
    model.load_state_dict(weights)
    if model_keys:  # the weights fit, but the model is not quite the same: worth a line
        echo(f"train.init_from: {', '.join(model_keys)} differ from that run (the weights fit)")
    step = checkpoint.get("global_step")
    return {"checkpoint": str(path.resolve()), "step": step if isinstance(step, int) else None}
