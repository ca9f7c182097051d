"""A throwaway one-node SLURM cluster on localhost, for tests of SLURM launching.

:func:`start_cluster` starts, in a fresh temporary folder, a MUNGE daemon (as the ``munge`` user,
with its own key and socket), ``slurmctld`` and ``slurmd`` (as root, with their own
``slurm.conf``, free ports, state, spool, and log files), waits until the node is idle, and
returns a :class:`SlurmCluster`; :meth:`SlurmCluster.stop` cancels every job, stops the three
daemons by their pids, and removes the folder. Nothing runs as a system service and nothing
outside the folder is written::

    with start_cluster() as cluster:
        job = cluster.sbatch(script, "--array=0-1", "-c1", "-o", str(tmp_path / "out.%a"))
        assert [info.state for info in cluster.wait(job)] == ["COMPLETED", "COMPLETED"]
        cluster.run(["srun", "hostname"])

Client commands (``sbatch``, ``srun``, ``squeue``, ``scontrol``, ``scancel``, ``sinfo``) reach
this cluster only with :meth:`SlurmCluster.env` (``SLURM_CONF`` names its ``slurm.conf``, whose
``AuthInfo`` names its MUNGE socket); jobs inherit ``SLURM_CONF``, so ``scontrol`` inside a job
reaches it too. There is no accounting (no ``sacct``): a finished job stays visible to
``scontrol show job`` for ``MinJobAge`` (300 s), long enough for a test to read its state.

Needs root (slurmd runs jobs as their submitter, munged runs as ``munge``), the binaries
``munged``, ``slurmctld``, ``slurmd``, ``sbatch``, ``srun``, ``squeue``, ``scontrol``,
``scancel``, ``sinfo`` (``scripts/ensure_slurm.sh`` installs them), and a ``munge`` user;
otherwise :func:`start_cluster` raises :class:`SlurmUnavailable` with the reason.

What the configuration chooses, and why (SLURM 22.05):

* ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/affinity``: no cgroups, so none of
  ``cgroup.conf``, systemd or a writable ``/sys/fs/cgroup`` is needed (processes a job
  daemonizes escape it, though). ``task/affinity`` binds a job's processes to its CPUs with
  ``sched_setaffinity``, as on a real cluster (a ``-c1`` batch job sees one CPU in
  ``os.sched_getaffinity(0)``); ``start_cluster(task_plugin="task/none")`` leaves every job on
  every CPU.
* ``SelectType=select/cons_tres`` with ``CR_CPU``: CPUs are the consumable, so one-CPU jobs
  (array tasks) run side by side; memory is not a consumable.
* ``AuthInfo=...,cred_expire=``: SLURM holds a requeued job back for ``cred_expire`` seconds
  (default 120) before it may start again; :data:`REQUEUE_DELAY_S` keeps that short.
* ``SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1``: a batch job
  starts about 1 s after ``sbatch`` (not 3 s), and a requeued job as soon as its delay is over
  (not at the next scheduling pass, up to 60 s later).
* ``KillWait=5``: a job that ignores SIGTERM on ``scancel`` or requeue gets SIGKILL 5 s later.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from helpers.support import as_user

#: Daemons the cluster runs; client commands the tests use.
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "scancel", "sinfo")

#: Seconds ``start_cluster`` waits for the node to become idle.
START_TIMEOUT_S = 30.0
#: Seconds a requeued job waits before it may start again (``AuthInfo=cred_expire``).
REQUEUE_DELAY_S = 5
#: Seconds a finished job stays visible to ``scontrol show job`` (``MinJobAge``).
MIN_JOB_AGE_S = 300
#: Job states after which a job does not run again by itself (``scontrol requeue`` can still
#: requeue it). A job shown ``COMPLETING`` is still ending.
FINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
    "DEADLINE", "PREEMPTED",
})
#: Environment variables that tie a process to some SLURM job or cluster: a test run inside a
#: SLURM job has them, and ``srun``/``sbatch`` would take them for their own options or job.
_SLURM_PREFIXES = ("SLURM_", "SLURMD_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_",
                   "SCANCEL_", "SCONTROL_", "PMI_", "PMIX_")
_UNIX_SOCKET_MAX = 100  # sun_path holds 108 bytes; leave room


class SlurmUnavailable(RuntimeError):
    """The throwaway cluster cannot run here; ``reason`` says why (missing binaries, not
    root, or a daemon that did not come up, with the tail of its log)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class JobInfo:
    """One job (or one array task) as ``scontrol show job -o`` shows it.

    Attributes:
        fields: every ``Key=Value`` of the record (``JobState``, ``ExitCode``, ``Restarts``,
            ``ArrayTaskId``, ``NodeList``, ``StdOut``, ...).
    """

    fields: dict[str, str]

    @property
    def job_id(self) -> str:
        """The id SLURM gave this job or array task (``JobId``; array tasks have their own)."""
        return self.fields["JobId"]

    @property
    def array_job_id(self) -> str | None:
        """The array's id (what ``sbatch`` printed) for an array task, else ``None``."""
        return self.fields.get("ArrayJobId")

    @property
    def array_task_id(self) -> str | None:
        """The task's index for an array task (``"0-3"`` while tasks have not split off)."""
        return self.fields.get("ArrayTaskId")

    @property
    def state(self) -> str:
        """``JobState``: ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``..."""
        return self.fields["JobState"]

    @property
    def exit_code(self) -> int:
        """The batch script's exit status (``ExitCode=STATUS:SIGNAL``)."""
        return int(self.fields.get("ExitCode", "0:0").split(":")[0])

    @property
    def exit_signal(self) -> int:
        """The signal that ended the batch script, 0 if none."""
        return int(self.fields.get("ExitCode", "0:0").split(":")[1])

    @property
    def restarts(self) -> int:
        """How often the job was requeued (``Restarts``; ``SLURM_RESTART_COUNT`` in the job)."""
        return int(self.fields.get("Restarts", "0"))

    @property
    def final(self) -> bool:
        """Whether the job has ended (see :data:`FINAL_STATES`)."""
        return self.state in FINAL_STATES


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=")


