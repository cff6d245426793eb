"""The run record: what training leaves in a run folder and what sweeps and reports read back.

One module owns its vocabulary, so training, sweeps and reports cannot drift apart: :class:`RunStatus`,
the paths of run and sweep folders (:class:`RunFiles`, :class:`SweepFiles`), ``summary.json``
(:class:`RunSummary`, versioned; files from before :data:`SUMMARY_VERSION` load as version 1) and its
types (:func:`summary_problem`), and the metric keys (:data:`METRICS`; how a table shows them is
:mod:`ablate.report.layout`'s). It imports only :mod:`ablate.errors` and :mod:`ablate.utils`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Iterator, Optional, TypeGuard

from ablate.errors import AblateError, did_you_mean, first_line
from ablate.utils.io import atomic_write_json, read_json
from ablate.utils.provenance import ENVIRONMENT_FILE


class RecordError(AblateError):
    """A run or sweep record that cannot be believed (ill-typed, from a newer ablate)."""


class UnreadableRecord(RecordError):
    """A record file that is missing or not JSON at all."""


class RunStatus(str, Enum):
    """How a run or a sweep trial stands; a ``str``, so JSON holds the plain value (``"finished"``)."""

    PENDING = "pending"  # planned by a sweep, not started (sweep.json only)
    RUNNING = "running"  # training; with a free run lock, its process was killed
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # stopped on a signal after saving a checkpoint; the same command resumes it
    STOPPED = "stopped"  # ended early by the sweep's early_terminate (hyperband); final (sweep.json only)
    TIMEOUT = "timeout"  # the sweep's --trial-timeout (summary.json only; the sweep records it failed)

    def __str__(self) -> str:  # and so format() and f-strings
        return self.value

    def __hash__(self) -> int:  # as the plain string's, so {"finished": ...}[RunStatus.FINISHED] works
        return hash(self.value)

    @property
    def done(self) -> bool:
        """Final: finished, failed or stopped (a rerun does not start it again)."""
        return self in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED)

    @property
    def scored(self) -> bool:
        """Ended with a metric: finished, or stopped early by hyperband."""
        return self in (RunStatus.FINISHED, RunStatus.STOPPED)

    @property
    def resumable(self) -> bool:
        """A sweep starts it (again): pending or interrupted."""
        return self in (RunStatus.PENDING, RunStatus.INTERRUPTED)

    @classmethod
    def of(cls, value: Any) -> Any:
        """``value`` as a status where it is one, else unchanged (a damaged record keeps its text)."""
        return cls(value) if isinstance(value, str) and value in cls._value2member_map_ else value

    @classmethod
    def parse(cls, value: Any, where: str = "the record") -> RunStatus:
        """``value`` as a status, or :class:`RecordError` naming the valid ones."""
        try:
            return cls(value)
        except ValueError:
            names = [s.value for s in cls]
            raise RecordError(
                f"{where}: unknown status {value!r} (one of {', '.join(names)}){did_you_mean(str(value), names)}"
            ) from None


# The statuses a summary.json may have (pending and stopped are the sweep's).
SUMMARY_STATUSES = (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING, RunStatus.TIMEOUT)


SUMMARY_FILE = "summary.json"
SWEEP_FILE = "sweep.json"
LOCK_FILE = ".lock"
LOG_FILE = "trial.log"
TEXT_KINDS = ("hyps", "refs", "sources")
VALIDATION_SPLITS = ("val", "valid", "dev", "validation")
"""The names a validation split goes by: in a corpus (in order of preference), so in ``hyps/<split>.txt``."""


@dataclass(frozen=True)
class _Folder:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))


class RunFiles(_Folder):
    """The paths of one run folder: ``RunFiles(run_dir).summary`` and so on."""

    summary = property(lambda self: self.root / SUMMARY_FILE, doc="the run record (:class:`RunSummary`)")
    config = property(lambda self: self.root / "config.yaml", doc="the resolved config")
    environment = property(lambda self: self.root / ENVIRONMENT_FILE, doc="the package freeze of the run")
    tokenizer = property(lambda self: self.root / "tokenizer", doc="the BPE tokenizer's folder")
    checkpoints = property(lambda self: self.root / "checkpoints", doc="the checkpoints' folder")
    best = property(lambda self: self.checkpoints / "best.ckpt", doc="best by validation BLEU (the tested one)")
    last = property(lambda self: self.checkpoints / "last.ckpt", doc="the last one, for resuming")
    last_prev = property(lambda self: self.checkpoints / "last.prev.ckpt", doc="the one before ``last``")
    lock = property(lambda self: self.root / LOCK_FILE, doc="held by the training process")
    wandb = property(lambda self: self.root / "wandb", doc="the W&B run's folder")
    wandb_id = property(lambda self: self.root / "wandb_id.txt", doc="the W&B run id")
    log = property(lambda self: self.root / LOG_FILE, doc="a sweep trial's output")
    console = property(lambda self: self.root / "console.log", doc="the status lines and warnings of every attempt")
    requeues = property(lambda self: self.root / ".requeues", doc="SLURM requeues of the trial")

    def texts(self, kind: str) -> Path:
        """The folder of one kind of text file: ``hyps``, ``refs`` or ``sources``."""
        if kind not in TEXT_KINDS:
            raise ValueError(f"no text kind {kind!r}: one of {', '.join(TEXT_KINDS)}")
        return self.root / kind

    def hyps(self, split: str) -> Path:
        return self.texts("hyps") / f"{split}.txt"

    def refs(self, split: str) -> Path:
        return self.texts("refs") / f"{split}.txt"

    def sources(self, split: str) -> Path:
        return self.texts("sources") / f"{split}.txt"


class SweepFiles(_Folder):
    """The paths of a sweep folder: its state, the launcher's lock, SLURM's files, each trial's run folder."""

    state = property(lambda self: self.root / SWEEP_FILE, doc="the sweep's state (``sweep.json``)")
    lock = property(lambda self: self.root / LOCK_FILE, doc="held by the one launcher running the sweep")
    slurm = property(lambda self: self.root / ".slurm", doc="submitit's job files")

    def trial(self, name: str) -> RunFiles:
        return RunFiles(self.root / name)


