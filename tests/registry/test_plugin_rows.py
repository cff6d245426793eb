"""A table row is the plugin's code, not where its file lay; runs without plugins are unchanged."""

from __future__ import annotations

from ablate.report.trials import clean_config


def test_a_plugin_keys_rows_by_name_and_digest_not_path():
    def config(path: str, sha: str) -> dict:
        return {"plugins": [{"kind": "file", "name": "cosine", "path": path, "sha256": sha}], "model": {"heads": 2}}

    here, there = clean_config(config("/a/cosine.py", "ab" * 32)), clean_config(config("../plugins/c.py", "ab" * 32))
    assert here == there and here["plugins"] == ("cosine@abababab",)
    assert clean_config(config("/a/cosine.py", "cd" * 32)) != here  # other code, another row


def test_an_empty_plugins_list_is_no_key_at_all():
    assert clean_config({"plugins": [], "model": {"heads": 2}}) == clean_config({"model": {"heads": 2}})
