"""Pause and resume: ``ResumeCheckpoint`` and ``RandomState`` (lightning_hpo.checkpointing).

The core claim: with ``deterministic=True`` on CPU, a trial paused after epoch 2 and resumed to
epoch 4 (a new Trainer, model and data module, the global generators scrambled; and once in a
fresh process; and once under DDP) ends with the same weights and validation values as the
same configuration trained straight to epoch 4, and without ``RandomState`` it does not.

This file is also the script of its subprocess tests:
``python tests/unit/test_checkpointing.py resume CHECKPOINT OUT_JSON THREADS`` and
``python tests/unit/test_checkpointing.py ddp OUT_DIR``.
"""

from __future__ import annotations

import errno
import json
import os
import random
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Checkpoint, ModelCheckpoint
from lightning.pytorch.plugins import TorchCheckpointIO

from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import DropoutMLP, LeNet
from lightning_hpo.checkpointing import (
    RANDOM_STATE_KEY,
    CheckpointWriteError,
    RandomState,
    ResumeCheckpoint,
)
from lightning_hpo.errors import ConfigError

_REPO_ROOT = Path(__file__).resolve().parents[2]
_PAUSE, _MAX = 2, 4  # pause after epoch 2 (a rung), resume to epoch 4 (max_resource)
_RUNGS = (2, 4)
_SEED, _OTHER_SEED = 0, 12345
#: Dropout makes the torch generator matter beyond shuffling.
_MLP = {"lr": 0.1, "num_hiddens_1": 64, "num_hiddens_2": 32, "dropout_1": 0.5, "dropout_2": 0.5}
_MODELS = {"dropout_mlp": (DropoutMLP, _MLP), "lenet": (LeNet, {"lr": 0.1})}
#: 8 of the 23 shuffled training batches per epoch (which 8 depends on the shuffle), 3 of 6
#: validation batches: short epochs, with shuffling and dropout as in full ones.
_LIMITS = {"limit_train_batches": 8, "limit_val_batches": 3}


# ------------------------------------------------------------------------------------------
# Helpers (also used by the subprocess scripts at the bottom).


