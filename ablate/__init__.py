"""ablate: which part of the Transformer matters, and what does it cost?"""

# The public names, resolved on first use so that `import ablate` stays cheap (no torch, no YAML):
# the Python API (ablate/api.py), the callable sweep package (ablate/sweep/__init__.py) and
# ``@ablate.register(kind, name)`` for plugins (ablate/registry.py).
_LAZY = {
    **dict.fromkeys(("train", "table", "plot", "TrainResult"), "ablate.api"),
    "TableResult": "ablate.report",
    "register": "ablate.registry",
}


def __getattr__(name: str):
    import importlib

    if name == "__version__":  # the installed distribution's version (pyproject.toml), as `ablate --version`
        from ablate.utils.provenance import version_of

        return version_of("ablate") or "0+unknown"  # None: a checkout used without installing
    if name == "sweep":  # the package, callable: ablate.sweep(file) runs a sweep
        return importlib.import_module("ablate.sweep")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ablate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY, "sweep", "__version__"])
