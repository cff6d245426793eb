"""Translate text and score test sets with a trained run, through the training code itself.

The model comes back with ``TranslationModule.load_from_checkpoint`` (what is decoded is exactly the
module training tested); sources are segmented by the run's tokenizer and clipped to ``data.max_len`` as
the test sets were; decoding is the module's ``translate`` and batches follow the test decoding's rule
(:func:`ablate.data.datamodule.eval_batches`)."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import pyarrow as pa
import torch

from ablate.config import Config, ConfigError
from ablate.data.tokenizer import SubwordTokenizer
from ablate.inference import InputError, check_checkpoint
from ablate.training.checkpoints import source_limit, trained_run, unfit
from ablate.training.module import Scores, TranslationModule, corpus_scores

log = logging.getLogger(__name__)


@dataclass
class LoadedRun:
    """A trained run ready to decode: its module (eval mode), tokenizer and config."""

    module: Any
    tokenizer: SubwordTokenizer
    cfg: Config
    checkpoint: Path


def load_run(
    run_dir: str | Path,
    which: str = "best",
    device: str = "cpu",
    plugins: Sequence[str] = (),
    trust_plugins: bool = False,
) -> LoadedRun:
    """The module of ``run_dir``'s ``<which>.ckpt`` (else the other checkpoint, with a warning), its tokenizer and
    config, as :func:`~ablate.training.checkpoints.trained_run` finds them (plugins, errors); InputError for a
    ``which`` other than best or last."""
    run_dir = Path(run_dir)
    check_checkpoint(which)  # never a silent fall back to best for a misspelt name
    cfg, path, checkpoint = trained_run(run_dir, which, plugins, trust_plugins)  # config.yaml, not the checkpoint's
    saved = found if isinstance(found := checkpoint.get("hyper_parameters"), dict) else {}
    known = inspect.signature(TranslationModule).parameters  # Lightning's loader passes on these, as here
    kwargs = {**{k: v for k, v in saved.items() if k in known}, "cfg": cfg, "trust_plugins": trust_plugins}
    try:
        module = TranslationModule(**kwargs)
        module.on_load_checkpoint(checkpoint)
        module.load_state_dict(checkpoint["state_dict"])
    except (RuntimeError, KeyError, TypeError) as err:
        raise unfit(path, run_dir, err, checkpoint, cfg) from None
    module.to(device)
    tok = SubwordTokenizer.load(run_dir / "tokenizer")
    module.detokenize = tok.decode_tgt
    module.eval()
    if path.stem != which:  # trained_run falls back to the other checkpoint: never without a word
        log.warning("%s holds no %s.ckpt: using %s", path.parent, which, path.name)
    _say_untested_step(run_dir, path)
    return LoadedRun(module, tok, module.cfg, path)


def _say_untested_step(run_dir: Path, path: Path) -> None:
    """One status line when ``best.ckpt`` holds another step than the one the run tested: its last write
    failed (a full disk) after the test, so the scores the record shows are not this model's."""
    from ablate.record import TESTED_STEP, RunSummary

    summary = RunSummary.peek(run_dir)
    saved = summary.checkpoint(path.name) if summary is not None and path.name == "best.ckpt" else None
    tested = summary.number(TESTED_STEP.key) if summary is not None else None
    if saved is None or saved.step is None or tested is None or saved.step == int(tested):
        return
    log.warning(
        "using best.ckpt from step %d, not step %d that the run tested (that write failed: see "
        "checkpoint_failures in summary.json)",
        saved.step,
        int(tested),
    )


def _batch(ids: list[list[int]], device: torch.device) -> torch.Tensor:
    """``(B, S + 1)`` source rows with EOS appended, right-padded, as the data module pads them."""
    from ablate.data.datamodule import pad_rows

    return pad_rows(pa.array(ids, type=pa.list_(pa.int64())), bos=False).to(device)


@torch.no_grad()
def translate(
    run: LoadedRun,
    sources: list[str],
    beam: Optional[int] = None,
    len_penalty: Optional[float] = None,
    target_lengths: Optional[Iterable[int]] = None,
) -> list[str]:
    """Detokenized translations of ``sources`` as given (a corpus's, as the test decoding read them; ``ablate
    translate`` and ``TrainResult.translate`` strip each line first), in order; ``beam`` and ``len_penalty``
    default to ``eval.*``.
    ``target_lengths``: the references' subword lengths, when known, so the batches are exactly the test
    decoding's (which packs by the longer side)."""
    from ablate.data.datamodule import eval_batches

    if not sources:
        return []
    cfg, module = run.cfg, run.module
    ids = run.tokenizer.encode_src([text or "" for text in sources])
    limit = source_limit(module.model, cfg)
    if clipped := sum(len(s) > limit for s in ids):
        what, why = f"data.max_len={limit} subwords", "as the test sets were"
        if limit < cfg.data.max_len:
            what = f"the {limit} subwords this model reads"
            why = (
                f"its positions end at model.max_positions={cfg.model.max_positions}; split them to translate the rest"
            )
        log.warning(
            f"{clipped} of {len(ids)} sentences longer than {what}: only their first {limit} are translated ({why})"
        )
    ids = [s[:limit] for s in ids]
    src_lens = [len(s) for s in ids]
    tgt_lens = list(target_lengths) if target_lengths is not None else src_lens
    beam = cfg.eval.beam if beam is None else beam
    out = [""] * len(sources)
    for batch in eval_batches(src_lens, tgt_lens, cfg.train.max_tokens, cfg.eval.max_sentences):
        hyps = module.translate(_batch([ids[i] for i in batch], module.device), beam, len_penalty)
        for i, hyp in zip(batch, hyps):
            out[i] = module.detokenize(hyp)
    return out


