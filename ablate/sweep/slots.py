"""Device slots: where trials may run at the same time.

On a GPU machine each slot owns ``gpus_per_trial`` GPUs, given to its trial through
``CUDA_VISIBLE_DEVICES`` (so the trial sees them as ``cuda:0..K-1`` and trains with DDP over all
of them when K > 1). On CPU, ``parallel`` slots share the cores evenly; each trial's torch uses
``cores / parallel`` threads (``OMP_NUM_THREADS``), so trials do not fight over cores, and its
idle OpenMP threads sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``): spinning threads
burn the time slices other trials (or other programs) on the same cores need, and a trial that
oversubscribes a busy machine slows down many times over (measured in ``docs/sweeps.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from ablate.sweep.spec import SweepError


@dataclass(frozen=True)
class Slot:
    """One place a trial can run.

    Attributes:
        index: position among the slots (shown in progress).
        gpus: GPU ids for ``CUDA_VISIBLE_DEVICES``; ``()`` hides every GPU; ``None`` leaves the
            variable as it is (CPU-only machine).
        threads: CPU threads for the trial's torch.
    """

    index: int
    gpus: Optional[tuple[str, ...]]
    threads: int

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with this slot's devices and thread count."""
        env = dict(base)
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(self.threads)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when torch starts, so it is set here
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def overrides(self) -> list[str]:
        """Trainer overrides this slot needs: DDP over its GPUs when it has more than one."""
        return [f"train.devices={len(self.gpus)}"] if self.gpus and len(self.gpus) > 1 else []

    def describe(self) -> str:
        return f"gpu {','.join(self.gpus)}" if self.gpus else f"cpu x{self.threads}"


def cpu_count() -> int:
    """Cores this process may use (respects affinity masks and containers' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """GPU ids a child may be given: ``CUDA_VISIBLE_DEVICES`` if set, else every CUDA device."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch
    except ImportError:
        return []
    return [str(i) for i in range(torch.cuda.device_count())]


def plan_slots(
    devices: str = "auto",
    gpus_per_trial: int = 1,
    parallel: int = 1,
    cores: Optional[int] = None,
    gpus: Callable[[], list[str]] = visible_gpus,
) -> list[Slot]:
    """The slots for ``--devices``, ``--gpus-per-trial`` and ``--parallel``.

    Args:
        devices: ``auto`` (every visible GPU, else CPU), ``cpu``, or GPU ids ``0,1,2,3``.
        gpus_per_trial: GPUs per trial (DDP when more than one).
        parallel: trials at once on CPU, or per GPU group on GPUs (small models share a GPU).
        cores: CPU cores to share (default: those this process may use).
        gpus: lists the visible GPU ids (injected in tests).
    """
    if parallel < 1 or gpus_per_trial < 1:
        raise SweepError("--parallel and --gpus-per-trial must be at least 1")
    cores = cores or cpu_count()
    spec = devices.strip().lower()
    if spec == "auto":
        ids, hide = gpus(), None
    elif spec == "cpu":
        ids, hide = [], ()
    else:
        ids = [d.strip() for d in devices.split(",") if d.strip()]
        hide = None
        if not ids or not all(d.isdigit() or d.startswith(("GPU-", "MIG-")) for d in ids):
            raise SweepError(f"--devices {devices!r}: use auto, cpu, or GPU ids such as 0,1,2,3")
        visible = gpus()
        missing = [d for d in ids if d.isdigit() and d not in visible] if all(v.isdigit() for v in visible) else []
        if missing:  # a trial given an absent GPU would train on CPU under its label
            raise SweepError(
                f"--devices {devices}: no GPU {', '.join(missing)} on this machine "
                f"(visible: {','.join(visible) or 'none'}); use --devices auto, cpu, or visible ids"
            )
    if not ids:
        if gpus_per_trial > 1:
            raise SweepError(f"--gpus-per-trial {gpus_per_trial} needs GPUs, but none are visible")
        threads = max(1, cores // parallel)
        return [Slot(i, hide, threads) for i in range(parallel)]
    if len(ids) < gpus_per_trial:
        raise SweepError(f"--gpus-per-trial {gpus_per_trial} needs at least that many GPUs; visible: {','.join(ids)}")
    groups = [tuple(ids[i : i + gpus_per_trial]) for i in range(0, len(ids) - gpus_per_trial + 1, gpus_per_trial)]
    slots = [g for g in groups for _ in range(parallel)]
    threads = max(1, cores // len(slots))
    return [Slot(i, g, threads) for i, g in enumerate(slots)]
