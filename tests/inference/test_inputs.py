"""What translate and evaluate accept: the training's line rules, UTF-8
only, a beam of at least 1 and a checkpoint name that exists; each refusal one line, before any work."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ablate import cli
from ablate.inference import InputError, check_checkpoint, check_decoding, read_sentences, translate as translate_module


def test_only_a_newline_ends_a_sentence():
    raw = "one\x0cstill one\r\ntwo\u2028still two\nthree\x85still three\n".encode()
    assert read_sentences(raw, "x") == ["one\x0cstill one", "two\u2028still two", "three\x85still three"]
    assert read_sentences(b"", "x") == [] and read_sentences(b"\n", "x") == [""]
    assert read_sentences("\ufeffa \n b".encode(), "x") == ["a", "b"]  # BOM and surrounding spaces, as training
    assert read_sentences("\ufeffa\n\ufeffb\n".encode(), "x") == ["a", "b"]  # two BOM files joined with cat


@pytest.mark.parametrize(
    "raw, line, byte",
    [("ok\ncaf\xe9\n".encode("latin-1"), 2, "0xe9"), (b"\x89PNG\r\n\x1a\n\x00\x00", 1, "0x89")],
)
def test_text_that_is_not_utf8_is_refused_naming_the_line(raw, line, byte):
    with pytest.raises(InputError) as err:
        read_sentences(raw, "in.txt")
    assert f"in.txt line {line} is not UTF-8 text (byte {byte}" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "raw, words",
    [
        (
            "a man .\n".encode("utf-16"),
            "in.txt line 1 is not UTF-8 text (byte 0xff at column 1); save it as UTF-8 (e.g. iconv -f utf-16 -t utf-8)",
        ),
        ("a man .\n".encode("utf-16-le"), "in.txt holds NUL bytes (line 1): is it a binary or UTF-16 file?"),
        (b"one .\rtwo .\rthree .\r", "in.txt ends its lines with CR only (old Mac style)"),  # 3 sentences, 1 line
    ],
)
def test_text_a_corpus_could_not_hold_is_refused_as_training_refuses_it(raw, words):
    """A UTF-16 file (Windows' "Unicode") without a BOM was read as UTF-8, its NUL bytes and all, and translated as
    garbage, one line too many; with a BOM it was "not UTF-8 ... (e.g. iconv -f latin1 -t utf-8)"; CR-only line ends
    made one sentence of three. A corpus with either is refused at training, in the same words."""
    with pytest.raises(InputError) as err:
        read_sentences(raw, "in.txt")
    assert str(err.value).startswith(words) and "\n" not in str(err.value)
    assert read_sentences(b"one .\r", "x") == ["one ."]  # a single CR line end is a CRLF file's


def test_decoding_values_and_checkpoint_names():
    check_decoding(1, 0.0)
    check_decoding(None, None)
    for beam in (0, -5):
        with pytest.raises(InputError, match=f"--beam {beam} must be at least 1"):
            check_decoding(beam, None)
    with pytest.raises(InputError, match="--len-penalty nan"):
        check_decoding(2, float("nan"))
    assert check_checkpoint("last") == "last"
    with pytest.raises(InputError, match=r"'lastt' is not a checkpoint name; did you mean 'last'\?"):
        check_checkpoint("lastt")


@pytest.fixture()
def echo_run(monkeypatch):
    """translate's model replaced by one that echoes its sources in brackets: what reaches it is visible."""
    monkeypatch.setattr(translate_module, "load_run", lambda run_dir, which="best", **_: which)
    monkeypatch.setattr(translate_module, "translate", lambda run, sources, *a, **k: [f"[{s}]" for s in sources])


def _invoke(*args, input=None):
    return CliRunner().invoke(cli.app, [str(a) for a in args], input=input)


def _one_line(result, *words):
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    for word in words:
        assert word in result.output


def test_translate_gives_one_output_per_input_line(echo_run, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("a\x0cb\nc\u2028d\ne\x85f\n".encode())
    for result in (_invoke("translate", "run", "--input", path), _invoke("translate", "run", input=path.read_bytes())):
        assert result.exit_code == 0, result.output
        assert result.stdout.split("\n") == ["[a\x0cb]", "[c\u2028d]", "[e\x85f]", ""]


def test_a_translation_holding_a_line_break_is_still_one_line(echo_run):
    """A translation holding a carriage return (a subword learnt from a corpus line with a stray \\r, copied to the
    output) was printed as it was: sacrebleu and any text-mode reader split it in two, so the lines after it were
    scored against the wrong references. translate now writes it as evaluate --hyps and hyps/ do (one_line)."""
    result = _invoke("translate", "run", input=b"a\rb\nc\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == "[a b]\n[c]\n"


def test_translate_refuses_latin1_from_a_file_or_stdin(echo_run, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("un café\n".encode("latin-1"))
    _one_line(_invoke("translate", "run", "--input", path), f"{path} line 1 is not UTF-8")
    _one_line(_invoke("translate", "run", input=path.read_bytes()), "stdin line 1 is not UTF-8")
    _one_line(_invoke("translate", "run", input=b"\x00\xff\xfe binary"), "stdin line 1 is not UTF-8")


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize(
    "args, words",
    [
        (["--beam", "0"], ["--beam 0 must be at least 1"]),
        (["--beam", "-5"], ["--beam -5 must be at least 1"]),
        (["--checkpoint", "lastt"], ["did you mean 'last'"]),
    ],
)
def test_translate_and_evaluate_refuse_the_same_values_before_any_work(command, args, words, tmp_path):
    result = _invoke(command, tmp_path / "not-a-run", *args, input="a\n")
    _one_line(result, *words)


def test_translate_reads_a_pipe_given_as_input(echo_run, tmp_path):
    """``--input <(zcat source.gz)`` or ``--input /dev/stdin`` (a pipe, not a regular file) said "input file not
    found: /dev/fd/63" though it is there; a pipe is read as a file is."""
    fifo = tmp_path / "source.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"a\nb\n",), daemon=True)
    writer.start()
    try:
        result = _invoke("translate", "run", "--input", fifo)
    finally:
        if writer.is_alive():  # refused without reading: release the writer
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    assert result.exit_code == 0, result.output
    assert result.stdout == "[a]\n[b]\n"


def test_translate_input_that_is_a_folder_is_called_a_folder(echo_run, tmp_path):
    """``ablate translate RUN --input DIR`` said "input file not found: DIR" of a folder that exists."""
    _one_line(_invoke("translate", "run", "--input", tmp_path), f"--input {tmp_path} is a folder")
    _one_line(_invoke("translate", "run", "--input", tmp_path / "missing.txt"), "input file not found")


def test_input_dash_is_stdin_and_hyps_dash_is_refused_not_a_file_named_dash(echo_run, tmp_path, monkeypatch):
    """``ablate translate RUN -i -`` (stdin, as fairseq-interactive and sacrebleu read it) said "input file not
    found: -", and ``ablate evaluate RUN --hyps -`` wrote the translations to a file named ``-``."""
    monkeypatch.chdir(tmp_path)
    result = _invoke("translate", "run", "--input", "-", input="a\nb\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == "[a]\n[b]\n"
    _one_line(_invoke("evaluate", "run", "--hyps", "-"), "--hyps - ", "a file name")
    assert not (tmp_path / "-").exists()


def test_evaluate_hyps_inside_the_run_folder_are_refused(tmp_path):
    run = tmp_path / "run"
    (run / "hyps").mkdir(parents=True)
    _one_line(_invoke("evaluate", run, "--hyps", run / "hyps" / "test.txt"), "inside the source")


def test_an_output_file_that_is_a_folder_is_refused_before_the_run_loads(tmp_path, monkeypatch):
    """``evaluate --hyps DIR`` decoded the whole split first (minutes with a beam on a CPU), then said "DIR is an
    existing folder, not a file"; ``export-model --out DIR`` traced and checked the model first (18 s on a tiny run)."""
    monkeypatch.setattr(translate_module, "load_run", lambda *a, **k: pytest.fail("loaded the run"))
    (tmp_path / "out").mkdir()
    run = tmp_path / "run"
    _one_line(_invoke("evaluate", run, "--hyps", tmp_path / "out"), "--hyps ", "is an existing folder, not a file")
    _one_line(_invoke("export-model", run, "--out", tmp_path / "out"), "--out ", "is an existing folder, not a file")


@pytest.mark.parametrize("option", [["--beam", "0"], ["--checkpoint", "lastt"]])
def test_a_bad_option_is_refused_before_the_model_code_loads(option, tmp_path):
    """The input checks cost no torch import: ``ablate translate RUN --beam 0`` is one line at once."""
    import subprocess
    import sys

    probe = (
        "import sys\nfrom ablate.cli import main\nsys.argv = ['ablate', 'translate', sys.argv[1], *sys.argv[2:]]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    print('exit', e.code, 'torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path), *option], capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip().splitlines()[-1] == "exit 2 False", (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and option[0] in done.stderr, done.stderr


def test_translate_reads_a_gzipped_source_as_training_reads_a_corpus(echo_run, tmp_path):
    """A corpus is ``{split}.{lang}[.gz]``, so ``--input test_2016_flickr.en.gz`` is what a user passes: it was refused
    as "line 1 is not UTF-8 text (byte 0x8b ...); save it as UTF-8 (e.g. iconv ...)", advice that does not apply."""
    import gzip

    path = tmp_path / "test.en.gz"
    path.write_bytes(gzip.compress("\ufeffa dog .\ntwo  men \n".encode()))
    for result in (_invoke("translate", "run", "--input", path), _invoke("translate", "run", input=path.read_bytes())):
        assert result.exit_code == 0, result.output
        assert result.stdout == "[a dog .]\n[two  men]\n"
    path.write_bytes(path.read_bytes()[:-6])
    _one_line(_invoke("translate", "run", "--input", path), f"{path} is a damaged gzip file (")


@pytest.mark.parametrize("command", ["translate", "evaluate", "export-model"])
@pytest.mark.parametrize("pick", [["--variant", "big"], ["--seed", "2"]])
def test_variant_or_seed_with_a_wandb_run_is_refused_before_any_download(command, pick, tmp_path, monkeypatch):
    """``ablate export-model wandb:<entity>/<project>/<run> --variant big`` downloaded and exported that run's model,
    ``--variant`` dropped without a word; translate and evaluate called the reference "not a sweep folder"."""
    import wandb

    asked = []

    class Api:  # a local stand-in of the W&B model artifact: any download is recorded, then refused
        def artifact(self, name, type=None):
            asked.append(name)
            raise ValueError(f"artifact '{name}' not found")

    monkeypatch.setattr(wandb, "Api", Api)
    out = ["--out", tmp_path / "m.pt"] if command == "export-model" else []
    result = _invoke(command, "wandb:me/proj/r1", *pick, *out, input="a\n")
    _one_line(result, f"{pick[0]} picks a trial of a sweep folder, not of the W&B run wandb:me/proj/r1")
    assert asked == [] and not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("command", ["translate", "evaluate", "export-model"])
def test_the_last_checkpoint_of_a_wandb_run_is_refused_before_any_download(command, echo_run, tmp_path, monkeypatch):
    """The W&B model artifact holds best.ckpt alone (``tracking.checkpoint_artifact``), so ``ablate translate
    wandb:... --checkpoint last`` downloaded it and translated with best.ckpt after a warning: not the model asked
    for. It is one line now, before the download."""
    import wandb

    asked = []

    class Api:  # serves the artifact as training logs it: config.yaml, tokenizer/ and checkpoints/best.ckpt
        def artifact(self, name, type=None):
            asked.append(name)

            class Artifact:
                def download(self, root):
                    for file in ("config.yaml", "tokenizer/tokenizer.json", "checkpoints/best.ckpt"):
                        (Path(root) / file).parent.mkdir(parents=True, exist_ok=True)
                        (Path(root) / file).write_text("")
                    return root

            return Artifact()

    monkeypatch.setattr(wandb, "Api", Api)
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    out = ["--out", tmp_path / "m.pt"] if command == "export-model" else []
    result = _invoke(command, "wandb:me/proj/r1", "--checkpoint", "last", *out, input="a\n")
    _one_line(result, "--checkpoint last: the W&B model artifact of wandb:me/proj/r1 holds best.ckpt alone")
    assert asked == [] and not (tmp_path / "m.pt").exists()
