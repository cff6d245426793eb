"""Safe YAML: alias bombs and duplicate keys in a config are refused with the line and the key; anchors still work."""

from __future__ import annotations

import pytest

from ablate.config import ConfigError, load_config


def mapping_bomb(levels: int = 5) -> str:
    """A YAML mapping whose aliases expand to 10**levels leaves (about 1 KB of text)."""
    lines = ["l0: &l0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}"]
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} {{" + ", ".join(f"k{i}: *l{n - 1}" for i in range(10)) + "}")
    return "\n".join(lines) + "\n"


def test_a_config_alias_bomb_is_refused_with_its_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(mapping_bomb())
    with pytest.raises(ConfigError, match=r"line \d+: aliases expand .* alias bomb"):
        load_config(path)


def test_duplicate_config_keys_are_refused_with_line_and_key(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("model:\n  heads: 8\nseed: 2\nmodel:\n  d_model: 64\n")
    with pytest.raises(ConfigError, match=r"line 4: duplicate key 'model' \(first given on line 1\)"):
        load_config(path)


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &base {heads: 8}\nmodel:\n  <<: *base\n  d_model: 64\n")
    from ablate.utils.typed import read_yaml

    assert read_yaml(path)["model"] == {"heads": 8, "d_model": 64}


def test_nesting_past_the_limit_is_refused_with_its_line_and_nesting_up_to_it_loads():
    from ablate.utils import typed

    with pytest.raises(typed.YAMLRefused, match=r"^line 2: lists and mappings nest more than 100 levels deep"):
        typed.load_yaml("a: 1\nb: " + "[" * 5000 + "]" * 5000 + "\n")  # was a RecursionError
    value = typed.load_yaml("[" * 100 + "]" * 100)  # the document's mapping or list counts as one level
    for _ in range(99):
        (value,) = value
    assert value == []