@dataclass(frozen=True)
class Metric:
    """A number every run records under ``key`` in ``summary.json`` (and W&B), e.g. ``val/bleu``; ``per_split``:
    once per test split too, as ``test_<split>/...`` (:meth:`split_key`)."""

    key: str
    per_split: bool = False

    def split_key(self, split: str) -> str:
        """The key of this metric on one test split: ``test/bleu`` -> ``test_<split>/bleu``."""
        prefix, _, name = self.key.partition("/")
        return f"{prefix}_{split}/{name}"

    def split_of(self, key: str) -> Optional[str]:
        """The split of a per-split key of this metric (``test_x/bleu`` -> ``x``), else None."""
        prefix, _, name = self.key.partition("/")
        head, _, tail = key.partition("/")
        if not self.per_split or tail != name or not head.startswith(prefix + "_"):
            return None
        return head[len(prefix) + 1 :]


STEPS = Metric("step")
TESTED_STEP = Metric("val/step")
TRAIN_TOKENS = Metric("train/tokens")
DEV_PPL = Metric("val/ppl")
DEV_BLEU = Metric("val/bleu")
DEV_CHRF = Metric("val/chrf")
TEST_BLEU = Metric("test/bleu", per_split=True)
TEST_CHRF = Metric("test/chrf", per_split=True)
PARAMS = Metric("params")
TOKENS_PER_SEC = Metric("train/tokens_per_sec")
TOKENS_PER_CPU_SEC = Metric("train/tokens_per_cpu_sec")
TRAIN_CPU_SECONDS = Metric("train/cpu_seconds")
WALL_TIME = Metric("wall_time_s")
METRICS: dict[str, Metric] = {name.lower(): m for name, m in dict(globals()).items() if isinstance(m, Metric)}
"""Name -> metric (the constant's name in lower case): every number the run record names."""
HEADLINE = (DEV_BLEU, DEV_PPL, TEST_BLEU, TOKENS_PER_SEC, PARAMS, STEPS, WALL_TIME)
"""What a sweep keeps of each trial's summary in ``sweep.json`` (``results``), with every per-split test BLEU."""


def headline(summary: RunSummary) -> dict[str, Any]:
    """The :data:`HEADLINE` numbers of a summary, as ``sweep.json``'s ``results`` holds them."""
    data = summary.to_json()
    out = {m.key: data[m.key] for m in HEADLINE if m.key in data}
    out.update({k: v for k, v in data.items() if TEST_BLEU.split_of(k) is not None})
    return out


SUMMARY_VERSION = 1  # the layout RunSummary writes; a file without "version" is from before it (the same layout)
NOT_METRICS = set("status error config history variant sweep bleu_signature resolved version checkpoints".split())
"""Summary keys that are bookkeeping: a report treats every other numeric field as a metric."""


@dataclass(frozen=True)
class SavedCheckpoint:
    """A checkpoint as the run record knows it: the training step it holds and its file's sha256."""

    step: Optional[int]
    sha256: str


