"""ablate: which part of the Transformer matters, and what does it cost?"""

# The public names, resolved on first use so that `import ablate` stays cheap (no torch, no YAML):
# the Python API (ablate/api.py), the callable sweep package (ablate/sweep/__init__.py) and
# ``@ablate.register(kind, name)`` for plugins (ablate/registry.py).
_API = ("train", "table", "plot", "TrainResult", "TableResult")


def __getattr__(name: str):
    if name == "__version__":  # the installed distribution's version (pyproject.toml), as `ablate --version`
        from ablate.utils.provenance import version_of

        return version_of("ablate") or "0+unknown"  # None: a checkout used without installing

    if name == "TableResult":
        from ablate.report import TableResult

        return TableResult
    if name in _API:
        from ablate import api

        return getattr(api, name)
    if name == "sweep":  # the package, callable: ablate.sweep(file) runs a sweep
        import importlib

        return importlib.import_module("ablate.sweep")
    if name == "register":
        from ablate.registry import register

        return register
    raise AttributeError(f"module 'ablate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, "sweep", "register", "__version__"])
