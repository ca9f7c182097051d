"""Every name lightning_hpo writes into an Optuna study, and the one format it writes in a value.

The pruners, the launcher and the callback write these; the report and the live view read them.
Nothing here imports Optuna or torch: it is the contract between writers and readers, so a
reader needs no writer's module to understand a study.

What a study may hold:

* per trial, **user attributes** (:class:`ATTR`): where and when the launcher ran it, its
  epochs, checkpoint, seed, and why it stopped; visible in ``optuna-dashboard`` and
  ``study.trials_dataframe()``;
* per trial, a **system attribute** :data:`BRACKET_ATTR`: the Hyperband bracket of a trial that
  reached its first rung (or, under promotion-type Hyperband, the bracket it was started in);
* for the pausing schedules (``sync_sh``, ``sync_hyperband``, ``mode: promotion``) and crash
  resume, a paused trial stays RUNNING in Optuna's terms with :data:`ATTR.PAUSED <ATTR>` set,
  and its training segments are listed in :data:`ATTR.SEGMENTS <ATTR>`;
* per study, a **user attribute** :data:`CONFIG_ATTR` (the launcher's config, storage masked)
  and a **system attribute** :data:`PRUNER_ATTR` (the pruner's rung ladders, written by the
  pruner itself, so studies driven by the callback alone carry it too);
* rung records: the table :data:`RUNG_RECORD_TABLE` in an RDB storage's own database, or study
  system attributes named ``{RUNG_ATTR_PREFIX}{bracket}:{rung}:{trial_number}`` elsewhere.

Example::

    >>> device_label("gpu", (0, 1)), devices_in_label("cuda:0,1")
    ('cuda:0,1', 2)
    >>> ATTR.STOP_REASON
    'stop_reason'
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ATTR",
    "BRACKET_ATTR",
    "CONFIG_ATTR",
    "PAUSED_KEYS",
    "PRUNER_ATTR",
    "RUNG_ATTR_PREFIX",
    "RUNG_RECORD_TABLE",
    "SEGMENT_KEYS",
    "device_label",
    "devices_in_label",
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
    FAIL_REASON = "fail_reason"  # why a FAIL trial failed
    STOP_REASON = "stop_reason"  # why the study's budget stopped a PRUNED trial, and where
    PRUNED_AT_EPOCH = "pruned_at_epoch"  # the epoch at which the pruner (or a schedule) stopped it
    # Pausing schedules and crash resume (the launcher's scheduler, lightning_hpo.launch.scheduler)
    PAUSED = "paused"  # a dict while the trial waits between segments (see PAUSED_KEYS), else None
    TARGET = "target_epoch"  # the epoch its segment in flight trains to (int)
    ROUND = "round"  # its synchronous successive-halving round (int; sync_sh, sync_hyperband)
    SEGMENTS = "segments"  # one dict per training segment, see SEGMENT_KEYS
    ATTEMPTS = "failed_attempts"  # why earlier attempts died (list of str); retried while short
    RESUME_POINT = "resume_point"  # {"epoch": int, "checkpoint": str}: its latest checkpoint
    EPOCHS_TRAINED = "epochs_trained"  # epochs trained over all segments (retrains included)
    OWNER = "owner"  # "host:pid:token" of the worker training its segment in flight
    DATA = "data"  # where its batches came from, in words (TensorDataModule.data_path)


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

#: Trial system attribute: the Hyperband bracket a trial was assigned to (int).
BRACKET_ATTR = "lightning_hpo:bracket"

#: The rung records' table in an RDB storage's database.
RUNG_RECORD_TABLE = "lightning_hpo_rung_records"

#: Prefix of the rung records' study system attributes in other storages.
RUNG_ATTR_PREFIX = "lightning_hpo:rung:"


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
