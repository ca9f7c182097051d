"""Checkpoints a trial pauses at and resumes from: :class:`ResumeCheckpoint`, :class:`RandomState`.

A paused trial continues later, possibly in another process on another slot, from its resume
checkpoint: a full Lightning checkpoint plus the random-number state that decides shuffling and
dropout, which Lightning does not save. With both callbacks, resumed training repeats straight
training exactly (on CPU with ``deterministic=True``). Resuming is a plain ``fit`` with
``ckpt_path``: a checkpoint written after epoch ``e`` and ``Trainer(max_epochs=T)`` train
epochs ``e+1 .. T``, each once; it loads with ``weights_only=True`` when the hyperparameters are
plain values. Example (the paused segment, then the resumed one)::

    def trainer(max_epochs, resume):
        return L.Trainer(max_epochs=max_epochs, callbacks=[RandomState(), resume])

    L.seed_everything(0)
    first = ResumeCheckpoint("runs/trial_00003/resume.ckpt", every="rung", rungs=[2, 4])
    trainer(2, first).fit(LeNet(), datamodule=DigitsDataModule())
    epochs, path = first.last                       # (2, "runs/trial_00003/resume.ckpt")

    second = ResumeCheckpoint(path, every="rung", rungs=[2, 4])
    trainer(4, second).fit(LeNet(), datamodule=DigitsDataModule(), ckpt_path=path,
                           weights_only=True)       # trains epochs 3 and 4

The checkpoint is written in ``on_train_epoch_end`` (after validation and every
``ModelCheckpoint``), which Lightning resumes at the next epoch's start; one written in
``on_validation_end`` would resume into a different training run. The random state is restored
before the training loader's first iterator draws its shuffling seed, so the first resumed epoch
shuffles as straight training would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint
from lightning.pytorch.plugins.io import AsyncCheckpointIO
from lightning.pytorch.utilities import rank_zero_warn
from typing_extensions import override

from lightning_hpo.errors import ConfigError, field_choice, field_float, field_int

__all__ = [
    "EVERY_CHOICES",
    "Every",
    "RANDOM_STATE_KEY",
    "CheckpointWriteError",
    "RandomState",
    "ResumeCheckpoint",
]

_logger = logging.getLogger(__name__)

#: The checkpoint's top-level key under which :class:`RandomState` stores the generators' state.
RANDOM_STATE_KEY = "lightning_hpo_random_state"

#: The values of :class:`ResumeCheckpoint`'s ``every`` (the config's ``checkpoint.every``).
EVERY_CHOICES: tuple[str, ...] = ("auto", "epoch", "rung")

#: The type of :class:`ResumeCheckpoint`'s ``every``.
Every = Literal["auto", "epoch", "rung"]


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, folder not writable); names the file.

    Example::

        >>> str(CheckpointWriteError("cannot write checkpoint /runs/t/resume.ckpt: No space"))
        'cannot write checkpoint /runs/t/resume.ckpt: No space'
    """


# --------------------------------------------------------------------------------------------
# Random-number state, in types ``torch.load(weights_only=True)`` accepts.

#: Set by ``seed_everything``: the seed of the ``DistributedSampler`` Lightning adds under DDP
#: (it shuffles by ``seed + epoch``, not from the generators) and whether loader workers are
#: seeded from it.
_SEED_VARIABLES = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")


def _capture(device: torch.device | None) -> dict[str, Any]:
    """This process's generators (torch CPU, CUDA ``device`` if given, numpy, Python) and
    Lightning's seed variables."""
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "python": {
            "version": int(version),
            "internal": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": None if gauss_next is None else float(gauss_next),
        },
        "cuda": None,
        "environment": {name: os.environ.get(name) for name in _SEED_VARIABLES},
    }
    if device is not None:
        state["cuda"] = {"index": device.index, "state": torch.cuda.get_rng_state(device)}
    return state


