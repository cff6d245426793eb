"""Plugins: a user's own components, imported before a config is validated (fairseq's ``--user-dir``).

The config key ``plugins`` lists modules or ``.py`` files (relative to the config file's folder); installed
packages may declare an entry point in the group ``ablate.plugins``. :func:`load` imports them, as far as the
caller's :data:`Trust` allows, and returns each one's record (kind, name, file, sha256, package version).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
import typing
import warnings
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

from ablate.errors import AblateError
from ablate.utils.io import file_sha256 as sha256

GROUP = "ablate.plugins"
"""The entry-point group an installed package declares its plugin module in."""

_LOADED: dict[str, dict[str, Any]] = {}
"""Plugin key (file path or module name) -> its record, once imported in this process."""
_ENTRY_POINTS: Optional[list[dict[str, Any]]] = None
"""Records of the installed entry points, once loaded (they are loaded once per process)."""


Trust = Literal["import", "recorded", "never"]
"""How far :func:`load` trusts the plugins it is given.

``import``: the user's own config (a file they wrote, this command line): import them all.
``recorded``: named by a folder's record: import only plugins the user vouched for (a file of the
same content already imported from ``--plugins`` or from the user's config, whose loaded code stands
for it; an installed module, not one found through the working directory), refuse any other in one
line. ``never``: import none; a reader of numbers keeps the recorded names. :func:`ablate.config.from_flat`
applies the same trust to the classes ``trainer.callbacks`` names (:func:`check_named_modules`).
"""
TRUST_FLAG = "--trust-plugins"
"""The command-line flag that imports every plugin a record names."""


class PluginError(AblateError):
    """A plugin that cannot be found or imported; the message names it and says what to do."""


def is_file(entry: str) -> bool:
    """A plugin entry names a ``.py`` file (else a module): it ends in ``.py`` or holds a ``/``."""
    return entry.endswith(".py") or "/" in entry


def absolute(entries: Any, base: Path) -> list[Any]:
    """``entries`` with each relative file path made absolute against ``base`` (a config file's folder)."""
    if entries is None or entries == "":
        entries = []
    elif isinstance(entries, (str, dict)):
        entries = [entries]
    elif not isinstance(entries, (list, tuple)):
        raise PluginError(f"plugins={entries!r} is not valid; list module names or .py files, e.g. plugins=[cosine.py]")
    out = []
    for entry in entries:
        if isinstance(entry, str) and is_file(entry) and not Path(entry).expanduser().is_absolute():
            entry = str((base / entry).resolve())
        elif isinstance(entry, dict) and entry.get("path") and not Path(entry["path"]).is_absolute():
            entry = {**entry, "path": str((base / entry["path"]).resolve())}
        out.append(entry)
    return out


def load(entries: Any, base: Optional[Path] = None, trust: Trust = "import") -> list[dict[str, Any]]:
    """Import the plugins of ``entries`` (module names, ``.py`` paths relative to ``base`` or the working
    directory, or a resolved config's records) that ``trust`` allows (:data:`Trust`), and the installed
    entry points; their records. A :class:`PluginError` (one line) when a plugin is missing, fails to
    import, or (``recorded``) was not vouched for: it names the file, its digest and the flag to pass."""
    if trust not in typing.get_args(Trust):
        raise ValueError(f"trust={trust!r} is not one of {', '.join(typing.get_args(Trust))}")
    folder = base or Path.cwd()
    records: list[dict[str, Any]] = []
    for entry in absolute(entries, folder):
        if trust == "never":
            record = _unimported(entry)
        elif trust == "recorded":
            _check_vouched(entry, folder)
            record = _vouched_file(entry, folder) if _as_record(entry).get("kind") == "file" else _load(entry)
        else:
            record = _load(entry)
        if record not in records:
            records.append(record)
    for record in entry_points():
        if not any(r.get("entry_point") == record["entry_point"] for r in records):
            records.append(record)
    return records


def _as_record(entry: Any) -> dict[str, Any]:
    """``entry`` as a record: a ``.py`` path or a module name becomes ``{kind, name, path}``."""
    if isinstance(entry, dict):
        return entry
    if not isinstance(entry, str) or not entry.strip():
        raise PluginError(f"plugin {entry!r} is neither a module name nor a .py file; e.g. plugins=[cosine.py]")
    entry = entry.strip()
    if is_file(entry):
        path = Path(entry).expanduser()
        return {"kind": "file", "name": path.stem, "path": str(path)}
    return {"kind": "module", "name": entry, "path": None}


def _unimported(entry: Any) -> dict[str, Any]:
    """What a reader keeps of a plugin it does not import: the plugin's record (the loaded one if this
    process already runs the same code)."""
    record = _as_record(entry)
    if record.get("kind") == "file":
        path = Path(str(record.get("path"))).resolve()
        return _LOADED.get(str(path)) or _same_code(record.get("name"), record.get("sha256")) or record
    if record.get("kind") == "module":
        return _LOADED.get(str(record.get("name"))) or record
    return record


def unvouched(entries: Any, base: Optional[Path] = None) -> list[dict[str, Any]]:
    """The plugins of ``entries`` (a record's ``plugins``) the user did not vouch for, as records with
    the digest of the file as it is now; importing none of them.

    Vouched for: a file this process already imported (the user's config or ``--plugins``), a file
    of the same content as one it imported, a module already imported, an installed module (one not
    planted: :func:`_planted`), an installed entry point, and a missing file (nothing of it can run;
    loading it says what is missing).
    """
    folder = base or Path.cwd()
    out = []
    for entry in absolute(entries, folder):
        record = _as_record(entry)
        kind, name = record.get("kind"), str(record.get("name", "?"))
        if kind == "module":
            if name in _LOADED or name in sys.modules:
                continue
            spec = _top_spec(name)
            planted = _planted(spec, folder) if spec is not None else None
            if spec is None or planted is not None:
                out.append({**record, "found": None if planted is None else str(planted)})
        elif kind == "file":
            path = Path(str(record.get("path"))).expanduser()
            if path.is_file() and _running(path) is None:
                out.append({**record, "path": str(path.resolve()), "now": sha256(path)})
    return out


def describe_unvouched(record: dict[str, Any]) -> str:
    """``plugin /x/evil.py (sha256 1a2b3c4d5e6f)``, ``plugin module 'lab' (not installed)`` or, for a module
    a record names by class path, ``module 'lab' (trainer.callbacks lab.Stamp; found only in /x)``."""
    if record.get("kind") == "module":
        where = "not installed" if record.get("found") is None else f"found only in {record['found']}"
        named_by = record.get("named_by")
        what = f"module '{record.get('name')}'" if named_by else f"plugin module '{record.get('name')}'"
        return f"{what} ({named_by}; {where})" if named_by else f"{what} ({where})"
    recorded = str(record.get("sha256") or "")
    changed = f", the record says {recorded[:12]}" if recorded and recorded != record["now"] else ""
    return f"plugin {record['path']} (sha256 {record['now'][:12]}{changed})"


def _check_vouched(entry: Any, base: Path) -> None:
    """Raise unless the user vouched for the plugin a record names (see :func:`unvouched`)."""
    for record in unvouched([entry], base):
        raise _refusal(record)


def _vouched_file(entry: Any, base: Path) -> dict[str, Any]:
    """The plugin file a record names, once vouched for: the code this process already runs from that path
    or of that content, never the file as it is now, which may have been written since the check (a shared
    folder its owner still writes to); a missing file's error; else the refusal."""
    record = _as_record(entry)
    path = Path(str(record.get("path"))).expanduser()
    loaded = _running(path)
    if loaded is not None:
        _warn_changed(record, loaded)
        return loaded
    for stranger in unvouched([entry], base):  # written or changed since the check
        raise _refusal(stranger)
    return _moved_or_missing(record, path)


def check_named_modules(named: dict[str, str], base: Optional[Path] = None) -> None:
    """Raise :class:`PluginError` (one line) unless the user vouched for each module a record names outside
    ``plugins``, as :func:`unvouched` judges a module plugin; ``named`` maps each to what names it, e.g.
    ``{"lab": "trainer.callbacks lab.Stamp"}`` (a class path, imported when the config is checked)."""
    for module, named_by in named.items():
        for record in unvouched([{"kind": "module", "name": module, "path": None}], base):
            raise _refusal({**record, "named_by": named_by})


def _refusal(record: dict[str, Any]) -> PluginError:
    """The one line refusing an unvouched plugin or module: what it is and the flag to pass."""
    file = record.get("kind") == "file"
    how = f"pass --plugins {record['path']} or" if file else f"install it, or pass --plugins {record.get('name')} or"
    return PluginError(
        f"refusing to import {describe_unvouched(record)}: a run's record names it, not you; {how} {TRUST_FLAG} "
        f"(in Python: trust_plugins=True) if you trust its code"
    )


def _top_spec(name: str) -> Optional[Any]:
    """The import spec of module ``name``'s top-level package, ``None`` when it is not importable; finding it
    runs no code."""
    try:
        return importlib.util.find_spec(name.partition(".")[0])
    except (ImportError, ValueError):
        return None


def _planted(spec: Any, base: Optional[Path]) -> Optional[Path]:
    """The folder a top-level package (its import ``spec``) was planted in, or ``None`` for an installed one.

    Planted: its file inside ``base`` (the record's folder, if any), or found through the working directory on
    ``sys.path`` (``python -m ablate`` or a notebook started inside a folder someone else made, above the
    run folder it names); for a namespace package, any of its portions. A package already imported that
    is not a namespace package is where it is: its submodules come from there."""
    loaded = sys.modules.get(spec.name)
    if loaded is not None and getattr(loaded, "__file__", None):
        return None
    places = [spec.origin] if spec.origin and spec.origin not in ("built-in", "frozen") else []
    places += list(spec.submodule_search_locations or [])
    folder, here = base.resolve() if base is not None else None, Path.cwd().resolve()
    for place in (Path(p).resolve() for p in places):
        if folder is not None and place.is_relative_to(folder):
            return folder
        if here in (place.parent, place.parent.parent if place.name == "__init__.py" else None):
            return here
    return None


def _load(entry: Any) -> dict[str, Any]:
    """Import a plugin entry, or what a resolved config's record names (a missing plugin says what to install)."""
    if not isinstance(entry, dict):
        record = _as_record(entry)
        return load_file(Path(record["path"])) if record["kind"] == "file" else load_module(record["name"])
    record, kind, name = entry, entry.get("kind"), entry.get("name", "?")
    if kind == "entry_point":
        found = next((r for r in entry_points() if r["entry_point"] == record.get("entry_point")), None)
        if found is None:
            package = f"{record.get('package')}=={record.get('version')}" if record.get("package") else name
            raise PluginError(
                f"plugin '{record.get('entry_point')}' (entry point {name} of package {package}) is not installed; "
                f"install it (pip install {package})"
            )
        return found
    if kind == "file":
        path = Path(str(record.get("path")))
        if not path.is_file():
            return _moved_or_missing(record, path)
        loaded = load_file(path)
    elif kind == "module":
        try:
            loaded = load_module(str(name))
        except PluginError:
            if _top_spec(str(name)) is not None:
                raise
            package = f"{record['package']}=={record['version']}" if record.get("package") else None
            how = f"pip install {package}" if package else "install it or put it on PYTHONPATH"
            raise PluginError(
                f"plugin module '{name}' is not installed (the run used {record.get('path')}, "
                f"sha256 {str(record.get('sha256'))[:16]}...); {how}"
            ) from None
    else:
        raise PluginError(f"plugin record {record!r} names no kind (file, module or entry_point)")
    _warn_changed(record, loaded)
    return loaded


def _warn_changed(record: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Warn when the plugin ``loaded`` is not the code ``record`` recorded (another sha256)."""
    if record.get("sha256") and loaded.get("sha256") and record["sha256"] != loaded["sha256"]:
        warnings.warn(
            f"plugin '{record.get('name', '?')}' changed since it was recorded: {loaded['path']} has sha256 "
            f"{loaded['sha256'][:16]}..., the run recorded {record['sha256'][:16]}...",
            stacklevel=3,
        )


def _moved_or_missing(record: dict[str, Any], path: Path) -> dict[str, Any]:
    """A recorded plugin file that is not at ``path``: the loaded one of the same name and digest (e.g. a
    resumed run whose new config names the file's new place), else the error saying what to put back."""
    if (moved := _same_code(record.get("name"), record.get("sha256"))) is not None:
        return moved
    raise PluginError(
        f"plugin '{record.get('name', '?')}' is missing: {path} (sha256 {str(record.get('sha256'))[:16]}...) is not "
        f"there; copy that file back, or change that path in the config that records it"
    )


def _same_code(name: Any, digest: Any) -> Optional[dict[str, Any]]:
    """A plugin file already imported in this process with this name and sha256, if any."""
    for loaded in _LOADED.values():
        if loaded["kind"] == "file" and (loaded["name"], loaded["sha256"]) == (name, digest):
            return loaded
    return None


def _running(path: Path) -> Optional[dict[str, Any]]:
    """The loaded plugin whose code is the file at ``path``: imported from there, or of its name and content."""
    loaded = _LOADED.get(str(path.resolve()))
    if loaded is None and path.is_file():
        loaded = _same_code(path.stem, sha256(path))
    return loaded


def load_file(path: Path) -> dict[str, Any]:
    """Import a ``.py`` file as the module named by its stem (once per process, again once edited: a notebook's
    next ``ablate.train`` runs the new code; a failed edit leaves the last good one); its record."""
    path = path.resolve()
    key = str(path)
    if key in _LOADED and (not path.is_file() or sha256(path) == _LOADED[key]["sha256"]):
        return _LOADED[key]
    if path.is_dir():
        raise PluginError(f"plugin file {path} is a folder, not a Python file; name a .py file inside it in plugins")
    if not path.is_file():
        raise PluginError(
            f"plugin file {path} does not exist; fix the path in plugins (relative to the config file, or to the working directory on the command line)"
        )
    name = path.stem
    taken = sys.modules.get(name)
    if taken is not None and Path(getattr(taken, "__file__", "") or "").resolve() != path:
        if (same := _same_code(name, sha256(path))) is not None:  # a copy of a plugin file this process already runs
            return same
        raise PluginError(f"plugin {path}: a module named '{name}' is already imported; rename the file")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin {path} cannot be imported as a Python module; give it a .py name")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    with importing(name):
        try:
            spec.loader.exec_module(module)
        except BaseException:
            if taken is None:
                del sys.modules[name]
            else:  # an edit that fails: the last good code goes on running
                sys.modules[name] = taken
            raise
    _LOADED[key] = {"kind": "file", "name": name, "path": key, "sha256": sha256(path)}
    return _LOADED[key]


def load_module(name: str) -> dict[str, Any]:
    """Import a module by its dotted name (once per process, reloaded once its file is edited, as
    :func:`load_file`); its record (its file and that file's sha256)."""
    loaded = _LOADED.get(name)
    path = Path(loaded["path"]) if loaded and loaded.get("path") else None
    if loaded is not None and (path is None or not path.is_file() or sha256(path) == loaded["sha256"]):
        return loaded
    with importing(name):
        module = importlib.import_module(name)
        if loaded is not None:
            module = importlib.reload(module)
    _LOADED[name] = record = _module_record(name, module)
    with suppress(importlib.metadata.PackageNotFoundError):  # the distribution that provides it, if one does
        if names := importlib.metadata.packages_distributions().get(name.partition(".")[0]):
            package = importlib.metadata.distribution(names[0])
            record.update(package=package.metadata["Name"], version=package.version)
    return record


def _module_record(name: str, module: Any) -> dict[str, Any]:
    file = getattr(module, "__file__", None)
    path = Path(file).resolve() if file else None
    return {
        "kind": "module",
        "name": name,
        "path": str(path) if path else None,
        "sha256": sha256(path) if path and path.is_file() else None,
    }


class ExitDuringImport(BaseException):
    """A plugin called ``os._exit(code)`` while it was imported (a ``BaseException``, so that the plugin's own
    ``except Exception`` cannot swallow it)."""


@contextmanager
def importing(name: str) -> Iterator[None]:
    """Import plugin ``name`` in the block: any failure but Ctrl-C becomes a one-line :class:`PluginError`, and
    ``os._exit`` in this process raises :class:`ExitDuringImport` instead of ending it: a plugin that quits at
    import (``os._exit(0)``) would otherwise end ``ablate train`` or a sweep's ``--dry-run`` with status 0 and
    nothing done. ``sys.exit`` raises ``SystemExit``, refused too; a process the plugin forks exits as usual."""
    real, pid = os._exit, os.getpid()

    def refuse(code: int) -> None:
        if os.getpid() != pid:  # a child forked during the import: let it go
            real(code)
        raise ExitDuringImport(code)

    os._exit = refuse  # type: ignore[assignment]
    try:
        yield
    except KeyboardInterrupt:
        raise
    except (ExitDuringImport, SystemExit) as err:
        how = f"os._exit({err.args[0]})" if isinstance(err, ExitDuringImport) else f"sys.exit({err.code!r})"
        raise PluginError(
            f"plugin '{name}' called {how} while it was imported, so nothing was checked or run; "
            "a plugin only registers components: fix it or drop it from plugins"
        ) from None
    except AblateError as err:
        raise PluginError(f"plugin '{name}': {err}") from None
    except SyntaxError as err:
        raise PluginError(
            f"plugin '{name}' failed to import: SyntaxError at {err.filename}:{err.lineno}: {err.msg}"
        ) from None
    except BaseException as err:  # noqa: BLE001 - the plugin's own bug, as one line
        text = (str(err).strip().splitlines() or [""])[0]
        raise PluginError(
            f"plugin '{name}' failed to import: {type(err).__name__}: {text}; fix it or drop it from plugins"
        ) from None
    finally:
        os._exit = real


def blame(err: BaseException) -> Optional[tuple[str, str]]:
    """``(plugin name, "file:line")`` of the innermost traceback frame of ``err`` (or of the errors it was
    raised from) that runs a loaded plugin's code, or ``None`` when no plugin is on the way."""
    files = {
        record["path"]: record["name"] for record in [*_LOADED.values(), *(_ENTRY_POINTS or [])] if record.get("path")
    }
    seen: set[int] = set()
    chain: Optional[BaseException] = err
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        found = None
        for frame, line in traceback.walk_tb(chain.__traceback__):
            path = str(Path(frame.f_code.co_filename).resolve())
            if path in files:
                found = (files[path], f"{Path(path).name}:{line}")
        if found is not None:
            return found
        chain = chain.__cause__ or chain.__context__
    return None


def user_error_line(err: BaseException) -> Optional[str]:
    """The one line a user is shown for ``err``: an :class:`AblateError`'s message, prefixed with
    ``plugin 'NAME': `` when a plugin raised it; a plain exception raised in a plugin's code as that plugin's
    line (its class, file and line); ``None`` for a plain exception of ablate's own (a bug: its traceback)."""
    culprit = blame(err)
    if isinstance(err, AblateError):
        message = str(err)
        if culprit is None or message.startswith(f"plugin '{culprit[0]}'"):
            return message
        return f"plugin '{culprit[0]}': {message}"
    if culprit is None:
        return None
    text = (str(err).strip().splitlines() or [""])[0]
    return (
        f"plugin '{culprit[0]}' raised {type(err).__name__} at {culprit[1]}: {text} "
        f"(raise ablate.errors.AblateError for a message of your own)"
    )


def entry_points() -> list[dict[str, Any]]:
    """Import every installed entry point of the group ``ablate.plugins`` once; their records.

    An entry point names a module (``my_lab.ablate_plugin``), imported, or a function in one
    (``my_lab.ablate_plugin:setup``), called with no arguments.
    """
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        records = []
        for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
            planted = _planted_entry_point(ep)
            if planted is not None:
                warnings.warn(
                    f"ignoring the ablate.plugins entry point {ep.name} = {ep.value}: it was found in the working "
                    f"directory {planted}, a folder's own code rather than an installed package; install it, or "
                    f"pass --plugins {ep.module} if you trust it",
                    stacklevel=2,
                )
                continue
            records.append(_load_entry_point(ep))
        _ENTRY_POINTS = records
    return _ENTRY_POINTS


def _planted_entry_point(ep: importlib.metadata.EntryPoint) -> Optional[Path]:
    """The working directory when ``importlib.metadata`` found ``ep``'s distribution through it (a ``.dist-info``
    planted in the folder the user works in) or its module would be imported from there; ``None`` otherwise."""
    here = Path.cwd().resolve()
    if ep.dist is not None and Path(str(ep.dist.locate_file(""))).resolve() == here:
        return here
    spec = _top_spec(ep.module)
    return _planted(spec, None) if spec is not None else None


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> dict[str, Any]:
    with importing(f"{ep.name} = {ep.value}"):
        target = ep.load()
        if ep.attr and callable(target):
            target()
    record = _module_record(ep.module, sys.modules.get(ep.module))
    dist = ep.dist
    record.update(
        kind="entry_point",
        name=ep.value,
        entry_point=ep.name,
        package=dist.metadata["Name"] if dist is not None else None,
        version=dist.version if dist is not None else None,
    )
    return record
