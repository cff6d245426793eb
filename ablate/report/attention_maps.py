"""Pictures of what a trained model attends to, and of its positional encodings.

For the Transformer: one figure per attention site (encoder self-attention, masked decoder
self-attention, encoder-decoder attention), a grid of layers x heads. For the RNN: the
alignment matrix of Bahdanau et al. (2015), Figure 3. Plus the positional-encoding matrix
(sinusoidal or learned) as an image, so the two kinds can be compared at a glance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence, cast

import torch
from matplotlib.figure import Figure

from ablate.model.decoding import beam_search
from ablate.model.transformer import Transformer
from ablate.report.figures import check_size
from ablate.report.trials import ReportError
from ablate.training.checkpoints import load_trained, source_limit
from ablate.utils.io import check_apart, output_files

MAX_TOKENS = 100
"""Longest ``--text`` in source subwords: one sentence (Multi30k's longest has about 60)."""
MAX_GRID_INCHES = 60.0
"""Width (and height) of the layers x heads grid of maps, at most: larger maps are drawn smaller."""
DPI = 110


def _pieces(tokenizer, ids: list[int], side: str) -> list[str]:
    table = tokenizer._src if side == "src" else tokenizer._tgt  # noqa: SLF001 - same package family
    return [table.id_to_token(int(i)) or "?" for i in ids]


def cell_inches(tokens: int, heads: int, layers: int) -> float:
    """Side of one map: it grows with its tokens, capped so the layers x heads grid stays drawable."""
    return min(max(1.6, 0.22 * tokens), MAX_GRID_INCHES / max(heads, layers))


def _grid(maps: dict[str, torch.Tensor], keys: list[str], rows: list[str], cols: list[str], title: str, path: Path):
    heads = maps[keys[0]].size(1)
    cell = cell_inches(max(len(rows), len(cols)), heads, len(keys))
    size = (cell * heads + 1, cell * len(keys) + 1)
    check_size(*size, DPI, path.name, f"{len(keys)} layers x {heads} heads")
    fig = Figure(figsize=size)
    axes = fig.subplots(len(keys), heads, squeeze=False)
    small = len(cols) <= 30 and cell >= 2.0  # room for the tokens as tick labels
    for r, key in enumerate(keys):
        for h in range(heads):
            ax = axes[r][h]
            ax.imshow(maps[key][0, h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(cols)), cols if small else [], rotation=90, fontsize=7)
            ax.set_yticks(range(len(rows)), rows if small else [], fontsize=7)
            if r == 0:
                ax.set_title(f"head {h + 1}", fontsize=9)
            if h == 0:
                ax.set_ylabel(f"{key}\nquery", fontsize=8)
            if r == len(keys) - 1:
                ax.set_xlabel("key", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def plot_positions(model, path: Path, length: int = 64) -> Path | None:
    """Image of the positional encoding matrix (positions x dimensions), when the model has one."""
    positions = getattr(model, "positions", None)
    if positions is None:
        return None
    d = getattr(model, "d_model", None) or model.src_embed.weight.size(1)
    length = min(length, getattr(positions, "limit", None) or length)  # learned positions end at model.max_positions
    with torch.no_grad():
        matrix = positions.embed(torch.zeros(1, length, d), 0)[0]
    if not matrix.abs().sum():
        return None
    name = type(positions).__name__.replace("Positions", "").lower()
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    image = ax.imshow(matrix.numpy(), cmap="RdBu", aspect="auto", vmin=-matrix.abs().max(), vmax=matrix.abs().max())
    ax.set_xlabel("embedding dimension")
    ax.set_ylabel("position")
    ax.set_title(f"{name} positional encoding ({length} positions x {d} dimensions)")
    fig.colorbar(image, ax=ax, label="value added to the embedding")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def plot_attention(
    run_dir: str | Path,
    text: str,
    out: str | Path,
    beam: int | None = None,
    plugins: Sequence[str] = (),
    trust_plugins: bool = False,
) -> list[Path]:
    """Translate ``text`` with the run's best model (``beam``: the run's ``eval.beam`` unless given, as
    ``ablate translate``) and draw every attention map; returns the PNGs.

    Raises:
        ReportError: ``text`` is empty or longer than :data:`MAX_TOKENS` subwords, ``beam`` is below 1, or the
            model has neither attention nor positions to draw.
        OutputError: ``out`` is (or lies inside, or contains) ``run_dir``, or cannot be written.
    """
    check_apart(out, [run_dir])
    if beam is not None and beam < 1:
        raise ReportError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
    text = text.strip().removeprefix("\ufeff").strip()  # as translate reads a line: a file's BOM, spaces around
    if not text:
        raise ReportError("--text is empty; pass one sentence to translate and draw")
    if (lines := len(text.split("\n"))) > 1:  # translate reads them as that many sentences
        raise ReportError(f"--text holds {lines} lines; pass one sentence to translate and draw")
    cfg, module, tok = load_trained(run_dir, plugins=plugins, trust_plugins=trust_plugins)
    model = cast(Transformer, module)  # load_trained says nn.Module: every arch has Transformer's interface
    pieces = tok.encode_src([text])[0]
    if len(pieces) > MAX_TOKENS:  # maps are tokens x tokens and decoding grows with them: 600 words took 20 GB
        raise ReportError(
            f"--text is {len(pieces)} subwords long; attention maps are drawn for at most {MAX_TOKENS}: "
            f"pass one sentence"
        )
    src_ids = pieces[: source_limit(model, cfg)] + [tok.eos_id]  # clipped as translate and the test sets are
    src = torch.tensor([src_ids])
    with torch.no_grad():
        e = cfg.eval  # ranked by the run's length penalty, as translate ranks them
        limits = (e.len_penalty, e.max_len_a, e.max_len_b)
        beam = e.beam if beam is None else beam
        hyp = beam_search(model, src, beam, tok.bos_id, tok.eos_id, *limits, length_penalty=e.length_penalty)[0]
        tgt_in = torch.tensor([[tok.bos_id] + hyp])
        maps = model.attention_maps(src, tgt_in)
    src_tokens = _pieces(tok, src_ids, "src")
    tgt_in_tokens = _pieces(tok, tgt_in[0].tolist(), "tgt")
    translation = tok.decode_tgt(hyp)
    groups = {
        "encoder_self": ([k for k in maps if k.startswith("encoder.")], src_tokens, src_tokens),
        "decoder_self": ([k for k in maps if k.endswith(".self")], tgt_in_tokens, tgt_in_tokens),
        "cross": ([k for k in maps if k.endswith("cross")], tgt_in_tokens, src_tokens),
    }
    written: list[str] = []
    with output_files(out, [run_dir]) as tmp:  # every figure drawn, then moved in; an error leaves out as it was
        for name, (keys, rows, cols) in groups.items():
            if keys:
                title = f"{name.replace('_', ' ')} attention | {text!r} -> {translation!r}"
                _grid(maps, keys, rows, cols, title, tmp / f"attention_{name}.png")
                written.append(f"attention_{name}.png")
        if plot_positions(model, tmp / "positions.png") is not None:
            written.append("positions.png")
        if not written:  # the RNN without attention
            m = cfg.model
            raise ReportError(
                f"the run's model (model.arch={m.arch}, model.attention.score={m.attention.score}) has no attention "
                "and no positional encoding: there is nothing to draw"
            )
    return [Path(out) / name for name in written]