def _restore(state: dict[str, Any], device: torch.device | None) -> None:
    """Set this process's generators and seed variables from :func:`_capture`'s ``state``."""
    torch.set_rng_state(state["torch"])
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    python_state = state["python"]
    random.setstate(
        (
            python_state["version"],
            tuple(int(value) for value in python_state["internal"].tolist()),
            python_state["gauss_next"],
        )
    )
    if device is not None and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"]["state"], device)
    for name, value in state.get("environment", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _cuda_device(trainer: L.Trainer) -> torch.device | None:
    """The trainer's CUDA device on this rank, or None when it trains elsewhere."""
    device = trainer.strategy.root_device
    return device if device.type == "cuda" else None


class RandomState(L.Callback):
    """Save the random-number state in every checkpoint and restore it when training resumes.

    Lightning's checkpoint holds the model, optimizer, schedulers and loops but not the state of
    torch's CPU generator (which draws the shuffling seed of each epoch and the dropout masks),
    the trainer's CUDA generator, numpy's global generator or Python's ``random``, nor the
    global seed ``seed_everything`` put in ``PL_GLOBAL_SEED`` (the seed of the
    ``DistributedSampler`` that shuffles under DDP) and ``PL_SEED_WORKERS``. Without them a
    resumed run shuffles and drops out differently from the straight run it continues. This
    callback stores them under :data:`RANDOM_STATE_KEY`, as tensors, ints, floats, strings and
    dicts only, so the checkpoint loads with ``weights_only=True``, and sets them back while
    ``fit(ckpt_path=...)`` restores the callbacks, before the training data loader is built and
    its first batch drawn.

    Under DDP each rank's state is kept (gathered when the checkpoint is made, which every rank
    does in ``trainer.save_checkpoint``) and each rank gets its own back. Resumed on another
    number of ranks, every rank gets rank 0's state, with a warning. A checkpoint without the
    state (saved without this callback) resumes with a warning and the generators untouched.

    Not covered: generators inside data-loader worker processes (``num_workers > 0``) and
    ``torch.Generator`` objects of the user's own; the data modules here draw in the main
    process.

    Example::

        >>> import random
        >>> import lightning as L
        >>> from lightning_hpo import RandomState
        >>> trainer = L.Trainer(callbacks=[RandomState()], logger=False)
        >>> checkpoint: dict = {}
        >>> _ = random.random()
        >>> RandomState().on_save_checkpoint(trainer, None, checkpoint)
        >>> first = random.random()
        >>> RandomState().on_load_checkpoint(trainer, None, checkpoint)
        >>> random.random() == first
        True
    """

    @override
    def on_save_checkpoint(
        self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]
    ) -> None:
        mine = _capture(_cuda_device(trainer))
        ranks = [mine]
        if trainer.world_size > 1 and torch.distributed.is_initialized():
            gathered: list[Any] = [None] * trainer.world_size
            torch.distributed.all_gather_object(gathered, mine)
            ranks = gathered
        checkpoint[RANDOM_STATE_KEY] = {"world_size": len(ranks), "ranks": ranks}

    @override
    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: Any, checkpoint: dict[str, Any]
    ) -> None:
        saved = checkpoint.get(RANDOM_STATE_KEY)
        if saved is None:
            rank_zero_warn(
                "lightning_hpo: the checkpoint holds no random state (saved without "
                "RandomState); resumed training will not repeat straight training"
            )
            return
        ranks = saved["ranks"]
        if len(ranks) == trainer.world_size:
            state = ranks[trainer.global_rank]
        else:
            rank_zero_warn(
                f"lightning_hpo: the checkpoint holds the random state of {len(ranks)} rank(s) "
                f"but this run has {trainer.world_size}; every rank takes rank 0's"
            )
            state = ranks[0]
        _restore(state, _cuda_device(trainer))


# --------------------------------------------------------------------------------------------
# The resume checkpoint.