@dataclass
class RunSummary:
    """``summary.json``: how a run stands, what it scored and what produced it; ``to_json()`` is flat, as the
    file has always been, and every field without a place here is kept in ``extra`` as read."""

    status: Optional[RunStatus] = None  # one of SUMMARY_STATUSES; None in a record that has none
    error: Optional[str] = None  # one line saying why it failed or was interrupted
    config: Optional[dict[str, Any]] = None
    resolved: Optional[dict[str, Any]] = None  # the values the model used where the config leaves them implicit
    history: Optional[list[dict[str, Any]]] = None  # every validation, {step, val/bleu, ...}, in step order
    metrics: dict[str, Any] = field(default_factory=dict)  # every group/name number (val/bleu, test_<split>/bleu)
    step: Optional[int] = None
    epoch: Optional[int] = None
    params: Optional[int] = None
    wall_time_s: Optional[float] = None  # the whole run, over all its attempts (so is cpu_time_s)
    cpu_time_s: Optional[float] = None
    variant: Any = None
    sweep: Optional[dict[str, Any]] = None  # {name, params} of the sweep that started it
    bleu_signature: Optional[str] = None
    accelerator: Optional[str] = None
    precision: Optional[str] = None  # Lightning's precision that trained it ("32-true", "bf16-mixed")
    commits: Optional[list[str]] = None  # the git commit of every attempt
    checkpoints: Optional[dict[str, Any]] = None  # file name -> {step, sha256} when the run last stopped
    extra: dict[str, Any] = field(default_factory=dict)
    version: int = SUMMARY_VERSION  # the layout it was read in (0: from before versions)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in ("metrics", "extra", "version"))

    @classmethod
    def from_json(cls, data: dict[str, Any], strict: bool = True, where: str = SUMMARY_FILE) -> RunSummary:
        """A summary from its JSON object; :class:`RecordError` from a newer ablate or, ``strict``, ill-typed."""
        if strict and (problem := summary_problem(data)):
            raise RecordError(f"{where}: {problem}")
        if not isinstance(data, dict):
            raise RecordError(f"{where} is a {kind_of(data)}, not a JSON object")
        version = data.get("version", 0)
        if not isinstance(version, int) or isinstance(version, bool) or version > SUMMARY_VERSION:
            raise RecordError(
                f"{where} has summary version {version!r}, newer than this ablate reads ({SUMMARY_VERSION}): "
                "upgrade ablate (pip install -U ablate) to read it"
            )
        known = cls.field_names()
        values: dict[str, Any] = {"metrics": {}, "extra": {}, "version": version}
        for key, value in data.items():
            if key == "version":
                continue
            if key in known and (value is not None or key == "error"):
                values[key] = value
            elif "/" in key:
                values["metrics"][key] = value
            else:
                values["extra"][key] = value  # a None-valued field is kept where it was, so nothing is lost
        if values.get("status") is not None:
            values["status"] = RunStatus.of(values["status"])
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """The JSON object (flat, as ``summary.json`` has always been), with ``version``."""
        out: dict[str, Any] = {}
        for name in self.field_names():
            value = getattr(self, name)
            if value is not None or name == "error" and self.status is not None:
                out[name] = value.value if isinstance(value, RunStatus) else value  # plain JSON for W&B, YAML
        out.update(self.metrics)
        out.update(self.extra)
        out["version"] = SUMMARY_VERSION
        return out

    def checkpoint(self, name: str) -> Optional[SavedCheckpoint]:
        """What the record says of checkpoint ``name`` (``best.ckpt``), or None where it says nothing usable."""
        entry = (self.checkpoints or {}).get(name)
        if not isinstance(entry, dict):
            return None
        step, digest = entry.get("step"), entry.get("sha256")
        if not isinstance(digest, str) or not (step is None or isinstance(step, int) and not isinstance(step, bool)):
            return None
        return SavedCheckpoint(step, digest)

    def get(self, key: str, default: Any = None) -> Any:
        """A field by its JSON key (``status``, ``val/bleu``, ``machine``)."""
        value = self.to_json().get(key)
        return default if value is None else value

    def number(self, key: str) -> Optional[float]:
        """A numeric field as a float (None where absent, not a number or not finite)."""
        value = self.get(key)
        return float(value) if is_number(value) and math.isfinite(value) else None

    def update(self, values: dict[str, Any]) -> None:
        """Set fields by their JSON keys (``{"val/bleu": 30.1, "params": 1000}``)."""
        merged = {**self.to_json(), **values}
        merged.pop("version", None)
        new = RunSummary.from_json(merged, strict=False)
        for name in (*self.field_names(), "metrics", "extra"):
            setattr(self, name, getattr(new, name))

    @classmethod
    def read(cls, path: Path, strict: bool = True) -> RunSummary:
        """The summary at ``path`` (a file, or a run folder); :class:`RecordError` when it cannot be read."""
        path = Path(path)
        if path.is_dir():
            path = RunFiles(path).summary
        try:
            data = read_json(path)
        except (OSError, ValueError) as err:  # missing, a device or a pipe, bad UTF-8, not JSON, nested too deep
            raise UnreadableRecord(f"unreadable {path.name}: {first_line(err)}") from None
        return cls.from_json(data, strict=strict, where=path.name)

    @classmethod
    def peek(cls, path: Path) -> Optional[RunSummary]:
        """:meth:`read` without type checks; None where there is no readable summary (yet)."""
        try:
            return cls.read(path, strict=False)
        except RecordError:
            return None

    def write(self, path: Path) -> None:
        """Write atomically: a reader sees the old or the new summary, never a torn one."""
        path = Path(path)
        atomic_write_json(RunFiles(path).summary if path.is_dir() else path, self.to_json())

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self.to_json().items())