def parse_job_record(line: str) -> JobInfo:
    """Parse one line of ``scontrol show job -o`` (values may hold ``=``, not `` Key=``)."""
    matches = list(_FIELD.finditer(line.strip()))
    fields = {}
    for match, after in zip(matches, [*matches[1:], None], strict=True):
        end = after.start() if after is not None else len(line.strip())
        fields[match.group(1)] = line.strip()[match.end():end]
    return JobInfo(fields)


def _task_order(info: JobInfo) -> tuple[int, str]:
    """Array tasks by index (a record of tasks never started, ``"2-3"``, by its first)."""
    first = re.match(r"\d+", info.array_task_id or "")
    return (int(first.group()) if first else -1, info.job_id)


@dataclass
class SlurmCluster:
    """A running throwaway cluster (see the module's docstring); a context manager that stops
    it on exit.

    Attributes:
        root: the folder holding ``slurm.conf``, state, spool, logs, and MUNGE's files.
        node: the node's name (the short host name).
        cpus: the node's CPUs.
        pids: the daemons' pids by name (``munged``, ``slurmctld``, ``slurmd``).
    """

    root: Path
    node: str
    cpus: int
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _stopped: bool = field(default=False, repr=False)

    # --- paths

    @property
    def conf(self) -> Path:
        """The cluster's ``slurm.conf``."""
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        """The MUNGE daemon's socket."""
        return self.root / "munge" / "munge.socket"

    @property
    def pids(self) -> dict[str, int]:
        """The daemons' pids by name."""
        return {name: process.pid for name, process in self._processes.items()}

    def log(self, name: str) -> Path:
        """The log file of a daemon (``munged``, ``slurmctld``, ``slurmd``)."""
        if name == "munged":
            return self.root / "munge" / "munged.log"
        return self.root / "log" / f"{name}.log"

    def log_tail(self, name: str, chars: int = 1500) -> str:
        """The end of a daemon's log file and of what it wrote to stdout/stderr."""
        parts = []
        for path in (self.log(name), self.root / "log" / f"{name}.out"):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").strip()
                if text:
                    parts.append(f"--- {path.name}\n{text[-chars:]}")
        return "\n".join(parts) or f"(no output from {name})"

    # --- clients

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for client commands: this process's without variables of any other
        SLURM job or cluster (``SLURM_*``, ``SBATCH_*``, ...), ``SLURM_CONF`` naming this
        cluster's ``slurm.conf``, then ``extra``."""
        out = {key: value for key, value in os.environ.items()
               if not key.startswith(_SLURM_PREFIXES)}
        out["SLURM_CONF"] = str(self.conf)
        out.update(extra)
        return out

    def run(
        self, args: Sequence[str | os.PathLike[str]], *, check: bool = True,
        timeout: float = 60, env: dict[str, str] | None = None, **kwargs: Any,
    ) -> subprocess.CompletedProcess[str]:
        """Run a client command (``srun``, ``sbatch``, ``squeue``, ``scontrol``, ``scancel``,
        ``sinfo``) against this cluster; returns its output as text.

        Args:
            args: the command and its arguments.
            check: raise ``subprocess.CalledProcessError`` (with stderr) on a non-zero exit.
            timeout: seconds before ``subprocess.TimeoutExpired``.
            env: variables added to :meth:`env`.
            kwargs: passed on to ``subprocess.run`` (``cwd``, ``input``, ...).
        """
        kwargs.setdefault("capture_output", True)
        result = subprocess.run(
            [str(arg) for arg in args], env=self.env(**(env or {})), text=True, timeout=timeout,
            check=False, **kwargs,
        )
        if check and result.returncode != 0:
            raise subprocess.CalledProcessError(
                result.returncode, result.args, result.stdout, result.stderr)
        return result

    def sbatch(self, script: str | os.PathLike[str], *args: str, **kwargs: Any) -> str:
        """Submit a batch script (``sbatch --parsable ARGS SCRIPT``) and return the job id
        (for ``--array``, the array's id). ``kwargs`` go to :meth:`run` (``cwd``...)."""
        result = self.run(["sbatch", "--parsable", *args, script], **kwargs)
        return result.stdout.strip().split(";")[0]

    def jobs(self, job_id: str) -> list[JobInfo]:
        """The records of a job, or of every task of an array (a pending array shows one record
        for its tasks not yet started), as ``scontrol show job -o`` gives them now."""
        out = self.run(["scontrol", "show", "job", "-o", job_id]).stdout
        return [parse_job_record(line) for line in out.splitlines() if line.strip()]

    def wait(self, job_id: str, timeout: float = 60, poll: float = 0.2) -> list[JobInfo]:
        """Wait until a job, or every task of an array, has ended (:data:`FINAL_STATES`) and
        return its records, array tasks sorted by index (tasks cancelled before they started
        share one record, ``ArrayTaskId=2-3``).

        Raises:
            TimeoutError: after ``timeout`` seconds, with the records last seen.
        """
        deadline = time.monotonic() + timeout
        while True:
            infos = self.jobs(job_id)
            if infos and all(info.final for info in infos):
                return sorted(infos, key=_task_order)
            if time.monotonic() > deadline:
                seen = "; ".join(f"{info.job_id}: {info.state}" for info in infos)
                raise TimeoutError(f"job {job_id} did not end within {timeout} s ({seen})")
            time.sleep(poll)

    def wait_state(
        self, job_id: str, states: Sequence[str] = ("RUNNING",), timeout: float = 60,
        poll: float = 0.2,
    ) -> JobInfo:
        """Wait until a (non-array) job is in one of ``states``; return its record."""
        deadline = time.monotonic() + timeout
        while True:
            (info,) = self.jobs(job_id)
            if info.state in states:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is {info.state}, not in {list(states)}")
            time.sleep(poll)

    def node_state(self) -> str:
        """The node's state as ``sinfo -h -o %t`` shows it (``idle``, ``mix``, ``alloc``...)."""
        return self.run(["sinfo", "-h", "-n", self.node, "-o", "%t"], timeout=10).stdout.strip()

    # --- stopping

    def stop(self, timeout: float = 15) -> None:
        """Cancel every job of the cluster, stop its daemons (by pid: SIGTERM, SIGKILL after
        ``timeout``), kill what of its jobs outlived them, and remove :attr:`root`. Safe to call
        twice."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._alive("slurmctld"):
                self._cancel_all(timeout)
            for name in ("slurmd", "slurmctld"):
                self._terminate(name, timeout)
            self._kill_leftovers()
            self._terminate("munged", timeout)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _alive(self, name: str) -> bool:
        process = self._processes.get(name)
        return process is not None and process.poll() is None

    def _cancel_all(self, timeout: float) -> None:
        """``scancel`` every job ``squeue`` lists (pending ones too) and wait until none is left
        (a job ignoring SIGTERM gets SIGKILL after ``KillWait``)."""
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            deadline = time.monotonic() + timeout
            while ids := self.run(["squeue", "-h", "-o", "%i"], timeout=10).stdout.split():
                if time.monotonic() > deadline:
                    return
                self.run(["scancel", *ids], check=False, timeout=10)
                time.sleep(0.2)

    def _terminate(self, name: str, timeout: float) -> None:
        process = self._processes.get(name)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(5)

    def _kill_leftovers(self) -> None:
        """SIGKILL processes of this cluster's jobs still there (``slurmstepd`` and job
        processes outlive ``slurmd``): those whose environment names this ``slurm.conf``."""
        marker = f"SLURM_CONF={self.conf}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)


# ------------------------------------------------------------------------------------------
# Starting.


def _free_ports(count: int) -> list[int]:
    """``count`` different TCP ports free on all addresses now (nothing holds them after)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("", 0))
            sockets.append(sock)
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found is None and os.path.exists(f"/usr/sbin/{name}"):
        found = f"/usr/sbin/{name}"
    return found


