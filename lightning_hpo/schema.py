"""Every name lightning_hpo writes into an Optuna study, and the one format it writes in a value.

The pruners, the launcher and the callback write these; the report and the live view read them.
Nothing here imports Optuna or torch, so a reader needs no writer's module. A study may hold:

* per trial, **user attributes** (:class:`ATTR`): where and when the launcher ran it, its epochs,
  checkpoint, seed, why it stopped; a paused trial stays RUNNING with :data:`ATTR.PAUSED <ATTR>`;
* per trial, the **system attribute** :data:`BRACKET_ATTR` (its Hyperband bracket);
* per study, :data:`CONFIG_ATTR` (the launcher's config, storage masked), :data:`PRUNER_ATTR`
  (the rung ladders) and :data:`RESOURCE_ATTR` (epochs or optimizer steps);
* rung records: the table :data:`RUNG_RECORD_TABLE` in an RDB database, else study system
  attributes ``{RUNG_ATTR_PREFIX}{bracket}:{rung}:{trial_number}``.

**Records** beyond a plain value have one type each, with one writer (``to_attr``) and one
lenient reader (``read``: another form reads as ``None``, never an exception): :class:`Pause`,
:class:`Segment`, :class:`ResumePoint` and :class:`Owner`; :func:`is_paused` asks the one
question. Example::

    >>> device_label("gpu", (0, 1)), devices_in_label("cuda:0,1")
    ('cuda:0,1', 2)
    >>> ATTR.STOP_REASON
    'stop_reason'
    >>> pause = Pause(epoch=3, checkpoint="resume.ckpt", since=1.7e9, target=None, why="rung 3")
    >>> Pause.read(pause.to_attr()) == pause, pause.at_rung
    (True, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "ATTR",
    "BRACKET_ATTR",
    "CONFIG_ATTR",
    "PAUSED_KEYS",
    "PRUNER_ATTR",
    "RESOURCE_ATTR",
    "RUNG_ATTR_PREFIX",
    "RUNG_RECORD_TABLE",
    "RUNG_VECTOR_ATTR_PREFIX",
    "SEGMENT_KEYS",
    "HasAttrs",
    "Owner",
    "Pause",
    "ResumePoint",
    "Segment",
    "StoredTrial",
    "as_count",
    "as_number",
    "as_text",
    "device_label",
    "devices_in_label",
    "is_paused",
    "objective_curve",
    "with_objective_values",
    "with_segment",
]


class ATTR:
    """Per-trial user attribute keys (times are unix seconds)."""

    SLOT = "slot"  # the launcher's worker slot (int)
    DEVICE = "device"  # the devices it trained on, as :func:`device_label` writes them
    HOST = "host"
    PID = "pid"  # the worker process
    LAUNCHER_PID = "launcher_pid"  # the supervisor process (stale-trial detection)
    START = "start_time"
    END = "end_time"
    EPOCHS = "epochs"  # epochs completed
    EPOCH_END_TIMES = "epoch_end_times"  # one per completed epoch
    LOG_DIR = "log_dir"
    CHECKPOINT = "checkpoint"  # the trial's best checkpoint file
    SEED = "seed"
    # A LightningCLI project's trial: "fit", or "" where its CLI is made with run=False; what
    # the retrain command of its config.yaml says after the script (``python main.py fit``)
    CLI_SUBCOMMAND = "cli_subcommand"
    FAIL_REASON = "fail_reason"  # why a FAIL trial failed
    STOP_REASON = "stop_reason"  # why the study's budget stopped a PRUNED trial, and where
    PRUNED_AT_EPOCH = "pruned_at_epoch"  # the epoch at which the pruner (or a schedule) stopped it
    # the optimizer step at which the pruner stopped it (PruningCallback(resource="step"))
    PRUNED_AT_STEP = "pruned_at_step"
    # Pausing schedules and crash resume (the launcher's scheduler,
    # lightning_hpo.launch.study.scheduler)
    PAUSED = "paused"  # a dict while the trial waits between segments (see PAUSED_KEYS), else None
    TARGET = "target_epoch"  # the epoch its segment in flight trains to (int)
    ROUND = "round"  # its synchronous successive-halving round (int; sync_sh, sync_hyperband)
    SEGMENTS = "segments"  # one dict per training segment, see SEGMENT_KEYS
    ATTEMPTS = "failed_attempts"  # why earlier attempts died (list of str); retried while short
    RESUME_POINT = "resume_point"  # its latest checkpoint, see ResumePoint
    EPOCHS_TRAINED = "epochs_trained"  # epochs trained over all segments (retrains included)
    OWNER = "owner"  # the worker training its segment in flight, see Owner
    DATA = "data"  # where its batches came from, in words (TensorDataModule.data_path)
    # Several objectives: each epoch's values (Optuna's report refuses them), see objective_curve
    OBJECTIVE_VALUES = "objective_values"


#: The keys of :data:`ATTR.PAUSED <ATTR>`: ``epoch`` (epochs in its checkpoint), ``checkpoint``
#: (the file it resumes from), ``since`` (unix s), ``target`` (None: paused at a rung, waiting
#: for the scheduler to promote or stop it; an int: interrupted before reaching that epoch,
#: resumed to it first), ``why`` (``"rung 4"``, ``"wall-clock budget reached ..."``, a crash).
PAUSED_KEYS = ("epoch", "checkpoint", "since", "target", "why")

#: The keys of each :data:`ATTR.SEGMENTS <ATTR>` entry: ``slot``, ``device``, ``start`` and
#: ``end`` (unix s), ``from_epoch`` (epochs in the checkpoint it started from, 0 for a fresh
#: start) and ``to_epoch`` (epochs done when it ended), ``how`` (``"paused"``, ``"complete"``,
#: ``"pruned"``, ``"interrupted"``, ``"crashed"``, ``"failed"``). A segment is listed when it
#: starts, open (``end`` and ``to_epoch`` None, ``how`` ``"running"``), and that entry is
#: replaced by the closed one when it ends; an open entry whose worker died unseen (its
#: launcher killed with it) is closed as ``"crashed"`` when a launcher hands the trial back.
SEGMENT_KEYS = ("slot", "device", "start", "end", "from_epoch", "to_epoch", "how")


#: Study user attribute: the launcher config the study was created with (JSON, storage masked).
CONFIG_ATTR = "lightning_hpo:config"

#: Study system attribute: the pruner's settings and rung ladders (JSON), see the pruners.
PRUNER_ATTR = "lightning_hpo:pruner"

#: Study system attribute: what the steps reported to the study count, ``"epoch"`` (epochs
#: completed) or ``"step"`` (optimizer steps done), as the first
#: :class:`~lightning_hpo.callbacks.PruningCallback` to report in the study wrote it; a study
#: without it (the launcher's, a plain Optuna study) counts epochs.
RESOURCE_ATTR = "lightning_hpo:resource"

#: Trial system attribute: the Hyperband bracket a trial was assigned to (int).
BRACKET_ATTR = "lightning_hpo:bracket"

#: The rung records' table in an RDB storage's database.
RUNG_RECORD_TABLE = "lightning_hpo_rung_records"

#: Prefix of the rung records' study system attributes in other storages.
RUNG_ATTR_PREFIX = "lightning_hpo:rung:"

#: Prefix of the rung records of a study with several objectives, on every storage: study
#: system attributes ``{prefix}{bracket}:{rung}:{trial_number}`` -> a list, one value per
#: objective (a decision reads every record of its rung: the order depends on all of them).
RUNG_VECTOR_ATTR_PREFIX = "lightning_hpo:rungs:"


def objective_curve(trial: HasAttrs) -> dict[int, tuple[float, ...]]:
    """A trial's values per epoch in a study with several objectives, ``{epoch: (v1, v2...)}``.

    They are the trial user attribute :data:`ATTR.OBJECTIVE_VALUES <ATTR>`, a list with one
    ``[epoch, v1, v2, ...]`` per epoch reported (epochs from 1, values in the order of the
    study's objectives, ``study.metric_names``), written by the
    :class:`~lightning_hpo.callbacks.PruningCallback` on rank 0 at each validation epoch's end.
    Optuna's ``trial.report`` refuses a multi-objective study; this list is what the pruners,
    the launcher's schedules and the report read, and pandas reads it as it is::

        rows = study.trials[0].user_attrs["objective_values"]
        curve = pandas.DataFrame(rows, columns=["epoch", *study.metric_names])

    Lenient: an entry that is not a list of numbers is skipped; ``null`` (JSON's NaN) reads as
    NaN.

    Example::

        >>> class T:
        ...     user_attrs = {"objective_values": [[1, 0.5, 120.0], [2, 0.4, None], "junk"]}
        >>> objective_curve(T())
        {1: (0.5, 120.0), 2: (0.4, nan)}
    """
    rows = trial.user_attrs.get(ATTR.OBJECTIVE_VALUES)
    curve: dict[int, tuple[float, ...]] = {}
    if not isinstance(rows, list):
        return curve
    for row in rows:
        if not isinstance(row, list) or len(row) < 2:
            continue
        epoch = as_count(row[0])
        values = [math.nan if v is None else as_number(v) for v in row[1:]]
        if epoch is None or epoch < 1 or any(v is None for v in values):
            continue
        curve[epoch] = tuple(float(v) for v in values)  # type: ignore[arg-type]
    return curve


def with_objective_values(
    trial: HasAttrs, epoch: int, values: Sequence[float]
) -> list[list[float | None]]:
    """The trial's :data:`ATTR.OBJECTIVE_VALUES <ATTR>` with ``epoch``'s values set (replacing
    an earlier report of that epoch), ascending by epoch; NaN and infinite values are written as
    ``None`` (JSON has no NaN), which :func:`objective_curve` reads back as NaN.

    Example::

        >>> class T:
        ...     user_attrs = {"objective_values": [[1, 0.5, 120.0]]}
        >>> with_objective_values(T(), 2, [0.4, float("nan")])
        [[1, 0.5, 120.0], [2, 0.4, None]]
    """
    curve = objective_curve(trial)
    curve[epoch] = tuple(float(v) for v in values)
    return [[e, *(v if math.isfinite(v) else None for v in curve[e])] for e in sorted(curve)]


def device_label(kind: str, devices: Sequence[int]) -> str:
    """What :data:`ATTR.DEVICE <ATTR>` holds: ``cuda:0,1`` for GPUs 0 and 1, ``cpu:0`` for a core.

    Example::

        >>> device_label("cpu", [3])
        'cpu:3'
    """
    return f"{'cuda' if kind == 'gpu' else 'cpu'}:{','.join(map(str, devices))}"


def devices_in_label(label: object) -> int | None:
    """How many devices a :func:`device_label` names; ``None`` for anything else.

    Example::

        >>> devices_in_label("cuda:0,1,2"), devices_in_label("cpu:0"), devices_in_label(None)
        (3, 1, None)
    """
    if not isinstance(label, str):
        return None
    kind, colon, ids = label.partition(":")
    parts = ids.split(",")
    if kind not in ("cpu", "cuda") or not colon or not all(part.isdigit() for part in parts):
        return None
    return len(parts)


# ---------------------------------------------------------------------------------------------
# Lenient readers of one stored value


def as_number(value: Any) -> float | None:
    """A finite number as a float; ``None`` for anything else (bools, NaN, strings included).

    Example::

        >>> as_number(3), as_number(True), as_number(float("nan")), as_number("1")
        (3.0, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def as_count(value: Any) -> int | None:
    """A non-negative int; ``None`` for anything else (bools included).

    Example::

        >>> as_count(4), as_count(-1), as_count(True), as_count(4.0)
        (4, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def as_text(value: Any) -> str | None:
    """A non-empty string; ``None`` for anything else."""
    return value if isinstance(value, str) and value else None


# ---------------------------------------------------------------------------------------------
# Records


class HasAttrs(Protocol):
    """What a record reader needs of a trial: its user attributes (a live ``optuna.Trial`` or a
    ``FrozenTrial``)."""

    @property
    def user_attrs(self) -> dict[str, Any]: ...


class StoredTrial(HasAttrs, Protocol):
    """A trial with its state too: Optuna's ``FrozenTrial``."""

    @property
    def state(self) -> Any: ...  # an optuna TrialState; only its ``name`` is read


@dataclass(frozen=True)
class Pause:
    """Why and where a RUNNING trial waits between two segments (:data:`ATTR.PAUSED <ATTR>`).

    Written by :func:`lightning_hpo.launch.study.trials.pause`; a trial whose segment goes on has
    ``None`` there. Fields another tool wrote in another form read as ``None``.

    Attributes:
        epoch: epochs in the checkpoint it resumes from.
        checkpoint: that checkpoint's file (``None``: it retrains from scratch).
        since: unix s when it paused.
        target: ``None`` when it waits at a rung for the schedule to promote or stop it; an
            epoch when it was interrupted (the budget, Ctrl-C, a crash) before reaching it, and
            is resumed to it first.
        why: in words (``"rung 4"``, ``"wall-clock budget reached ..."``).

    Example::

        >>> Pause.read({"epoch": 4, "since": 1.7e9, "target": None, "why": "rung 4"})
        Pause(epoch=4, checkpoint=None, since=1700000000.0, target=None, why='rung 4')
        >>> Pause.read("yes") is None, Pause.read({"epoch": True}).epoch is None
        (True, True)
    """

    epoch: int | None = None
    checkpoint: str | None = None
    since: float | None = None
    target: int | None = None
    why: str | None = None

    @property
    def at_rung(self) -> bool:
        """Whether it waits at a rung for a decision (not interrupted on the way to one)."""
        return self.target is None

    def to_attr(self) -> dict[str, Any]:
        """The value stored under :data:`ATTR.PAUSED <ATTR>` (keys :data:`PAUSED_KEYS`)."""
        return {key: getattr(self, key) for key in PAUSED_KEYS}

    @classmethod
    def read(cls, value: object) -> Pause | None:
        """The pause a stored value describes; ``None`` for ``None`` or a non-mapping."""
        if not isinstance(value, Mapping):
            return None
        return cls(as_count(value.get("epoch")), as_text(value.get("checkpoint")),
                   as_number(value.get("since")), as_count(value.get("target")),
                   as_text(value.get("why")))

    @classmethod
    def of(cls, trial: StoredTrial) -> Pause | None:
        """A RUNNING trial's pause; ``None`` while it trains, and for a finished trial (which
        may have left its last pause behind: read that with :meth:`read`)."""
        if getattr(trial.state, "name", None) != "RUNNING":
            return None
        return cls.read(trial.user_attrs.get(ATTR.PAUSED))


def is_paused(trial: StoredTrial) -> bool:
    """True for a RUNNING trial that waits between segments: the one answer to "is it paused".

    Example::

        >>> from types import SimpleNamespace as T
        >>> running = T(name="RUNNING")
        >>> is_paused(T(state=running, user_attrs={ATTR.PAUSED: {"epoch": 3}}))
        True
        >>> is_paused(T(state=running, user_attrs={ATTR.PAUSED: None}))
        False
    """
    return Pause.of(trial) is not None


@dataclass(frozen=True)
class Segment:
    """One stretch of a trial's training on one slot (unix s, epochs): an entry of
    :data:`ATTR.SEGMENTS <ATTR>`.

    The launcher lists a segment when it starts, open (``end`` and ``to_epoch`` ``None``, ``how``
    ``"running"``), and replaces that entry with the closed one when it ends
    (:func:`with_segment`); an open entry whose worker died unseen is closed as ``"crashed"``
    when a launcher hands the trial back.

    Attributes:
        start: unix s when it started.
        end: unix s when it ended; ``None`` while in flight.
        slot: the worker slot (``None`` when unknown).
        device: the devices, as :func:`device_label` writes them.
        host: the machine (not written by the launcher: a reader's fallback, the trial's host).
        from_epoch: epochs in the checkpoint it started from (0: from scratch).
        to_epoch: epochs done when it ended. One its worker paused (at a rung, or
            interrupted) ends at the epochs in the checkpoint it paused at, where the next
            segment starts: epochs an interrupted one reported past its last checkpoint
            are trained again by the next. One whose worker died ends at the last epoch
            it reported.
        how: how it ended: ``paused``, ``complete``, ``pruned``, ``interrupted``, ``crashed``,
            ``failed``; ``running`` (or ``None``) while in flight; ``None`` when unknown (an
            entry left open by a worker that died, closed by a reader).
        listed: True for an entry of :data:`ATTR.SEGMENTS <ATTR>`; False for the one segment a
            reader makes up for a trial that lists none (its whole run).

    Example::

        >>> seg = Segment.read({"slot": 1, "device": "cpu:1", "start": 10, "end": 14.5,
        ...                     "from_epoch": 2, "to_epoch": 4, "how": "paused"}, host="box")
        >>> seg.slot, seg.host, seg.end - seg.start, seg.epochs, seg.how
        (1, 'box', 4.5, 2, 'paused')
        >>> Segment.read({"start": 10, "end": 9}, host=None) is None  # ends before it starts
        True
        >>> Segment(10.0, None, slot=0, device="cpu:0", from_epoch=0, how="running").to_attr()
        {'slot': 0, 'device': 'cpu:0', 'start': 10.0, 'end': None, 'from_epoch': 0, \
'to_epoch': None, 'how': 'running'}
    """

    start: float
    end: float | None
    slot: int | None = None
    device: str | None = None
    host: str | None = None
    from_epoch: int | None = None
    to_epoch: int | None = None
    how: str | None = None
    listed: bool = True

    @property
    def devices(self) -> int | None:
        """How many devices its ``device`` names (``None`` when it names none)."""
        return devices_in_label(self.device)

    @property
    def epochs(self) -> int | None:
        """Epochs it trained (``to_epoch - from_epoch``), ``None`` when either is unknown."""
        if self.from_epoch is None or self.to_epoch is None or self.to_epoch < self.from_epoch:
            return None
        return self.to_epoch - self.from_epoch

    def closed(self, end: float, to_epoch: int, how: str) -> Segment:
        """This segment, ended at ``end`` (unix s) with ``to_epoch`` epochs done."""
        return dataclasses.replace(self, end=end, to_epoch=to_epoch, how=how)

    def to_attr(self) -> dict[str, Any]:
        """The entry stored in :data:`ATTR.SEGMENTS <ATTR>` (keys :data:`SEGMENT_KEYS`)."""
        return {key: getattr(self, key) for key in SEGMENT_KEYS}

    @classmethod
    def read(cls, value: object, host: str | None = None) -> Segment | None:
        """The segment a stored entry describes; ``None`` for an entry without a start time, or
        one that ends before it starts. ``host``: the trial's, for an entry that names none."""
        if not isinstance(value, Mapping):
            return None
        start, end = as_number(value.get("start")), as_number(value.get("end"))
        if start is None or (end is not None and end < start):
            return None
        return cls(start, end, as_count(value.get("slot")), as_text(value.get("device")),
                   as_text(value.get("host")) or host, as_count(value.get("from_epoch")),
                   as_count(value.get("to_epoch")), as_text(value.get("how")))

    @classmethod
    def open_last(cls, trial: HasAttrs) -> Segment | None:
        """The trial's last listed segment when it is still open (no ``end``), else ``None``."""
        raw = trial.user_attrs.get(ATTR.SEGMENTS)
        last = cls.read(raw[-1]) if isinstance(raw, list) and raw else None
        return last if last is not None and last.end is None else None


def with_segment(trial: HasAttrs, segment: Segment) -> list[Any]:
    """The trial's :data:`ATTR.SEGMENTS <ATTR>` with ``segment`` stored: it replaces the open
    last entry (the same segment, listed when it started), else it is appended.

    Example::

        >>> from types import SimpleNamespace as T
        >>> trial = T(user_attrs={ATTR.SEGMENTS: [{"start": 1.0, "end": 2.0},
        ...                                       {"start": 3.0, "end": None}]})
        >>> [s["end"] for s in with_segment(trial, Segment(3.0, 5.0, to_epoch=2))]
        [2.0, 5.0]
    """
    raw = trial.user_attrs.get(ATTR.SEGMENTS)
    entries = list(raw) if isinstance(raw, list) else []
    if entries and Segment.open_last(trial) is not None:
        entries = entries[:-1]
    return [*entries, segment.to_attr()]


@dataclass(frozen=True)
class ResumePoint:
    """A trial's latest resume checkpoint (:data:`ATTR.RESUME_POINT <ATTR>`): where a crashed or
    interrupted trial resumes from. Written by the worker each time it saves one.

    Example::

        >>> point = ResumePoint(epoch=4, checkpoint="/runs/s/trial_00003/resume.ckpt")
        >>> ResumePoint.read(point.to_attr()) == point, ResumePoint.read({"epoch": 4})
        (True, None)
    """

    epoch: int
    checkpoint: str

    def to_attr(self) -> dict[str, Any]:
        """The value stored under :data:`ATTR.RESUME_POINT <ATTR>`."""
        return {"epoch": self.epoch, "checkpoint": self.checkpoint}

    @classmethod
    def read(cls, value: object) -> ResumePoint | None:
        """The resume point a stored value describes; ``None`` without a checkpoint path."""
        if not isinstance(value, Mapping):
            return None
        path = as_text(value.get("checkpoint"))
        return None if path is None else cls(as_count(value.get("epoch")) or 0, path)

    @classmethod
    def of(cls, trial: HasAttrs) -> ResumePoint | None:
        """The trial's resume point, if it has one."""
        return cls.read(trial.user_attrs.get(ATTR.RESUME_POINT))


@dataclass(frozen=True)
class Owner:
    """The worker that holds a trial's segment in flight (:data:`ATTR.OWNER <ATTR>`), stored as
    the token ``"host:pid:n"`` (``n``: the worker's segment count), written first after a claim
    so that a worker that dies from then on is known.

    Example::

        >>> owner = Owner("vm-3", 4242, 7)
        >>> owner.token, Owner.read("vm-3:4242:7") == owner, Owner.read("vm-3:x:7")
        ('vm-3:4242:7', True, None)
        >>> Owner.read("a:b:c:42:1")   # a host name may hold colons
        Owner(host='a:b:c', pid=42, n=1)
    """

    host: str
    pid: int
    n: int

    @property
    def token(self) -> str:
        """The value stored under :data:`ATTR.OWNER <ATTR>`."""
        return f"{self.host}:{self.pid}:{self.n}"

    @classmethod
    def read(cls, value: object) -> Owner | None:
        """The owner a stored token names; ``None`` for anything else."""
        parts = value.rsplit(":", 2) if isinstance(value, str) else []
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        return cls(parts[0], int(parts[1]), int(parts[2]))

    @classmethod
    def of(cls, trial: HasAttrs) -> Owner | None:
        """The trial's owner, if it names one."""
        return cls.read(trial.user_attrs.get(ATTR.OWNER))
