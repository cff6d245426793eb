"""A real one-node SLURM cluster on localhost, for the tests (Debian's slurm-wlm and munge).

``LocalSlurm(folder).start()`` writes a ``slurm.conf`` for this machine's cores, starts ``munged``
on a private socket, then ``slurmctld`` and ``slurmd``, and waits until the node is idle. Every
SLURM command finds the cluster through ``SLURM_CONF`` (set in ``os.environ`` while it runs), so
nothing under /etc is touched. ``unavailable()`` says why a cluster cannot start here, if so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional

DAEMONS = ("munged", "slurmctld", "slurmd")


def _find(name: str) -> Optional[str]:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None)


def unavailable() -> Optional[str]:
    """Why a local cluster cannot run here (``None`` if it can)."""
    missing = [d for d in (*DAEMONS, "sbatch", "squeue", "scancel") if _find(d) is None]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    if not Path("/etc/munge/munge.key").exists():
        return "no munge key at /etc/munge/munge.key (apt-get install munge creates one)"
    return None


class LocalSlurm:
    """Start/stop a private SLURM cluster whose files all live in ``folder``."""

    def __init__(self, folder: Path, cpus: Optional[int] = None, port: int = 16817):
        self.folder = Path(folder)
        self.cpus = cpus or os.cpu_count() or 1
        self.port = port
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.folder / "slurm.conf"
        self._old_conf: Optional[str] = None

    def _write_conf(self) -> None:
        f = self.folder
        for sub in ("state", "spool", "log", "munge"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        memory_mb = max(1024, (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 2**20 - 2048)
        self.conf.write_text(f"""\
ClusterName=ablatetest
SlurmctldHost={self.host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={self.port}
SlurmdPort={self.port + 1}
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket={f}/munge/munge.socket.2,cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd.pid
SlurmctldLogFile={f}/log/slurmctld.log
SlurmdLogFile={f}/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
KillWait=5
InactiveLimit=0
SchedulerParameters=sched_interval=1
NodeName={self.host} CPUs={self.cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def start(self, timeout: float = 60.0) -> LocalSlurm:
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        self._write_conf()
        f = self.folder
        self._old_conf = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(self.conf)
        subprocess.run(
            [
                _find("munged"),
                "--force",
                f"--socket={f}/munge/munge.socket.2",
                "--key-file=/etc/munge/munge.key",
                f"--log-file={f}/log/munged.log",
                f"--pid-file={f}/munge/munged.pid",
                f"--seed-file={f}/munge/seed",
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run([_find("slurmctld"), "-f", str(self.conf)], check=True, capture_output=True)
        subprocess.run([_find("slurmd"), "-f", str(self.conf)], check=True, capture_output=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() in ("idle", "mixed", "allocated"):
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the local SLURM node did not come up; see {f}/log")

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "-u", "root"], capture_output=True)
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            path = self.folder / pid_file
            try:
                os.kill(int(path.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(0.5)
        if self._old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = self._old_conf

    def log(self, name: str = "slurmctld") -> str:
        try:
            return (self.folder / "log" / f"{name}.log").read_text()[-3000:]
        except OSError:
            return ""
