"""``ablate attention``: the work one ``--text`` can cause is bounded (600 words grew to
20.5 GB), the figure size too, and the figures land whole, never inside the run folder."""

from __future__ import annotations

import shutil

import datasets
import pytest
import torch
import yaml
from typer.testing import CliRunner

from ablate.config import load_config, to_dict
from ablate.data.tokenizer import SubwordTokenizer
from ablate.model.build import build_model
from ablate.report import attention_maps as attention, figures as figure_style
from ablate.report.trials import ReportError

from tests.helpers.tiny import MODEL

WORDS = [f"w{i}" for i in range(40)]


def _untrained(folder, *overrides: str):
    """An untrained tiny run folder: config.yaml, tokenizer and a checkpoint, as `ablate train` leaves them."""
    text = [" ".join(WORDS[i : i + 5]) for i in range(35)]
    tok = SubwordTokenizer.train(datasets.Dataset.from_dict({"src": text, "tgt": text}), vocab_size=80)
    tok.save(folder / "tokenizer")
    cfg = load_config(None, [*MODEL, "eval.max_len_a=1.0", "eval.max_len_b=2", *overrides])
    (folder / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    (folder / "checkpoints").mkdir()
    torch.save(
        {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, folder / "checkpoints" / "best.ckpt"
    )
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _untrained(tmp_path_factory.mktemp("attention") / "run")


def test_a_model_with_nothing_to_draw_is_one_line_not_an_empty_success(tmp_path):
    """``ablate attention`` on the RNN without attention (the no-attention row of sweeps/mission-cpu.yaml) exited 0
    having printed and written nothing: no maps, and the RNN has no positional encoding to draw either."""
    rnn = _untrained(tmp_path / "rnn", "model.arch=rnn", "model.attention.score=none", "model.rnn.hidden=16")
    with pytest.raises(ReportError, match=r"^the run's model \(model.arch=rnn, model.attention.score=none\) has no "):
        attention.plot_attention(rnn, "w1 w2", tmp_path / "pics", beam=1)
    assert not (tmp_path / "pics").exists()


def test_a_sentence_is_drawn(run, tmp_path):
    paths = attention.plot_attention(run, "w1 w2 w3", tmp_path / "pics", beam=1)
    assert [p.name for p in paths][:2] == ["attention_encoder_self.png", "attention_decoder_self.png"]
    assert all(p.is_file() for p in paths) and sorted(p.name for p in (tmp_path / "pics").iterdir()) == sorted(
        p.name for p in paths
    )


def test_learned_positions_shorter_than_the_drawing_are_drawn_where_they_end(tmp_path):
    """``ablate attention`` on any run with model.positions=learned and model.max_positions below 64 failed, whatever
    the text: "sequence reaches position 64 ... raise model.max_positions" (the positions figure draws 64)."""
    cfg = load_config(None, [*MODEL, "model.positions=learned", "model.max_positions=20"])
    model = build_model(cfg.model, 50, 50)
    assert attention.plot_positions(model, tmp_path / "positions.png") == tmp_path / "positions.png"
    assert (tmp_path / "positions.png").stat().st_size > 0


def test_a_text_longer_than_the_limit_is_one_line_before_any_decoding(run, tmp_path, monkeypatch):
    monkeypatch.setattr(attention, "beam_search", lambda *a, **k: pytest.fail("decoded a text over the limit"))
    text = " ".join(WORDS[i % 40] for i in range(600))  # 600 words
    from ablate import cli

    result = CliRunner().invoke(cli.app, ["attention", str(run), "--text", text, "--out", str(tmp_path / "pics")])
    assert result.exit_code == 2, result.output
    assert (
        result.output.startswith("error: --text is ")
        and "subwords long; attention maps are drawn for at most 100" in result.output
    )
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "pics").exists()


def test_the_grid_of_maps_stays_drawable_whatever_the_length():
    assert attention.cell_inches(10, 4, 3) == 2.2  # a sentence: as before
    for tokens, heads, layers in ((160, 4, 3), (1000, 8, 6), (100, 64, 2)):  # 0.22 in a token: 35 in a map at 160
        side = attention.cell_inches(tokens, heads, layers) * max(heads, layers) + 1
        assert side <= attention.MAX_GRID_INCHES + 1
        figure_style.check_size(side, side, attention.DPI, "a.png", "-")  # within the pixel limits


def test_a_figure_over_the_pixel_limit_is_refused_naming_the_limit():
    with pytest.raises(ReportError, match=r"would be 130,000 x 390 pixels, over the limit of 16,384 a side") as err:
        figure_style.check_size(1000, 3, 130, "test_bleu.png", "too many rows: plot fewer variants")
    assert "too many rows" in str(err.value)
    figure_style.check_size(8, 40, 130, "test_bleu.png", "-")  # 1,040 x 5,200: fine


def test_a_sweep_figure_too_tall_to_draw_is_refused_before_drawing(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, figure_style.row_height(1000)), dpi=figure_style.DPI)  # a sweep of 1000 rows
    with pytest.raises(ReportError, match="test_bleu.png would be 1,040 x 39,234 pixels"):
        figure_style.save(fig, tmp_path / "test_bleu.png")
    assert list(tmp_path.iterdir()) == []


