"""What ``train`` writes as hypotheses and references, the report reads back line for line."""

from __future__ import annotations

import json

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r"]


def test_hypotheses_with_unicode_separators_read_back_line_for_line(tmp_path):
    """What train writes (hyps/refs) is read back by the report with the same line count."""
    from types import SimpleNamespace

    from ablate.report.trials import collect_folder
    from ablate.training.run_folder import write_outputs

    refs = [f"sentence{sep}{i}" for i, sep in enumerate(SEPARATORS)]
    module = SimpleNamespace(test_results={"test": {"hypotheses": list(refs)}}, best_val_record={})
    data = SimpleNamespace(references=lambda split: refs, sources=lambda split: refs, val_split="val")
    run = tmp_path / "sweep" / "trial"
    write_outputs(run, module, data)
    (run / "summary.json").write_text(json.dumps({"status": "finished", "config": {"seed": 1}}))
    trial = collect_folder(tmp_path / "sweep")[0]
    assert len(trial.hyps["test"]) == len(trial.refs["test"]) == len(trial.sources["test"]) == len(refs)
    assert trial.hyps["test"][:8] == refs[:8]  # a bare CR would be translated by readers: written as a space
