"""YAML that a hostile or careless file cannot abuse: no alias bombs, no duplicate keys, no deep nesting.

``yaml.safe_load`` accepts both: aliases that expand exponentially (a 1 KB file that becomes
gigabytes when its keys are flattened or its values enumerated) and a key given twice (the
second silently wins, dropping the first one's keys). :func:`load` refuses each with the line
and the key, as a ``ValueError`` the caller turns into its own one-line error.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ablate.errors import AblateError

MAX_NODES = 100_000
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.=+/-]*")
_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}  # YAML 1.1 reads these as bools, None


def is_plain_text(text: str) -> bool:
    """Whether YAML reads ``text`` back as this very string, decided without parsing it (planning a large
    sweep formats and parses a trial name per trial): a letter or ``_`` first, then letters, digits and
    ``_ . = + / -``, and not a word YAML reads as a boolean or null. ``False`` only means: parse it."""
    return _PLAIN.fullmatch(text) is not None and text.lower() not in _WORDS


"""Most nodes a document may expand to once aliases are followed (real configs have < 1,000)."""
MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a document may hold (real configs and sweep files: < 10)."""


class YAMLRefused(AblateError):
    """The document is well formed but refused (alias bomb, duplicate key); the message has the line."""


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise YAMLRefused(
                    f"line {key_node.start_mark.line + 1}: duplicate key '{key}' "
                    f"(first given on line {first}); keep one"
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_size(root: yaml.Node, limit: int) -> None:
    """Refuse a node graph whose expansion (every alias followed) exceeds ``limit`` nodes."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 1  # a recursive alias counts once (and PyYAML refuses it anyway)
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            total = 1
        if total > limit:
            raise YAMLRefused(
                f"line {node.start_mark.line + 1}: aliases expand this document to more than "
                f"{limit:,} values (an alias bomb?); write the values out instead of nesting aliases"
            )
        sizes[id(node)] = total
        return total

    size(root)


def _check_depth(text: str, limit: int) -> None:
    """Refuse a document nested more than ``limit`` deep, reading its events (PyYAML's parser does not
    recurse; its composer and constructor do, and a deep document would exhaust Python's stack)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                raise YAMLRefused(
                    f"line {event.start_mark.line + 1}: lists and mappings nest more than {limit} levels deep here; "
                    "flatten them"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load(text: str, limit: int = MAX_NODES) -> Any:
    """Parse one YAML document like ``yaml.safe_load``, refusing alias bombs and duplicate keys.

    Raises:
        yaml.YAMLError: malformed YAML (with its marks).
        YAMLRefused: a duplicate key, an alias bomb or nesting past :data:`MAX_DEPTH`, the message
            starting with ``line N:``.
    """
    _check_depth(text, MAX_DEPTH)
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, limit)
        return loader.construct_document(node)
    finally:
        loader.dispose()