def test_figures_are_never_written_into_the_run_folder(run):
    from ablate.utils.io import OutputError

    with pytest.raises(OutputError, match="inside the source"):
        attention.plot_attention(run, "w1", run / "pics")
    assert not (run / "pics").exists()


def test_a_beam_below_one_is_refused(run, tmp_path):
    with pytest.raises(ReportError, match="--beam 0 must be at least 1"):
        attention.plot_attention(run, "w1", tmp_path / "pics", beam=0)


@pytest.mark.parametrize("text", ["a man\nthe dog", "a man\r\nthe dog\n\nrides"])
def test_a_text_of_several_lines_is_refused_not_drawn_as_one_sentence(run, tmp_path, text):
    """``ablate attention RUN --text "$(cat two-lines.txt)"`` drew both lines as one sentence, the line break a
    subword between them, though ``translate`` reads them as two sentences."""
    with pytest.raises(ReportError, match=r"^--text holds \d lines; pass one sentence"):
        attention.plot_attention(run, text, tmp_path / "pics")
    assert not (tmp_path / "pics").exists()


def _copy_with(run, tmp_path, section, **values):
    """A copy of ``run`` whose config.yaml has ``values`` in ``section``."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg[section].update(values)
    (copy / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return copy


def test_a_text_longer_than_data_max_len_is_clipped_there_as_translate_clips_it(run, tmp_path, monkeypatch):
    """``ablate attention`` clipped the text only where model.max_positions ends, so a text longer than data.max_len
    (but within the 100-subword limit) was decoded whole, and drawn with another translation than ``ablate translate``
    (which clips it to data.max_len, as the test sets were) gives."""
    clipped = _copy_with(run, tmp_path, "data", max_len=4)
    decoded = []
    search = attention.beam_search
    monkeypatch.setattr(
        attention, "beam_search", lambda model, src, *a, **k: decoded.append(src) or search(model, src, *a, **k)
    )
    attention.plot_attention(clipped, " ".join(WORDS[:10]), tmp_path / "pics", beam=1)
    assert decoded[0].shape == (1, 5)  # the first 4 subwords, then EOS


def test_the_translation_drawn_is_ranked_by_the_runs_length_penalty(run, tmp_path, monkeypatch):
    """``ablate attention`` ran beam search with the fairseq length penalty whatever the run's eval.length_penalty, so
    a run with eval.length_penalty=gnmt was drawn with another translation than ``ablate translate`` gives."""
    gnmt = _copy_with(run, tmp_path, "eval", length_penalty="gnmt", len_penalty=0.6)
    asked = []
    search = attention.beam_search
    monkeypatch.setattr(attention, "beam_search", lambda *a, **k: asked.append((a[5], k)) or search(*a, **k))
    attention.plot_attention(gnmt, "w1 w2 w3", tmp_path / "pics", beam=2)
    assert asked == [(0.6, {"length_penalty": "gnmt"})]


def test_the_text_is_read_as_translate_reads_a_line(run, tmp_path, monkeypatch):
    """``--text "w1 w2 "`` (a trailing space, or a newline from ``"$(cat file)"``-like quoting) was segmented as it was:
    a trailing '▁' piece the model never saw in training, which strips every corpus line and every translate input,
    so the map drawn was of another input than ``ablate translate`` decodes. A BOM (``"$(cat file)"`` of a file
    saved with one, which ``translate -i`` drops) reached the tokenizer as an <unk> subword."""
    decoded = []
    search = attention.beam_search
    monkeypatch.setattr(
        attention, "beam_search", lambda model, src, *a, **k: decoded.append(src) or search(model, src, *a, **k)
    )
    for text in ("w1 w2", " w1 w2 \n", "\ufeffw1 w2\r\n"):
        attention.plot_attention(run, text, tmp_path / "pics", beam=1)
    assert decoded[0].tolist() == decoded[1].tolist() == decoded[2].tolist()
    with pytest.raises(ReportError, match="^--text is empty"):
        attention.plot_attention(run, "\ufeff\n", tmp_path / "pics")


def test_the_translation_drawn_is_the_runs_beam_unless_asked(run, tmp_path, monkeypatch):
    """``ablate attention`` decoded with beam 5 whatever the run's eval.beam, so a run tested with beam 4 (the paper's)
    was drawn with another translation than ``ablate translate`` gives; an empty --text was drawn as the maps of EOS."""
    four = _copy_with(run, tmp_path, "eval", beam=4)
    beams = []
    search = attention.beam_search
    monkeypatch.setattr(attention, "beam_search", lambda *a, **k: beams.append(a[2]) or search(*a, **k))
    attention.plot_attention(four, "w1 w2 w3", tmp_path / "pics")
    attention.plot_attention(four, "w1 w2 w3", tmp_path / "pics", beam=1)
    assert beams == [4, 1]
    for text in ("", " \n"):
        with pytest.raises(ReportError, match="^--text is empty; pass one sentence to translate and draw$"):
            attention.plot_attention(four, text, tmp_path / "pics")
    assert beams == [4, 1]