TEXT, MAPPING = (str, "text"), (dict, "a mapping")
FIELD_TYPES: dict[str, tuple[Any, str]] = {
    **dict.fromkeys(("error", "bleu_signature", "accelerator", "precision"), TEXT),
    **dict.fromkeys(("config", "resolved", "checkpoints"), MAPPING),
    "variant": ((str, dict), "a name"),
    "sweep": MAPPING,
    "sweep.name": TEXT,
    "sweep.params": MAPPING,
}
"""Summary field (dotted: inside ``sweep``) -> (its types where set, what to call them in an error), in check order."""
LIMIT = 1e15  # no count or rate a run records comes near this; a larger value (1e308) is damage
_SCORE = (0.0, 100.0)
BOUNDED = {"/bleu": _SCORE, "/chrf": _SCORE, "/chrf++": _SCORE, "/ter": (0.0, math.inf), "/ppl": (1.0, math.inf)}
"""Ranges of the scores by key suffix; every other metric must be finite and within :data:`LIMIT`."""
NUMERIC = ("params", "step", "epoch", "wall_time_s", "cpu_time_s")  # metrics without a "/" in their key


def kind_of(value: Any) -> str:
    """A value's type as JSON names it in an error (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value.value if isinstance(value, RunStatus) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def is_number(value: Any) -> TypeGuard[float]:  # an int or a float, not a bool: callers use it as a number
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def summary_value(value: Any) -> Any:
    """``value``, or the number in W&B's ``define_metric(summary="max")`` summary ``{"max": x}`` (None: none)."""
    if isinstance(value, dict):
        return next((value[k] for k in ("max", "min", "best", "last", "mean") if k in value), None)
    return value


def metric_problem(key: str, value: Any) -> Optional[str]:
    """Why ``value`` cannot be the metric ``key`` (not a number, not finite, out of range), or None."""
    if isinstance(value, dict) and (value := summary_value(value)) is None:
        return None
    if not is_number(value):
        return f"{key} is {_shown(value)}, not a number"
    if not math.isfinite(value):
        return f"{key} is {value}, not a finite number"
    low, high = next((r for suffix, r in BOUNDED.items() if key.endswith(suffix)), (-LIMIT, LIMIT))
    if not low <= value <= high:
        return f"{key} is {value:g}, outside [{low:g}, {high:g}]"
    return None


def summary_problem(summary: Any) -> Optional[str]:
    """The first way ``summary`` breaks the run record's types, as ``<field> is <problem>``; None if sound."""
    if not isinstance(summary, dict):
        return f"{SUMMARY_FILE} is a {kind_of(summary)}, not a JSON object"
    status = summary.get("status")
    if status is not None and status not in SUMMARY_STATUSES:
        return f"status is {_shown(status)}, not one of {', '.join(SUMMARY_STATUSES)}"
    for name, (types, what) in FIELD_TYPES.items():
        section, _, key = name.rpartition(".")  # "sweep" is a mapping or null by the time "sweep.name" is checked
        value = (summary.get(section) or {}).get(key) if section else summary.get(key)
        if value is not None and not isinstance(value, types):
            return f"{name} is a {kind_of(value)}, not {what}"
    for key, value in summary.items():
        if "/" not in key and key not in NUMERIC:  # not a metric (val/bleu, train/tokens, params)
            continue
        if value is None and status == RunStatus.FINISHED and key.endswith("/bleu"):  # NaN is written as null
            return f"{key} is null (not a number when it was written: NaN?)"
        if value is not None and (problem := metric_problem(key, value)):
            return problem
    return history_problem(summary.get("history"))


def history_problem(history: Any) -> Optional[str]:
    """Why ``history`` is not a list of validation records ``{step: number >= 0, metric: number}``, or None."""
    if history is None:
        return None
    if not isinstance(history, list):
        return f"history is a {kind_of(history)}, not a list of validation records"
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            return f"history[{i}] is {_shown(entry)}, not a record {{step: ..., {DEV_BLEU.key}: ...}}"
        step = entry.get("step")
        if step is not None and (not is_number(step) or not math.isfinite(step) or step < 0):
            return f"history[{i}].step is {_shown(step)}, not a step number"
        for key, value in entry.items():
            if key != "step" and value is not None and (problem := metric_problem(key, value)):
                return f"history[{i}].{problem}"
    return None