def load_split(run: LoadedRun, source: Optional[str], split: Optional[str]) -> tuple[str, list[str], list[str]]:
    """``(split name, sources, references)`` of ``split`` of ``source`` (``data.source`` syntax; default: the run's
    data), read as training reads it, in the run's language pair. A folder's split is read alone, whatever its name
    (no train split needed); without ``split``, its first test set (:func:`~ablate.data.sources.scored_split`), the
    others named in a line; another source's first test split, else its validation split."""
    from ablate.data.sources import FALLBACK, LocalFolder, canonical_split, make_source, scored_split, source_kind
    from ablate.utils.io import cache_root

    data = run.cfg.data if source is None else dataclasses.replace(run.cfg.data, source=source)
    local = source_kind(data.source) == FALLBACK
    if source is None and not local:
        _check_hub_folder(run, data.source)
    if local:
        _check_folder(data.source, given=source is not None)
        if not split:
            split, others = scored_split(data)
            if others:
                sets = f"{data.src_lang}-{data.tgt_lang} test set{'s' if len(others) > 1 else ''} {', '.join(others)}"
                log.info("%s also holds the %s: --split NAME scores one", data.source, sets)
    with tempfile.TemporaryDirectory(prefix="ablate-evaluate-") as tmp:
        if local and split:
            splits, name = LocalFolder(data, cache_root(data.cache_dir), only=split).read(Path(tmp))[0], split
        else:
            corpus = make_source(data, cache_root(data.cache_dir)).load(Path(tmp))
            first = corpus.test_splits[0] if corpus.test_splits else corpus.val_split
            splits, name = corpus.splits, (canonical_split(split) or split) if split else first  # validation: val
        if name not in splits:
            raise ConfigError(f"no split '{name}' in {data.source} (have: {', '.join(sorted(splits))})")
        ds = splits[name]
        sources, references = ([text or "" for text in ds[side]] for side in ("src", "tgt"))  # null: "", as training
        return name, sources, references


def _check_folder(folder: str, given: bool) -> None:
    """InputError unless ``folder`` (``--data``, or the run's ``data.source`` when ``given`` is false) is a folder
    from here; the run's own names ``--data``, since a relative one was relative to where the run trained."""
    if Path(folder).expanduser().is_dir():
        return
    if given:
        raise InputError(
            f"--data {folder} is not a folder; give 'builtin', 'hf:<dataset>[:<config>]' or a folder of "
            "{split}.{lang}[.gz] files"
        )
    if Path(folder).expanduser().is_absolute():
        where = "is not a folder on this machine"
    else:
        where = f"is relative to where the run trained, and not a folder from {Path.cwd()}"
    raise InputError(
        f"the run's corpus {folder} (its data.source) {where}; pass --data FOLDER (and --split NAME) to score a "
        "corpus from here"
    )


def _check_hub_folder(run: LoadedRun, source: str) -> None:
    """InputError where the run's ``hf:<folder>`` was a local folder where it trained (its record says which) and
    is not one from here: read from here, it would name a hub dataset."""
    from ablate.data.sources import parse_hub_source
    from ablate.record import RunSummary

    name = parse_hub_source(source)[0] if source.startswith("hf:") else ""
    summary = RunSummary.peek(run.checkpoint.parent.parent)
    data = summary.get("data") if summary is not None else None
    recorded = data.get("source") if isinstance(data, dict) else None
    folder = recorded.get("folder") if isinstance(recorded, dict) else None
    if not name or not isinstance(folder, str) or Path(name).expanduser().is_dir():
        return
    raise InputError(
        f"the run's corpus {source} (its data.source) is the folder {folder} where the run trained, relative to "
        f"there and not a folder from {Path.cwd()}; pass --data hf:{folder} (and --split NAME) to score it from here"
    )


def evaluate(
    run: LoadedRun,
    sources: list[str],
    references: list[str],
    beam: Optional[int] = None,
    len_penalty: Optional[float] = None,
) -> tuple[Scores, list[str]]:
    """sacreBLEU scores of the run's translations of ``sources`` against ``references``."""
    lengths = [min(len(t), run.cfg.data.max_len) for t in run.tokenizer.encode_tgt([r or "" for r in references])]
    hyps = translate(run, sources, beam, len_penalty, target_lengths=lengths)
    return corpus_scores(hyps, references), hyps
