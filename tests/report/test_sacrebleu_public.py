"""ablate uses sacreBLEU's public API only: a private member can change or vanish in
any sacreBLEU release (``_extract_corpus_statistics`` and ``_force`` were used once), and each metric's
reproducibility signature is recorded."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sacrebleu

from ablate.training.module import corpus_scores

PACKAGE = Path(__file__).resolve().parents[2] / "ablate"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names a module binds to sacreBLEU (or what it imports from it), and to anything else imported."""
    ours: set[str] = set()
    others: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                name = a.asname or a.name.split(".")[0]
                (ours if a.name.split(".")[0] == "sacrebleu" else others).add(name)
        elif isinstance(node, ast.ImportFrom):
            names = {a.asname or a.name for a in node.names}
            if (node.module or "").split(".")[0] == "sacrebleu":
                ours |= names
            else:
                others |= names
    return ours, others


def private_sacrebleu_uses(source: str) -> list[str]:
    """``line: what`` for each private sacreBLEU member that ``source`` imports or reaches.

    In a module that imports sacreBLEU, any private attribute counts unless it is reached from ``self``,
    ``cls`` or another imported module (``os._exit``): a score object's ``_fields`` is as private as
    the package's.
    """
    tree = ast.parse(source)
    names, others = _imported_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sacrebleu":
            if _private(node.module or "") or any(_private(part) for part in (node.module or "").split(".")):
                found.append(f"{node.lineno}: from {node.module}")
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and names:
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if not (isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in others - names)):
                found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_the_checker_finds_private_members():
    assert private_sacrebleu_uses("import sacrebleu\nsacrebleu.metrics.bleu._force(1)\n") == ["2: ._force"]
    assert private_sacrebleu_uses("from sacrebleu.metrics import BLEU\nBLEU()._extract_corpus_statistics(h, r)\n")
    assert private_sacrebleu_uses("from sacrebleu.metrics.bleu import _x\n") == ["1: import _x"]
    assert private_sacrebleu_uses("import os\nimport sacrebleu\nself._cache = sacrebleu.BLEU()\nos._exit(0)\n") == []
    assert private_sacrebleu_uses("import os\nos._exit(0)\n") == []  # no sacreBLEU, nothing to check


@pytest.mark.slow
def test_no_module_uses_a_private_sacrebleu_member():
    offenders = {
        str(path.relative_to(PACKAGE.parent)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if (uses := private_sacrebleu_uses(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_scores_carry_the_chrf_signature_beside_the_bleu_signature():
    hyps, refs = ["the cat sat on the mat", "a dog"], ["the cat sat on a mat", "a dog barks"]
    scores = corpus_scores(hyps, refs)
    chrf = sacrebleu.metrics.CHRF()
    assert scores.chrf == chrf.corpus_score(hyps, [refs]).score
    assert scores.chrf_signature == str(chrf.get_signature())
    assert scores.chrf_signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert scores.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
