"""Each plugin test starts with ablate's own components only, and leaves nothing registered behind."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from ablate import registry
from ablate.utils import plugins


@pytest.fixture(autouse=True)
def clean_registries(monkeypatch, tmp_path):
    """Registries, loaded plugins and their modules restored after the test."""
    for module, _ in registry.KINDS.values():
        importlib.import_module(module)
    saved = {kind: dict(entries) for kind, entries in registry._TABLES.items()}
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(registry, "_SHADOWED", {})
    monkeypatch.setattr(plugins, "_ENTRY_POINTS", None)
    before = set(sys.modules)
    yield
    for kind, entries in registry._TABLES.items():
        entries.clear()
        entries.update(saved[kind])
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None)
        if file and Path(file).resolve().is_relative_to(tmp_path.resolve()):
            del sys.modules[name]
