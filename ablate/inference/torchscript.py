"""A trained run as one TorchScript file that ``torch.jit.load`` runs without ablate (``ablate export-model``).

The model's own ``encode`` and ``decode`` are traced, not rewritten, in three parts: ``encoder`` (``src (B, S)
-> enc``), ``first`` (``(BOS (B, 1), enc) -> (logits (B, V), state)``) and ``step`` (``(last token (B, 1), enc,
state) -> (logits, state)``), with ``enc`` and ``state`` as flat lists of tensors (:func:`_flatten`); a scripted
loop (:class:`GreedyTranslator`) runs them as :func:`ablate.model.decoding.greedy` does. Tracing keeps one path
through Python branches, so :func:`export` checks the file against ``greedy`` on other shapes and refuses one
that disagrees. The tokenizers, ``config.yaml`` and ``export.json`` travel as extra files (:data:`FILES`)."""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path
from typing import Any, Callable, List, Optional, cast

import torch
import yaml
from torch import Tensor, nn
from torch.utils import _pytree as pytree

from ablate.config import to_dict
from ablate.errors import AblateError, did_you_mean, first_line
from ablate.inference.translate import LoadedRun
from ablate.model.decoding import greedy
from ablate.training.checkpoints import source_limit
from ablate.utils import io
from ablate.utils.commands import jit_export

FORMATS = ("torchscript",)
"""What ``ablate export-model --format`` writes."""

NOT_SUPPORTED = {
    "onnx": "ONNX export is not supported: an ONNX graph has no place for ablate's greedy loop (it stops each "
    "sentence at EOS and grows per-layer caches every step), which would be rewritten outside ablate; "
    "use --format torchscript",
    "ctranslate2": "CTranslate2 export is not supported: CTranslate2 only knows its own Transformer layout, "
    "not ablate's attention scores and position variants; use --format torchscript",
}
"""Formats users ask for that ablate does not write, and why."""

FILES = ("source_tokenizer.json", "target_tokenizer.json", "config.yaml", "export.json")
"""The extra files of an exported model (``torch.jit.load(path, _extra_files=dict.fromkeys(FILES, ""))``)."""

VERSION = 1
"""Of ``export.json`` and the methods of the exported module."""


class ExportError(AblateError):
    """A model or format that cannot be exported; the message names the part and what to do."""


def check_format(name: str) -> str:
    """``name`` when ablate writes that format; ExportError why not (:data:`NOT_SUPPORTED`) or the closest one."""
    if name in FORMATS:
        return name
    if name.lower() in NOT_SUPPORTED:
        raise ExportError(NOT_SUPPORTED[name.lower()])
    raise ExportError(
        f"--format {name!r} is unknown{did_you_mean(name, [*FORMATS, *NOT_SUPPORTED], cutoff=0.5)} "
        f"(ablate writes: {', '.join(FORMATS)})"
    )


# --- enc / state as flat lists of tensors -----------------------------------------------------


def _flatten(tree: Any, where: str) -> tuple[list[Tensor], Any]:
    """The leaves of ``tree`` as tensors, and the spec :func:`_unflatten` rebuilds it from (an ``int`` ``n``
    becomes an empty ``(0, n)`` tensor whose width traces as a size)."""
    found, tree_spec = pytree.tree_flatten_with_path(tree)
    leaves, sizes = [], []
    for path, leaf in found:
        size = not (isinstance(leaf, Tensor) and leaf.dim() > 0)  # every tensor of enc and state has the batch in dim 0
        if size and not isinstance(leaf, Tensor) and (not isinstance(leaf, int) or isinstance(leaf, bool)):
            kind = type(leaf).__name__
            raise ExportError(
                f"cannot export {where}{pytree.keystr(path)}: a {kind} where the export needs tensors or ints"
            )
        leaves.append(torch.zeros([0, cast(int, leaf)]) if size else leaf)  # a 0-dim tensor: an int size while tracing
        sizes.append(size)
    return leaves, (tree_spec, sizes)


def _unflatten(spec: Any, leaves: list[Tensor]) -> Any:
    """The tree of ``spec`` (:func:`_flatten`'s) from ``leaves``."""
    tree_spec, sizes = spec
    return pytree.tree_unflatten([leaf.size(1) if size else leaf for leaf, size in zip(leaves, sizes)], tree_spec)


class _Encode(nn.Module):
    """``src -> leaves of model.encode(src)`` (what is traced)."""

    model: Any  # a Seq2Seq (ablate.model.decoding)

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.spec: Any = None

    def forward(self, src: Tensor) -> list[Tensor]:
        leaves, self.spec = _flatten(self.model.encode(src), "the encoder's output")
        return leaves