class _Record(L.Callback):
    """The epochs that started, and the validation values at each epoch's end."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.values: dict[int, dict[str, float]] = {}

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started.append(trainer.current_epoch + 1)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            metrics = trainer.callback_metrics
            self.values[trainer.current_epoch + 1] = {
                name: float(metrics[name]) for name in ("validation_error", "validation_loss")
            }


def _trainer(max_epochs: int, callbacks: list[L.Callback], root: Path, **kwargs: Any) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        devices=kwargs.pop("devices", 1),
        max_epochs=max_epochs,
        deterministic=True,
        callbacks=callbacks,
        logger=False,
        enable_checkpointing=any(isinstance(cb, Checkpoint) for cb in callbacks),
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(root),
        **kwargs,
    )


def _build(name: str, seed: int) -> tuple[L.LightningModule, DigitsDataModule]:
    L.seed_everything(seed, verbose=False)
    cls, kwargs = _MODELS[name]
    return cls(**kwargs), DigitsDataModule(batch_size=64)


def _best(folder: Path) -> ModelCheckpoint:
    return ModelCheckpoint(
        dirpath=folder, filename="best", monitor="validation_error", mode="min",
        save_top_k=1, enable_version_counter=False,
    )


def _state(model: L.LightningModule) -> dict[str, torch.Tensor]:
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def _max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[key].double() - b[key].double()).abs().max()) for key in a)


def _straight(name: str, folder: Path) -> dict[str, Any]:
    """Train ``name`` straight to ``_MAX`` epochs (no RandomState, no resume checkpoint)."""
    model, data = _build(name, _SEED)
    record, best = _Record(), _best(folder)
    _trainer(_MAX, [record, best], folder, **_LIMITS).fit(model, datamodule=data)
    return {
        "record": record, "state": _state(model), "best_score": float(best.best_model_score),
        "best_epoch": torch.load(best.best_model_path, weights_only=True)["epoch"] + 1,
    }


def _pause(name: str, folder: Path, random_state: bool = True) -> ResumeCheckpoint:
    """The first segment: train to the rung ``_PAUSE`` and write the resume checkpoint."""
    model, data = _build(name, _SEED)
    resume = ResumeCheckpoint(folder / "resume.ckpt", every="rung", rungs=_RUNGS)
    callbacks: list[L.Callback] = [_Record(), _best(folder), resume]
    if random_state:
        callbacks.insert(0, RandomState())
    _trainer(_PAUSE, callbacks, folder, **_LIMITS).fit(model, datamodule=data)
    return resume


def _resume(
    name: str, folder: Path, checkpoint: str, random_state: bool = True
) -> dict[str, Any]:
    """The second segment, as another worker runs it: everything new, other seed."""
    model, data = _build(name, _OTHER_SEED)
    for _ in range(3):  # and the generators moved on, as in a process that did other work
        torch.rand(7), np.random.rand(3), random.random()
    record, best = _Record(), _best(folder)
    resume = ResumeCheckpoint(checkpoint, every="rung", rungs=_RUNGS)
    callbacks: list[L.Callback] = [record, best, resume]
    if random_state:
        callbacks.insert(0, RandomState())
    _trainer(_MAX, callbacks, folder, **_LIMITS).fit(
        model, datamodule=data, ckpt_path=checkpoint, weights_only=True
    )
    return {
        "record": record, "state": _state(model), "resume": resume,
        "best_score": float(best.best_model_score),
        "best_epoch": torch.load(best.best_model_path, weights_only=True)["epoch"] + 1,
    }


@pytest.fixture(scope="module", autouse=True)
def _torch_settings() -> Iterator[None]:
    """One torch thread (these small models run faster so on shared cores), and back to the
    process's settings when the module is done, including the flags
    ``Trainer(deterministic=True)`` switches (autouse: set up before the other fixtures)."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    benchmark = torch.backends.cudnn.benchmark
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    torch.backends.cudnn.benchmark = benchmark
    if workspace is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each model trained straight through, once for the module."""
    return {name: _straight(name, tmp_path_factory.mktemp(name)) for name in _MODELS}


# ------------------------------------------------------------------------------------------
# Pause and resume equals no pause.


_SAME_FOLDER = "ignore:Checkpoint directory .* exists and is not empty"  # the trial's own


@pytest.mark.filterwarnings(_SAME_FOLDER)
@pytest.mark.parametrize("name", list(_MODELS))
def test_paused_and_resumed_equals_straight(
    name: str, straight: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    first = _pause(name, tmp_path)
    assert first.last == (_PAUSE, str(tmp_path / "resume.ckpt"))
    second = _resume(name, tmp_path, str(tmp_path / "resume.ckpt"))
    reference = straight[name]

    # epochs 3 and 4 trained, each once, and reported once
    assert second["record"].started == [3, 4]
    assert sorted(second["record"].values) == [3, 4]
    for epoch in (3, 4):
        for metric, value in second["record"].values[epoch].items():
            assert value == pytest.approx(reference["record"].values[epoch][metric], abs=1e-6)
    assert _max_difference(second["state"], reference["state"]) <= 1e-6
    # the ModelCheckpoint("best") of the resumed trainer carried on from the paused one
    assert second["best_score"] == pytest.approx(reference["best_score"], abs=1e-6)
    assert second["best_epoch"] == reference["best_epoch"]
    # the segment's end is saved; the restore was timed
    assert second["resume"].saved_epochs == [_MAX]
    assert second["resume"].last == (_MAX, str(tmp_path / "resume.ckpt"))
    assert second["resume"].load_seconds is not None and second["resume"].load_seconds > 0
    assert first.load_seconds is None


@pytest.mark.filterwarnings(_SAME_FOLDER)
def test_without_random_state_resumed_training_differs(
    straight: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The control: the same pause and resume without RandomState lands elsewhere."""
    _pause("dropout_mlp", tmp_path, random_state=False)
    second = _resume("dropout_mlp", tmp_path, str(tmp_path / "resume.ckpt"), random_state=False)
    reference = straight["dropout_mlp"]
    assert second["record"].started == [3, 4]
    assert _max_difference(second["state"], reference["state"]) > 1e-3
    resumed_loss = second["record"].values[_MAX]["validation_loss"]
    assert resumed_loss != pytest.approx(
        reference["record"].values[_MAX]["validation_loss"], abs=1e-6
    )


def _resume_script(checkpoint: str, out_json: str, threads: int) -> None:
    """Subprocess side of the fresh-process test: resume and write what it reached."""
    torch.set_num_threads(threads)
    folder = Path(checkpoint).parent
    result = _resume("dropout_mlp", folder, checkpoint)
    torch.save(result["state"], folder / "resumed_state.pt")
    Path(out_json).write_text(json.dumps({
        "started": result["record"].started,
        "values": {str(epoch): value for epoch, value in result["record"].values.items()},
        "best_epoch": result["best_epoch"], "best_score": result["best_score"],
    }))