def _reason(error: BaseException) -> str:
    """The operating system's words for a failed write, e.g. ``"No space left on device"``."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return str(error) or type(error).__name__


class ResumeCheckpoint(Checkpoint):
    """Write a trial's resume checkpoint at epoch ends, atomically, under a saving policy.

    The file at ``path`` always holds a complete checkpoint: each save writes ``path + ".tmp"``
    in the same folder and renames it over ``path`` (``os.replace``). When the write fails the
    previous checkpoint stays as it was, the partial file is removed, and
    :class:`CheckpointWriteError` names ``path``; under DDP every rank raises it.

    When it saves, at the end of epoch ``e`` (epochs completed, from 1):

    * ``every="epoch"``: every epoch;
    * ``every="rung"``: when ``e`` is in ``rungs``;
    * ``every="auto"`` (default): every epoch while the first save of this ``fit`` took less
      than ``budget`` (a fraction, default 0.05) of that epoch's wall time, else as ``"rung"``
      from then on; the first save always happens, it is the measurement;

    and in every policy at ``trainer.max_epochs`` (the segment's end) and, with ``save_on_stop``,
    at an epoch after which training stops early (``trainer.should_stop``, e.g. the launcher's
    budget stop or a pruner), so that the trial can resume where it stopped. Rank 0 decides and
    broadcasts the decision, so every DDP rank takes part in the same saves; only rank 0 writes.

    It saves in ``on_train_epoch_end`` after the other callbacks' epoch-end hooks (Lightning
    runs ``Checkpoint`` callbacks last), so the epoch's metric is reported and each
    ``ModelCheckpoint`` has updated; list it after every ``ModelCheckpoint`` in
    ``Trainer(callbacks=[...])`` (``fit`` raises :class:`~lightning_hpo.errors.ConfigError`
    otherwise). Being a ``Checkpoint``, it stands in for Lightning's default
    ``ModelCheckpoint`` (none is added beside it) and needs ``enable_checkpointing=True``, the
    default. Add :class:`RandomState` too, or resumed training differs from straight
    training. Resume with ``trainer.fit(model, datamodule=data, ckpt_path=path,
    weights_only=True)``; see the module's docstring.

    Args:
        path: the checkpoint file, e.g. ``runs/study/trial_00003/resume.ckpt``; its folder is
            created if missing.
        every: ``"auto"``, ``"epoch"`` or ``"rung"``, as above.
        rungs: the epochs (from 1) that are rungs, for ``"rung"`` and ``"auto"``.
        budget: for ``"auto"``: the largest ratio of save time to epoch time (both seconds)
            at which it keeps saving every epoch, ``>= 0``.
        on_save: called on global rank 0 after each save with ``(epochs completed, path)``;
            the launcher records the trial's resume point there.
        save_on_stop: also save at an epoch after which training stops early.

    Attributes:
        last: ``(epochs completed, path)`` of the latest save of this ``fit``, or None.
        saved_epochs: the epochs after which it saved, in this ``fit``.
        save_seconds: wall time of each save (rank 0's; seconds), in this ``fit``.
        epoch_seconds: wall time of each epoch, training plus validation (seconds).
        load_seconds: when ``fit`` resumed from a checkpoint: seconds from this callback's
            ``setup`` to its ``on_load_checkpoint``, i.e. reading the file and restoring the
            model (the optimizer and loop states, restored just after, are small copies); else
            None.
        every_epoch: whether it currently saves at every epoch (``"auto"`` switches it off;
            rank 0's decision, which every rank follows).

    Example::

        >>> from lightning_hpo import ResumeCheckpoint
        >>> checkpoint = ResumeCheckpoint("runs/t/resume.ckpt", every="rung", rungs=[1, 3, 9])
        >>> checkpoint.every_epoch, checkpoint.last
        (False, None)
        >>> ResumeCheckpoint("runs/t/resume.ckpt", every="always")
        Traceback (most recent call last):
        ...
        lightning_hpo.errors.ConfigError: every: is 'always'; allowed: auto, epoch, rung
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        every: Every = "auto",
        rungs: Iterable[int] = (),
        budget: float = 0.05,
        on_save: Callable[[int, str], None] | None = None,
        save_on_stop: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise ConfigError("path", f"must be a file path, got {path!r}")
        self.path = os.fspath(path)
        self.every: Every = field_choice("every", every, EVERY_CHOICES)  # type: ignore[assignment]
        self.rungs = frozenset(field_int("rungs", rung, minimum=1) for rung in rungs)
        self.budget = field_float("budget", budget, low=0.0)
        if on_save is not None and not callable(on_save):
            raise ConfigError("on_save", f"must be callable or None, got {on_save!r}")
        self.on_save = on_save
        self.save_on_stop = bool(save_on_stop)
        self.every_epoch = every != "rung"
        self.last: tuple[int, str] | None = None
        self.saved_epochs: list[int] = []
        self.save_seconds: list[float] = []
        self.epoch_seconds: list[float] = []
        self.load_seconds: float | None = None
        self._setup_time: float | None = None
        self._epoch_start: float | None = None

    @override
    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._setup_time = time.perf_counter()
        if stage != "fit":
            return
        self.every_epoch = self.every != "rung"
        self.last, self.load_seconds = None, None
        self.saved_epochs, self.save_seconds, self.epoch_seconds = [], [], []
        ours = trainer.checkpoint_callbacks  # in the order Lightning calls them
        later = ours[ours.index(self) + 1 :] if self in ours else []
        if any(isinstance(callback, ModelCheckpoint) for callback in later):
            raise ConfigError(
                "callbacks",
                "ResumeCheckpoint must come after every ModelCheckpoint in Trainer(callbacks="
                "[...]), so that its checkpoint holds their state for the epoch",
            )
        if isinstance(trainer.strategy.checkpoint_io, AsyncCheckpointIO):
            raise ConfigError(
                "plugins",
                "ResumeCheckpoint needs a synchronous CheckpointIO (it renames the file once "
                "written); AsyncCheckpointIO is not supported",
            )

    @override
    def on_load_checkpoint(
        self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if self._setup_time is not None:
            self.load_seconds = time.perf_counter() - self._setup_time

    @override
    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._epoch_start = time.perf_counter()

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        epoch = trainer.current_epoch + 1  # epochs completed once this hook returns
        seconds = time.perf_counter() - (self._epoch_start or self._setup_time or 0.0)
        self.epoch_seconds.append(seconds)
        self._epoch_start = None
        save = False
        if trainer.is_global_zero:
            save = self._due(epoch, trainer)
        if not trainer.strategy.broadcast(save, src=0):
            return
        saved_in = self._save(trainer, epoch)
        if trainer.is_global_zero and self.every == "auto" and len(self.saved_epochs) == 1:
            self.every_epoch = saved_in < self.budget * seconds
            if not self.every_epoch:
                _logger.info(
                    "checkpoint %s took %.3g s, %.1f%% of epoch %d (budget %.1f%%): saving "
                    "only at rungs from now on",
                    self.path, saved_in, 100 * saved_in / max(seconds, 1e-12), epoch,
                    100 * self.budget,
                )

    def _due(self, epoch: int, trainer: L.Trainer) -> bool:
        """Whether to save after ``epoch`` (rank 0's decision)."""
        max_epochs = trainer.max_epochs
        at_end = max_epochs is not None and 0 < max_epochs <= epoch
        stopping = self.save_on_stop and trainer.should_stop
        return self.every_epoch or epoch in self.rungs or at_end or stopping

    def _save(self, trainer: L.Trainer, epoch: int) -> float:
        """Write the checkpoint atomically on every rank's behalf; returns its seconds.

        Every rank leaves through the same door: a failure on rank 0 (where the file is
        written and ``on_save`` runs) is broadcast, and every rank raises.
        """
        temporary = self.path + ".tmp"
        started = time.perf_counter()
        failure: Exception | None = None
        written = True  # False: the file is not in place (the failure is a write error)
        try:
            # every rank; rank 0 writes, then a barrier. Full state: it resumes training.
            trainer.save_checkpoint(temporary, weights_only=False)
        except Exception as error:
            failure, written = error, False
            trainer.strategy.barrier("ResumeCheckpoint")  # the one the failed save skipped
        if trainer.is_global_zero and failure is None:
            try:
                # Lightning's writer swallows some errors (a PermissionError in 2.6) and leaves
                # no file: the rename then fails and says so.
                os.replace(temporary, self.path)
            except OSError as error:
                failure, written = error, False
        if not written and trainer.is_global_zero:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        seconds = time.perf_counter() - started
        if trainer.is_global_zero and failure is None and self.on_save is not None:
            try:
                self.on_save(epoch, self.path)
            except Exception as error:
                failure = error
        message = None
        if failure is not None and not written and isinstance(failure, OSError):
            message = f"cannot write checkpoint {self.path}: {_reason(failure)}"
        elif failure is not None:
            what = "writing" if not written else "on_save after writing"
            message = f"{what} checkpoint {self.path} failed: {type(failure).__name__}: {failure}"
        kind, message = trainer.strategy.broadcast(
            ("write" if isinstance(failure, OSError) and not written else "other", message), src=0
        )
        if message is not None:
            if kind == "write":
                raise CheckpointWriteError(message) from failure
            if failure is not None:
                raise failure  # rank 0's own error, as it was raised
            raise RuntimeError(f"global rank 0: {message}")
        self.last = (epoch, self.path)
        self.saved_epochs.append(epoch)
        if trainer.is_global_zero:
            self.save_seconds.append(seconds)
        return seconds