class _Decode(nn.Module):
    """One decoder call on flat ``enc`` (and ``state``, none for the first): ``(logits (B, V) of the last position, state leaves)``."""

    model: Any  # a Seq2Seq (ablate.model.decoding)

    def __init__(self, model: nn.Module, enc_spec: Any, state_spec: Any = None):
        super().__init__()
        self.model, self.enc_spec, self.state_spec = model, enc_spec, state_spec
        self.out_spec: Any = None

    def forward(
        self, tokens: Tensor, enc: list[Tensor], state: Optional[list[Tensor]] = None
    ) -> tuple[Tensor, list[Tensor]]:
        prior = None if state is None else _unflatten(self.state_spec, state)
        logits, new = self.model.decode(tokens, _unflatten(self.enc_spec, enc), prior)
        leaves, self.out_spec = _flatten(new, "the decoder's state")
        return logits[:, -1], leaves


class GreedyTranslator(nn.Module):
    """Greedy decoding around the traced parts, scripted: :func:`ablate.model.decoding.greedy` step for step.
    Sources are clipped to ``max_len`` (``data.max_len``, or less where learned positions end), outputs limited to
    ``max_len_a * source_length + max_len_b`` (``eval.*``) and to ``max_output`` (the model's, -1: none); special ids
    are the target side's (the same on both sides); a source id outside ``[0, src_vocab)`` is refused naming the
    size."""

    def __init__(
        self,
        encoder: nn.Module,
        first: nn.Module,
        step: nn.Module,
        pad_id: int,
        bos_id: int,
        eos_id: int,
        max_len: int,
        max_len_a: float,
        max_len_b: int,
        max_output: int = -1,
        src_vocab: int = -1,
    ):
        super().__init__()
        self.encoder, self.first, self.step = encoder, first, step
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.max_len, self.max_len_a, self.max_len_b = max_len, max_len_a, max_len_b
        self.max_output, self.src_vocab = max_output, src_vocab

    def forward(self, src: Tensor) -> Tensor:
        """(B, S) right-padded source ids, each row ending in EOS -> (B, T) ids, padded after EOS; a row that starts
        with EOS (an empty source) stays empty, as ``ablate translate`` keeps an empty line empty."""
        with torch.no_grad():  # the loaded file's weights require grad: its traced in-place ReLU fails on a 2nd call
            B = src.size(0)
            outside = src.lt(0) | src.ge(self.src_vocab)
            if self.src_vocab >= 0 and bool(outside.any()):
                bad = int(src[outside][0].item())
                raise ValueError(
                    "source id " + str(bad) + " is outside the source vocabulary of " + str(self.src_vocab) + " ids "
                    "(0 to " + str(self.src_vocab - 1) + "); encode sentences with this file's source_tokenizer.json"
                )
            src_len = src.ne(self.pad_id).sum(1).float()
            limit = (self.max_len_a * src_len + self.max_len_b).floor().long().clamp(min=0)
            if self.max_output >= 0:
                limit = limit.clamp(max=self.max_output)
            tokens = torch.full([B, 1], self.bos_id, dtype=src.dtype, device=src.device)
            if B == 0:
                return tokens[:, 1:]
            enc = self.encoder(src)
            done = limit.eq(0) | src[:, 0].eq(self.eos_id)
            state: List[Tensor] = []
            for i in range(int(limit.max().item())):
                if bool(done.all()):
                    break
                if i == 0:
                    logits, state = self.first(tokens, enc)
                else:
                    logits, state = self.step(tokens[:, -1:], enc, state)
                lprobs = torch.log_softmax(logits.float(), dim=-1)
                lprobs[:, self.pad_id] = float("-inf")
                if self.bos_id != self.pad_id:
                    lprobs[:, self.bos_id] = float("-inf")
                nxt = lprobs.argmax(-1).masked_fill(done, self.pad_id)
                tokens = torch.cat((tokens, nxt.unsqueeze(1)), dim=1)
                done = done | nxt.eq(self.eos_id) | limit.le(i + 1)
            return tokens[:, 1:]

    @torch.jit.export
    def translate(self, sources: List[List[int]]) -> List[List[int]]:
        """Target ids (no BOS/EOS) of source subword ids (no specials), in one batch, in order (:meth:`forward`)."""
        if len(sources) == 0:
            return []
        clipped = [s[: self.max_len] for s in sources]
        src = torch.full([len(clipped), max([len(s) + 1 for s in clipped])], self.pad_id, dtype=torch.long)
        for i, s in enumerate(clipped):
            if len(s) > 0:
                src[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            src[i, len(s)] = self.eos_id
        rows: List[List[int]] = self.forward(src).tolist()
        out: List[List[int]] = []
        for row in rows:
            ids: List[int] = []
            for tok in row:
                if tok == self.eos_id or tok == self.pad_id:
                    break
                ids.append(tok)
            out.append(ids)
        return out


def _example(vocab: int, lengths: list[int], pad: int, eos: int, seed: int) -> Tensor:
    """(B, max + 1) right-padded sources of ``lengths`` ordinary ids, each ending in EOS."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths) + 1), pad, dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(4, max(vocab, 5), (n,), generator=gen)
        src[i, n] = eos
    return src


def _jit(doing: str, compile: Callable[[], Any]) -> Any:
    """``compile()``, a trace or a script, its warnings silenced; any failure an ExportError: ``cannot <doing>``."""
    try:
        with jit_export():  # TracerWarnings, and torch.jit's deprecation notice
            return compile()
    except ExportError:
        raise
    except Exception as err:  # noqa: BLE001 - any failure inside tracing is reported as the part that failed
        raise ExportError(f"cannot {doing} ({first_line(err)[:160]})") from None


def _trace(part: str, what: str, module: nn.Module, inputs: tuple) -> Any:
    trace = lambda: torch.jit.trace(module, inputs, check_trace=False, strict=False)
    return _jit(f"trace {part} of {what} for TorchScript", trace)


def describe(run: LoadedRun) -> str:
    """The model variant in words that name the config keys a user would change."""
    m = run.cfg.model
    att = m.attention
    parts = [f"model.arch={m.arch}", f"model.attention.score={att.score}"]
    if att.cross_score:
        parts.append(f"model.attention.cross_score={att.cross_score}")
    if m.arch == "transformer":
        parts.append(f"model.positions={m.positions}")
    return ", ".join(parts)


def script(run: LoadedRun) -> torch.jit.ScriptModule:
    """The run's model and greedy decoding as one scripted module; ExportError when a part cannot be traced
    or scripted (naming it), or the result disagrees with :func:`ablate.model.decoding.greedy`."""
    model, tok, cfg = run.module.model.cpu().eval(), run.tokenizer, run.cfg
    what = describe(run)
    pad, bos, eos = tok.pad_id, tok.bos_id, tok.eos_id
    a, b = cfg.eval.max_len_a, cfg.eval.max_len_b
    src = _example(tok.src_vocab_size, [5, 3], pad, eos, seed=0)
    with torch.no_grad():
        encode = _Encode(model)
        enc = encode(src)
        encoder = _trace("the encoder", what, encode, (src,))
        tokens = torch.full((src.size(0), 1), bos, dtype=torch.long)
        first_call = _Decode(model, encode.spec)
        _, state = first_call(tokens, enc)
        first = _trace("the first decoder step", what, first_call, (tokens, enc))
        step_call = _Decode(model, encode.spec, first_call.out_spec)
        _, state = step_call(tokens, enc, state)  # a state of two positions: a cache longer than one
        step = _trace("the decoder step", what, step_call, (tokens, enc, state))
        cap = getattr(model, "max_output", None)
        limits = (source_limit(model, cfg), a, b, -1 if cap is None else cap, tok.src_vocab_size)
        loop = GreedyTranslator(encoder, first, step, pad, bos, eos, *limits)
        scripted = _jit(f"script the greedy decoding loop around {what}", lambda: torch.jit.script(loop))
        check = _example(tok.src_vocab_size, [2, 9, 6, 1], pad, eos, seed=1)  # other batch size and lengths
        ours = greedy(model, check, bos, eos, a, b)
        theirs = [[t for t in row if t != pad] for row in scripted(check).tolist()]
        theirs = [row[: row.index(eos)] if eos in row else row for row in theirs]
        if ours != theirs:
            raise ExportError(
                f"the traced model of {what} decodes differently from ablate's greedy decoding, so it is not "
                f"exported; translate with `ablate translate --beam 1` instead"
            )
    return scripted


def extra_files(run: LoadedRun) -> dict[str, str]:
    """The :data:`FILES` of ``run``'s export: tokenizers, config, and ``export.json``."""
    source, target = run.tokenizer.to_json()
    tok, cfg = run.tokenizer, run.cfg
    meta = {
        "version": VERSION,
        "format": "torchscript",
        "decoding": "greedy",
        "pad_id": tok.pad_id,
        "bos_id": tok.bos_id,
        "eos_id": tok.eos_id,
        "max_len": source_limit(run.module.model, cfg),
        "max_len_a": cfg.eval.max_len_a,
        "max_len_b": cfg.eval.max_len_b,
        "checkpoint": run.checkpoint.name,
        "model": describe(run),
        "torch": torch.__version__,
    }
    return {
        "source_tokenizer.json": source,
        "target_tokenizer.json": target,
        "config.yaml": yaml.safe_dump(to_dict(cfg), sort_keys=False),
        "export.json": json.dumps(meta, indent=2),
    }


def export(run: LoadedRun, out: Path) -> Path:
    """Write ``run`` as a TorchScript file at ``out`` atomically (a failed export leaves no file); ExportError for
    weights that are not finite (a diverged run) or an ``out`` that cannot be written."""
    broken = [name for name, weight in run.module.model.state_dict().items() if not torch.isfinite(weight).all()]
    if broken:
        raise ExportError(
            f"{run.checkpoint.name} holds NaN or infinite weights ({len(broken)} tensors, e.g. {broken[0]}): "
            "the run diverged; export another checkpoint (--checkpoint last or best) or retrain"
        )
    files = {name: text.encode("utf-8") for name, text in extra_files(run).items()}
    buffer = BytesIO()
    torch.jit.save(script(run), buffer, _extra_files=files)
    try:
        io.atomic_write_bytes(out, buffer.getvalue())
    except OSError as err:
        raise ExportError(f"cannot write {out}: {err.strerror or err}; choose another --out") from None
    return out