@pytest.mark.slow  # a fresh interpreter imports torch and Lightning (~7 s here)
def test_resumed_in_a_fresh_process_equals_straight(
    straight: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from helpers.support import ddp_clean_env, run_job

    _pause("dropout_mlp", tmp_path)
    out = tmp_path / "resumed.json"
    command = [sys.executable, __file__, "resume", str(tmp_path / "resume.ckpt"), str(out),
               str(torch.get_num_threads())]
    proc = run_job(command, cwd=_REPO_ROOT, env=ddp_clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    reference = straight["dropout_mlp"]
    assert result["started"] == [3, 4]
    for epoch in (3, 4):
        for metric, value in result["values"][str(epoch)].items():
            assert value == pytest.approx(reference["record"].values[epoch][metric], abs=1e-6)
    state = torch.load(tmp_path / "resumed_state.pt", weights_only=True)
    assert _max_difference(state, reference["state"]) <= 1e-6
    assert result["best_epoch"] == reference["best_epoch"]


# ------------------------------------------------------------------------------------------
# RandomState on its own.


def test_random_state_round_trip_through_weights_only_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = _trainer(1, [], tmp_path)
    checkpoint: dict[str, Any] = {}
    monkeypatch.setenv("PL_GLOBAL_SEED", "7")  # DistributedSampler's shuffling seed
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
    torch.manual_seed(3), np.random.seed(4), random.seed(5)
    np.random.standard_normal()  # numpy caches a gaussian: that is state too
    RandomState().on_save_checkpoint(trainer, None, checkpoint)
    expected = (torch.rand(5), np.random.standard_normal(5), [random.random() for _ in range(5)])
    torch.save(checkpoint, tmp_path / "state.ckpt")

    L.seed_everything(99, workers=True, verbose=False)  # another seed, workers seeded
    np.random.seed(99), random.seed(99)
    loaded = torch.load(tmp_path / "state.ckpt", weights_only=True)
    RandomState().on_load_checkpoint(trainer, None, loaded)
    assert os.environ.get("PL_GLOBAL_SEED") == "7"
    assert "PL_SEED_WORKERS" not in os.environ
    assert torch.equal(torch.rand(5), expected[0])
    assert np.array_equal(np.random.standard_normal(5), expected[1])
    assert [random.random() for _ in range(5)] == expected[2]
    assert loaded[RANDOM_STATE_KEY]["world_size"] == 1


def test_random_state_warns_on_a_checkpoint_without_it(tmp_path: Path) -> None:
    trainer = _trainer(1, [], tmp_path)
    before = torch.get_rng_state()
    with pytest.warns(UserWarning, match="holds no random state"):
        RandomState().on_load_checkpoint(trainer, None, {})
    assert torch.equal(torch.get_rng_state(), before)


# ------------------------------------------------------------------------------------------
# ResumeCheckpoint: the checkpoint file, the policies, atomic writes.


def _fast_fit(tmp_path: Path, resume: ResumeCheckpoint, max_epochs: int, *extra: L.Callback,
              **kwargs: Any) -> None:
    """A few batches per epoch: fast policy tests."""
    model, data = _build("dropout_mlp", _SEED)
    trainer = _trainer(max_epochs, [*extra, RandomState(), resume], tmp_path,
                       limit_train_batches=2, limit_val_batches=1, num_sanity_val_steps=0,
                       **kwargs)
    trainer.fit(model, datamodule=data)


def test_checkpoint_loads_with_weights_only_and_holds_the_full_state(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "resume.ckpt"  # a folder that does not exist yet
    resume = ResumeCheckpoint(path, every="epoch")
    _fast_fit(tmp_path, resume, 2, _best(tmp_path))
    checkpoint = torch.load(path, weights_only=True)
    assert checkpoint["epoch"] + 1 == 2  # Lightning counts epochs from 0
    for key in ("state_dict", "optimizer_states", "lr_schedulers", "loops", "callbacks",
                RANDOM_STATE_KEY):
        assert key in checkpoint, key
    assert any(key.startswith("ModelCheckpoint") for key in checkpoint["callbacks"])
    assert not os.path.exists(f"{path}.tmp")


def test_save_and_epoch_times_are_measured(tmp_path: Path) -> None:
    resume = ResumeCheckpoint(tmp_path / "resume.ckpt", every="epoch")
    _fast_fit(tmp_path, resume, 3)
    assert len(resume.save_seconds) == len(resume.saved_epochs) == 3
    assert len(resume.epoch_seconds) == 3
    assert all(0 < seconds < 60 for seconds in resume.save_seconds + resume.epoch_seconds)
    assert resume.load_seconds is None  # not resumed


@pytest.mark.parametrize(
    ("every", "rungs", "budget", "max_epochs", "saved", "every_epoch"),
    [
        pytest.param("epoch", (2,), 0.05, 4, [1, 2, 3, 4], True, id="epoch"),
        pytest.param("rung", (2, 8), 0.05, 4, [2, 4], False, id="rung-and-max-epochs"),
        pytest.param("rung", (), 0.05, 3, [3], False, id="rung-none-only-max-epochs"),
        pytest.param("rung", (1, 2, 3), 0.05, 3, [1, 2, 3], False, id="rung-every-epoch-a-rung"),
        # a budget of 0: no save is cheap enough, so after the first (measured) save only rungs
        pytest.param("auto", (2,), 0.0, 4, [1, 2, 4], False, id="auto-expensive"),
        pytest.param("auto", (3,), 0.0, 5, [1, 3, 5], False, id="auto-expensive-rung-3"),
        pytest.param("auto", (2,), 1e9, 4, [1, 2, 3, 4], True, id="auto-cheap"),
    ],
)
def test_saving_policy(
    every: str, rungs: tuple[int, ...], budget: float, max_epochs: int, saved: list[int],
    every_epoch: bool, tmp_path: Path,
) -> None:
    calls: list[tuple[int, str]] = []
    path = tmp_path / "resume.ckpt"
    resume = ResumeCheckpoint(path, every=every, rungs=rungs, budget=budget,  # type: ignore[arg-type]
                              on_save=lambda epoch, where: calls.append((epoch, where)))
    _fast_fit(tmp_path, resume, max_epochs)
    assert resume.saved_epochs == saved
    assert calls == [(epoch, str(path)) for epoch in saved]
    assert resume.last == (max_epochs, str(path))
    assert resume.every_epoch is every_epoch
    assert torch.load(path, weights_only=True)["epoch"] + 1 == max_epochs


class _StopAfter(L.Callback):
    """Stops training after ``epoch``, as the launcher's budget stop or a pruner does."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch + 1 == self.epoch:
            trainer.should_stop = True


@pytest.mark.parametrize(("save_on_stop", "saved"), [(True, [2, 3]), (False, [2])],
                         ids=["save-on-stop", "no-save-on-stop"])
def test_an_early_stop_saves_where_it_stopped(
    save_on_stop: bool, saved: list[int], tmp_path: Path
) -> None:
    resume = ResumeCheckpoint(tmp_path / "resume.ckpt", every="rung", rungs=(2, 4),
                              save_on_stop=save_on_stop)
    _fast_fit(tmp_path, resume, 6, _StopAfter(3))
    assert resume.saved_epochs == saved


class _FlakyIO(TorchCheckpointIO):
    """Lightning's writer, failing from the ``fail_from``-th save on (test double of the disk).

    ``mode="disk-full"`` writes a truncated file and raises ENOSPC; ``mode="silent"`` writes
    nothing and raises nothing, as Lightning 2.6's ``_atomic_save`` does on a PermissionError.
    """

    def __init__(self, fail_from: int, mode: str) -> None:
        super().__init__()
        self.fail_from, self.mode, self.saves = fail_from, mode, 0

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any,
                        storage_options: Any | None = None) -> None:
        self.saves += 1
        if self.saves < self.fail_from:
            super().save_checkpoint(checkpoint, path, storage_options)
        elif self.mode == "disk-full":
            Path(path).write_bytes(b"PK\x03\x04 truncated")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


@pytest.mark.parametrize(("mode", "reason"), [("disk-full", "No space left on device"),
                                              ("silent", "No such file or directory")])
def test_a_failed_write_keeps_the_previous_checkpoint_and_names_the_file(
    mode: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "resume.ckpt"
    calls: list[int] = []
    resume = ResumeCheckpoint(path, every="epoch", on_save=lambda epoch, _: calls.append(epoch))
    with pytest.raises(CheckpointWriteError) as raised:
        _fast_fit(tmp_path, resume, 3, plugins=[_FlakyIO(fail_from=2, mode=mode)])
    assert isinstance(raised.value, OSError)
    assert str(raised.value) == f"cannot write checkpoint {path}: {reason}"
    assert torch.load(path, weights_only=True)["epoch"] + 1 == 1  # epoch 1's, intact
    assert not os.path.exists(f"{path}.tmp")  # the partial file is gone
    assert resume.last == (1, str(path)) and calls == [1]


def test_on_save_errors_propagate(tmp_path: Path) -> None:
    def broken(epoch: int, path: str) -> None:
        raise OSError("storage down")  # an OSError, but not the checkpoint's write

    path = tmp_path / "resume.ckpt"
    resume = ResumeCheckpoint(path, every="epoch", on_save=broken)
    with pytest.raises(OSError, match="storage down") as raised:
        _fast_fit(tmp_path, resume, 2)
    assert not isinstance(raised.value, CheckpointWriteError)
    assert torch.load(path, weights_only=True)["epoch"] + 1 == 1  # the file was written


def test_must_come_after_every_model_checkpoint(tmp_path: Path) -> None:
    resume = ResumeCheckpoint(tmp_path / "resume.ckpt")
    model, data = _build("dropout_mlp", _SEED)
    trainer = _trainer(1, [resume, _best(tmp_path)], tmp_path, limit_train_batches=1)
    with pytest.raises(ConfigError, match="must come after every ModelCheckpoint"):
        trainer.fit(model, datamodule=data)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"every": "always"}, "every: is 'always'; allowed: auto, epoch, rung",
                     id="every"),
        pytest.param({"rungs": [2, 0]}, "rungs: is 0, but must be an integer >= 1", id="rungs"),
        pytest.param({"budget": -0.1}, "budget: ", id="budget"),
        pytest.param({"path": ""}, "path: must be a file path", id="path"),
        pytest.param({"on_save": 3}, "on_save: must be callable", id="on_save"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"path": "resume.ckpt", **kwargs}
    with pytest.raises(ConfigError) as raised:
        ResumeCheckpoint(**arguments)
    assert str(raised.value).startswith(message)


# ------------------------------------------------------------------------------------------
# DDP: two CPU ranks (gloo), each with its own dropout generator.


class _SeedPerRank(L.Callback):
    """Give each rank its own torch generator, so that restoring only rank 0's would show."""

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        torch.manual_seed(1000 + trainer.global_rank)


def _ddp_script(out_dir: Path) -> None:
    """Straight, paused and resumed under ``strategy="ddp"`` in one process group."""
    kwargs: dict[str, Any] = {"devices": 2, "strategy": "ddp", "num_sanity_val_steps": 0,
                              **_LIMITS}
    results: dict[str, Any] = {}
    model, data = _build("dropout_mlp", _SEED)
    _trainer(_MAX, [_SeedPerRank()], out_dir / "straight", **kwargs).fit(model, datamodule=data)
    straight_state = _state(model)

    path = out_dir / "trial" / "resume.ckpt"
    model, data = _build("dropout_mlp", _SEED)
    first = ResumeCheckpoint(path, every="rung", rungs=_RUNGS)
    trainer = _trainer(_PAUSE, [_SeedPerRank(), RandomState(), first], out_dir, **kwargs)
    trainer.fit(model, datamodule=data)

    model, data = _build("dropout_mlp", _OTHER_SEED)
    second, record = ResumeCheckpoint(path, every="rung", rungs=_RUNGS), _Record()
    trainer = _trainer(_MAX, [record, RandomState(), second], out_dir, **kwargs)
    trainer.fit(model, datamodule=data, ckpt_path=str(path), weights_only=True)
    results.update(
        rank=trainer.global_rank, first=first.saved_epochs, second=second.saved_epochs,
        started=record.started, difference=_max_difference(_state(model), straight_state),
    )
    (out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(results))


@pytest.mark.slow  # two ranks each import torch and Lightning, and DDP starts up
def test_ddp_paused_and_resumed_equals_straight(tmp_path: Path) -> None:
    from helpers.support import ddp_clean_env, free_port, run_job

    env = ddp_clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                        OMP_NUM_THREADS="1")
    proc = run_job([sys.executable, __file__, "ddp", str(tmp_path)], cwd=_REPO_ROOT, env=env,
                   timeout=400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for result in ranks:
        assert result["first"] == [_PAUSE] and result["second"] == [_MAX]
        assert result["started"] == [3, 4]
        assert result["difference"] <= 1e-6


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    if sys.argv[1] == "resume":
        _resume_script(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "ddp":
        _ddp_script(Path(sys.argv[2]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}; allowed: resume, ddp")