def _hardware() -> dict[str, int]:
    """The node's ``CPUs``, ``Boards``, ``SocketsPerBoard``, ``CoresPerSocket``,
    ``ThreadsPerCore``, ``RealMemory`` (MiB) from ``slurmd -C`` (or just CPUs and memory)."""
    slurmd = _binary("slurmd")
    found: dict[str, int] = {}
    if slurmd is not None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            out = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=20,
                                 check=False).stdout
            for key, value in re.findall(r"(\w+)=(\d+)", out.splitlines()[0] if out else ""):
                found[key] = int(value)
    if "CPUs" not in found:
        found = {"CPUs": os.cpu_count() or 1,
                 "RealMemory": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20}
    return found


def _check_traversable(path: Path) -> None:
    """munged requires every folder above its socket to be searchable by everyone."""
    for folder in [path, *path.parents]:
        if not folder.stat().st_mode & 0o001:
            raise SlurmUnavailable(
                f"{folder} is not searchable by everyone (mode {folder.stat().st_mode & 0o777:o}); "
                "munged (running as `munge`) cannot reach its socket below it")


def _slurm_conf(
    root: Path, node: str, hardware: dict[str, int], ports: list[int], task_plugin: str,
) -> str:
    memory = max(256, hardware.get("RealMemory", 1024) * 3 // 4)
    layout = " ".join(f"{key}={hardware[key]}" for key in (
        "CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
        if key in hardware)
    return f"""\
# A throwaway one-node cluster of tests/helpers/slurm.py.
ClusterName=lhpo
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root / "munge" / "munge.socket"},cred_expire={REQUEUE_DELAY_S}
CredType=cred/munge
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin={task_plugin}
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobRequeue=1
KillWait=5
MinJobAge={MIN_JOB_AGE_S}
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
Waittime=0
NodeName={node} NodeAddr=127.0.0.1 {layout} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def start_cluster(
    tmp_dir: str | os.PathLike[str] | None = None, *, task_plugin: str = "task/affinity",
) -> SlurmCluster:
    """Start a throwaway one-node cluster in a new folder under ``tmp_dir`` (default: the
    system's temporary folder; it must be searchable by everyone, since munged runs as
    ``munge``, and short, since MUNGE's socket lives there) and wait until its node is idle.
    ``task_plugin`` is SLURM's ``TaskPlugin``: ``task/affinity`` (jobs bound to their CPUs) or
    ``task/none``.

    Raises:
        SlurmUnavailable: binaries or the ``munge`` user are missing, this is not root, or a
            daemon did not come up within :data:`START_TIMEOUT_S` (the reason has its log).
    """
    missing = [name for name in (*DAEMONS, *CLIENTS, "munge") if _binary(name) is None]
    if missing:
        raise SlurmUnavailable(f"{', '.join(missing)} not found (scripts/ensure_slurm.sh "
                               "installs slurm-wlm and munge)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("not root (slurmd must run jobs as their user, munged as munge)")
    try:
        munge_user = pwd.getpwnam("munge")
    except KeyError:
        raise SlurmUnavailable("there is no `munge` user to run munged") from None

    root = Path(tempfile.mkdtemp(prefix="lhpo-slurm-", dir=tmp_dir)).resolve()
    cluster = SlurmCluster(root=root, node=socket.gethostname().split(".")[0], cpus=1)
    try:
        root.chmod(0o755)
        _check_traversable(root)
        if len(str(cluster.munge_socket)) > _UNIX_SOCKET_MAX:
            raise SlurmUnavailable(f"{cluster.munge_socket} is too long for a unix socket")
        for name in ("state", "spool", "log"):
            (root / name).mkdir(mode=0o755)
        _start_munged(cluster, munge_user)
        hardware = _hardware()
        cluster.cpus = hardware["CPUs"]
        cluster.conf.write_text(_slurm_conf(
            root, cluster.node, hardware, _free_ports(2), task_plugin))
        _spawn(cluster, "slurmctld", [_binary("slurmctld") or "", "-D", "-i", "-f",
                                      str(cluster.conf)])
        _spawn(cluster, "slurmd", [_binary("slurmd") or "", "-D", "-N", cluster.node, "-f",
                                   str(cluster.conf)])
        _wait_idle(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _spawn(cluster: SlurmCluster, name: str, cmd: list[str], **kwargs: Any) -> None:
    """Start a daemon in the foreground, in a session of its own, output to ``log/NAME.out``."""
    with open(cluster.root / "log" / f"{name}.out", "wb") as out:
        cluster._processes[name] = subprocess.Popen(
            cmd, env=cluster.env(), stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, **kwargs)


def _start_munged(cluster: SlurmCluster, user: pwd.struct_passwd) -> None:
    folder = cluster.munge_socket.parent
    folder.mkdir(mode=0o755)  # munged: the socket's folder must be searchable by everyone
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    for path in (folder, key):
        os.chown(path, user.pw_uid, user.pw_gid)
    _spawn(cluster, "munged", as_user([
        _binary("munged") or "", "--foreground", f"--socket={cluster.munge_socket}",
        f"--key-file={key}", f"--pid-file={folder / 'munged.pid'}",
        f"--log-file={folder / 'munged.log'}", f"--seed-file={folder / 'munged.seed'}",
    ], user.pw_uid, user.pw_gid))
    munge = _binary("munge") or "munge"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        _check_running(cluster, "munged")
        if cluster.munge_socket.exists():
            probe = subprocess.run([munge, "-n", "-S", str(cluster.munge_socket)],
                                   capture_output=True, timeout=10, check=False)
            if probe.returncode == 0:
                return
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"munged did not answer within {START_TIMEOUT_S} s\n"
                                   + cluster.log_tail("munged"))
        time.sleep(0.05)


def _check_running(cluster: SlurmCluster, name: str) -> None:
    process = cluster._processes[name]
    if process.poll() is not None:
        raise SlurmUnavailable(f"{name} exited with status {process.returncode}\n"
                               + cluster.log_tail(name))


def _wait_idle(cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    state = ""
    while True:
        for name in DAEMONS:
            _check_running(cluster, name)
        with contextlib.suppress(subprocess.SubprocessError):
            state = cluster.node_state()
        if state == "idle":
            return
        if time.monotonic() > deadline:
            raise SlurmUnavailable(
                f"node {cluster.node} is {state or 'unknown'!r}, not idle, after "
                f"{START_TIMEOUT_S} s\n{cluster.log_tail('slurmctld')}\n"
                f"{cluster.log_tail('slurmd')}")
        time.sleep(0.1)


# ------------------------------------------------------------------------------------------
# For pytest fixtures.

#: With ``LIGHTNING_HPO_REQUIRE_SLURM=1`` (CI), a cluster that cannot start fails the tests
#: that need it instead of skipping them.
REQUIRE_SLURM = "LIGHTNING_HPO_REQUIRE_SLURM"


def start_or_skip(tmp_dir: str | os.PathLike[str] | None = None, **kwargs: Any) -> SlurmCluster:
    """:func:`start_cluster`, or ``pytest.skip`` with the reason it cannot start
    (``pytest.fail`` where ``LIGHTNING_HPO_REQUIRE_SLURM=1``)."""
    import pytest

    try:
        return start_cluster(tmp_dir, **kwargs)
    except SlurmUnavailable as error:
        if os.environ.get(REQUIRE_SLURM) == "1":
            pytest.fail(f"SLURM required ({REQUIRE_SLURM}=1) but {error.reason}", pytrace=False)
        pytest.skip(f"SLURM tests skipped: {error.reason}")
