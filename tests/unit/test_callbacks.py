"""PruningCallback with a real Trainer: what it reports, when it stops, what it records,
and DDP with the same trial on every rank."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import lightning as L
import optuna
import pytest
import torch
from optuna.trial import TrialState
from torch.utils.data import DataLoader, TensorDataset

from lightning_hpo import DigitsDataModule, LeNet, PruningCallback, callbacks
from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.errors import ConfigError
from lightning_hpo.schema import RESOURCE_ATTR

ROOT = Path(__file__).resolve().parents[2]


class PruneAt(optuna.pruners.BasePruner):
    """A deterministic pruner double: prunes once a trial reports ``step``; records its calls."""

    def __init__(self, step: int | None) -> None:
        self.step = step
        self.calls: list[int | None] = []

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        self.calls.append(trial.last_step)
        last = trial.last_step
        return self.step is not None and last is not None and last >= self.step


def _fit(trial: Any, epochs: int, monitor: str = "validation_error", **trainer: Any) -> Any:
    L.seed_everything(0, verbose=False)
    callback = PruningCallback(trial, monitor=monitor)
    kwargs: dict[str, Any] = dict(
        accelerator="cpu", devices=1, max_epochs=epochs, limit_train_batches=3,
        limit_val_batches=2, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
    )
    kwargs.update(trainer)
    fitter = L.Trainer(**kwargs)
    fitter.fit(LeNet(lr=0.1), datamodule=DigitsDataModule(batch_size=32))
    return callback, fitter


def test_reports_every_epoch_and_completes(storage: Any, direction: str) -> None:
    pruner = PruneAt(None)
    study = optuna.create_study(storage=storage.make(), direction=direction, pruner=pruner)
    trial = study.ask()
    callback, fitter = _fit(trial, epochs=3, num_sanity_val_steps=2)
    callback.raise_if_pruned()
    study.tell(trial, fitter.callback_metrics["validation_error"].item())
    frozen = study.trials[0]
    assert frozen.state == TrialState.COMPLETE
    assert sorted(frozen.intermediate_values) == [1, 2, 3]  # steps are epochs, from 1
    assert pruner.calls == [1, 2, 3]  # the sanity check is not reported
    assert frozen.intermediate_values[3] == pytest.approx(frozen.value)
    assert "pruned_at_epoch" not in frozen.user_attrs


def test_stops_on_the_pruners_word_and_records_the_epoch(storage: Any, direction: str) -> None:
    study = optuna.create_study(storage=storage.make(), direction=direction, pruner=PruneAt(2))
    trial = study.ask()
    callback, fitter = _fit(trial, epochs=6)
    assert fitter.current_epoch == 2 and callback.pruned_at_epoch == 2  # 2 epochs done
    with pytest.raises(optuna.TrialPruned, match="pruned at epoch 2"):
        callback.raise_if_pruned()
    study.tell(trial, state=TrialState.PRUNED)
    frozen = study.trials[0]
    assert frozen.state == TrialState.PRUNED and frozen.user_attrs["pruned_at_epoch"] == 2
    assert sorted(frozen.intermediate_values) == [1, 2]


def test_in_study_optimize_pruned_trials_are_recorded_as_pruned() -> None:
    study = optuna.create_study(pruner=PruneAt(1))

    def objective(trial: optuna.Trial) -> float:
        callback, fitter = _fit(trial, epochs=3)
        callback.raise_if_pruned()
        return fitter.callback_metrics["validation_error"].item()

    study.optimize(objective, n_trials=2)
    assert [t.state for t in study.trials] == [TrialState.PRUNED] * 2


@pytest.fixture
def fresh_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The once-a-process notice of a forgotten raise_if_pruned not yet said in this process."""
    monkeypatch.setattr(callbacks, "_told", False)
    monkeypatch.setattr(callbacks, "_stopped", [])


@pytest.mark.parametrize("raised", [False, True], ids=["forgotten", "raised"])
def test_a_stopped_trial_returned_as_complete_is_said_once_at_the_next_fit(
    fresh_notice: None, caplog: pytest.LogCaptureFixture, raised: bool
) -> None:
    """An objective that forgets raise_if_pruned makes the stopped trials COMPLETE: the next
    fit says so once, naming the first such trial; with raise_if_pruned, nothing is said."""
    study = optuna.create_study(pruner=PruneAt(1))

    def objective(trial: optuna.Trial) -> float:
        callback, fitter = _fit(trial, epochs=3)
        if raised:
            callback.raise_if_pruned()
        return fitter.callback_metrics["validation_error"].item()

    with caplog.at_level(logging.WARNING, logger="lightning_hpo.callbacks"):
        study.optimize(objective, n_trials=3)
    said = [r.getMessage() for r in caplog.records if "raise_if_pruned" in r.getMessage()]
    if raised:
        assert [t.state for t in study.trials] == [TrialState.PRUNED] * 3 and said == []
    else:
        assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
        assert said == ["PruningCallback: trial 0 was stopped by the pruner but ended COMPLETE, "
                        "as if it had trained every epoch: call pruning.raise_if_pruned() after "
                        "trainer.fit, and Optuna records such a trial PRUNED"]


def test_a_stopped_trial_still_running_is_looked_at_again_later(fresh_notice: None) -> None:
    """Two objectives at once (threads): a stopped trial not yet told is kept, not judged."""
    study = optuna.create_study(pruner=PruneAt(1))
    first = study.ask()
    _fit(first, epochs=2)  # stopped, its objective not yet returned
    _fit(study.ask(), epochs=1)  # another trial's fit meanwhile
    assert [number for _, _, number in callbacks._stopped] == [0, 1]
    study.tell(first, state=TrialState.PRUNED)
    _fit(study.ask(), epochs=1)
    assert [number for _, _, number in callbacks._stopped] == [1, 2]
    assert callbacks._told is False


def test_a_metric_that_is_not_logged_lists_the_logged_ones() -> None:
    """Never logged by the end of fit (one epoch here): the fit fails, naming what was."""
    trial = optuna.create_study().ask()
    with pytest.raises(ConfigError) as info:
        _fit(trial, epochs=1, monitor="val_acc")
    message = str(info.value)
    assert message.startswith("monitor: 'val_acc' is not logged by the LightningModule (by "
                              "epoch 1); logged metrics: ")
    # reported at the epoch's end: the training step's per-epoch loss is among them
    assert message.endswith(
        "logged metrics: parameters, train_loss, validation_error, validation_loss")


class _EverySecondEpoch(L.LightningModule):
    """Logs ``loss`` in the validation of even epochs (2, 4...) only, and nothing else; with
    ``first=1``, of odd epochs (1, 3...); with ``train_loss``, that too, every training step.
    Counts the training batches of every instance."""

    trained = 0

    def __init__(self, first: int = 2, train_loss: bool = False) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.first = first
        self.train_loss = train_loss

    def training_step(self, batch: Any, index: int) -> Any:
        _EverySecondEpoch.trained += 1
        loss = self.layer(batch[0]).pow(2).mean()
        if self.train_loss:
            self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, index: int) -> None:
        if (self.current_epoch + 1) % 2 == self.first % 2:
            self.log("loss", self.layer(batch[0]).pow(2).mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self) -> Any:
        return DataLoader(TensorDataset(torch.ones(8, 4)), batch_size=4)

    def val_dataloader(self) -> Any:
        return DataLoader(TensorDataset(torch.ones(4, 4)), batch_size=4)


def test_a_validation_that_logged_nothing_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, the first epoch that logged nothing failed the trial ("'loss' is not logged ...;
    logged metrics: none"), though the model logs it every second epoch."""
    study = optuna.create_study(pruner=PruneAt(None))
    trial = study.ask()
    callback = PruningCallback(trial, monitor="loss")
    with caplog.at_level(logging.WARNING, logger="lightning_hpo.callbacks"):
        L.Trainer(accelerator="cpu", max_epochs=4, logger=False, enable_checkpointing=False,
                  enable_progress_bar=False, enable_model_summary=False,
                  num_sanity_val_steps=0, callbacks=[callback]).fit(_EverySecondEpoch())
    # epoch 3 logged nothing either: before, its report repeated epoch 2's value, which
    # Lightning keeps in callback_metrics
    values = study.trials[0].intermediate_values
    assert sorted(values) == [2, 4] and values[2] != values[4]
    said = [r.getMessage() for r in caplog.records if "nothing was reported" in r.getMessage()]
    assert said == [f"PruningCallback: trial {trial.number}: by epoch 1's validation loss was "
                    "not logged yet (logged metrics: none), so nothing was reported for it; a fit "
                    "that never logs it fails at its end (said once a fit)"]


def _every_second_epoch_objective(first: int, monitor: str = "loss",
                                  resource: Literal["epoch", "step"] = "epoch") -> Any:
    def objective(trial: optuna.Trial) -> float:
        trial.suggest_float("x", 0.0, 1.0)
        L.seed_everything(trial.number, verbose=False)
        pruning = PruningCallback(trial, monitor=monitor, resource=resource)
        fitter = L.Trainer(accelerator="cpu", max_epochs=6, logger=False,
                           enable_checkpointing=False, enable_progress_bar=False,
                           enable_model_summary=False, num_sanity_val_steps=0,
                           callbacks=[pruning])
        fitter.fit(_EverySecondEpoch(first, train_loss=True))
        pruning.raise_if_pruned()
        return fitter.callback_metrics["loss"].item()

    return objective


@pytest.mark.parametrize("first", [1, 2], ids=["odd-epochs", "even-epochs"])
def test_a_metric_first_logged_after_the_first_validation_is_reported_where_logged(
    caplog: pytest.LogCaptureFixture, direction: str, first: int,
) -> None:
    """Logged at epochs 2, 4, 6 only, the metric failed the trial at epoch 1 ("'loss' is not
    logged by the LightningModule (by epoch 1); logged metrics: train_loss"), though at epochs
    1, 3, 5 the epochs between were skipped: both are now reported where logged, the other
    epochs skipped, said once."""
    from lightning_hpo import ASHAPruner

    study = optuna.create_study(direction=direction,
                                pruner=ASHAPruner(1, max_resource=4, reduction_factor=2))
    with caplog.at_level(logging.WARNING, logger="lightning_hpo.callbacks"):
        study.optimize(_every_second_epoch_objective(first), n_trials=3)
    trials = study.get_trials(deepcopy=False)
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    logged = [1, 3, 5] if first == 1 else [2, 4, 6]
    assert trials[0].state == TrialState.COMPLETE  # the first at every rung goes on
    assert sorted(trials[0].intermediate_values) == logged
    for trial in trials:
        assert set(trial.intermediate_values) <= set(logged) and trial.intermediate_values
    said = [r.getMessage() for r in caplog.records if "nothing was reported" in r.getMessage()]
    # once a fit that trained an epoch without it (a trial pruned at epoch 1 of 1, 3, 5 did not)
    skipped = [f"trial {t.number}:" for t in trials
               if t.user_attrs.get("pruned_at_epoch", 6) >= 3 - first]
    assert [message.split()[1:3] for message in said] == [n.split() for n in skipped]
    assert said[0] == (
        "PruningCallback: trial 0: by epoch 1's validation loss was not logged yet (logged "
        "metrics: train_loss), so nothing was reported for it; a fit that never logs it fails "
        "at its end (said once a fit)" if first == 2 else
        "PruningCallback: trial 0: epoch 2's validation logged nothing new for loss, so nothing "
        "was reported for it (said once a fit)")


@pytest.mark.parametrize(("resource", "when"), [("epoch", "epoch 6"), ("step", "step 12")])
def test_a_metric_never_logged_fails_the_trial_at_the_end_of_fit(
    direction: str, resource: Literal["epoch", "step"], when: str,
) -> None:
    """A misspelt monitor of a model that logs on some epochs only: every epoch is skipped,
    and the fit, at its end, fails the trial naming what the model did log."""
    study = optuna.create_study(direction=direction, pruner=PruneAt(None))
    _EverySecondEpoch.trained = 0
    with pytest.raises(ConfigError) as info:
        study.optimize(_every_second_epoch_objective(2, monitor="los", resource=resource),
                       n_trials=1)
    assert str(info.value) == (f"monitor: 'los' is not logged by the LightningModule (by {when}); "
                               "logged metrics: loss, train_loss")
    assert _EverySecondEpoch.trained == 12  # 6 epochs of 2 batches
    (trial,) = study.get_trials(deepcopy=False)
    assert trial.state == TrialState.FAIL and trial.intermediate_values == {}


class _PerStepValidation(_EverySecondEpoch):
    """Logs ``loss`` in every validation with ``on_step=True``: alone (``on_epoch=False``),
    Lightning hands it to its loggers only; with ``on_epoch=True`` too, callbacks see ``loss``
    and the loggers ``loss_step`` and ``loss_epoch``."""

    def __init__(self, on_epoch: bool) -> None:
        super().__init__()
        self.on_epoch = on_epoch

    def validation_step(self, batch: Any, index: int) -> None:
        self.log("loss", self.layer(batch[0]).pow(2).mean(), on_step=True,
                 on_epoch=self.on_epoch)


@pytest.mark.parametrize(("on_epoch", "monitor", "words"), [
    (False, "loss", "'loss' is logged per validation step only (on_step=True, on_epoch=False), "
     "which Lightning hands to its loggers but not to callbacks (by epoch 2): log it with "
     "on_epoch=True (validation_step's default); metrics callbacks see: none"),
    (True, "loss_step", "'loss_step' is the per-step name of 'loss', which Lightning hands to "
     "its loggers but not to callbacks (by epoch 2): name its epoch value, 'loss'; metrics "
     "callbacks see: loss, loss_epoch"),
])
def test_a_metric_logged_per_validation_step_says_so(
    tmp_path: Path, on_epoch: bool, monitor: str, words: str,
) -> None:
    """The model does log it, per step: the fit failed with "'loss' is not logged by the
    LightningModule ...; logged metrics: none", which sent the reader looking for a typo."""
    study = optuna.create_study(pruner=PruneAt(None))
    pruning = PruningCallback(study.ask(), monitor=monitor)
    fitter = L.Trainer(accelerator="cpu", max_epochs=2, enable_checkpointing=False,
                       logger=L.pytorch.loggers.CSVLogger(tmp_path), enable_progress_bar=False,
                       enable_model_summary=False, num_sanity_val_steps=0, callbacks=[pruning])
    with pytest.raises(ConfigError) as info:
        fitter.fit(_PerStepValidation(on_epoch))
    assert str(info.value) == f"monitor: {words}"


def test_a_second_fit_from_the_start_on_the_same_trial_is_refused() -> None:
    """Reused for a second fit of its trial from epoch 1, the callback reported epochs 1-2
    again (Optuna kept the first fit's values), the pruner judged those, and pruned_at_epoch
    was overwritten."""
    study = optuna.create_study(pruner=PruneAt(None))
    trial = study.ask()
    callback, _ = _fit(trial, epochs=2)
    kept = dict(study.trials[0].intermediate_values)
    fitter = L.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=1, limit_val_batches=1,
                       logger=False, enable_checkpointing=False, enable_progress_bar=False,
                       enable_model_summary=False, callbacks=[callback])
    with pytest.raises(ConfigError) as info:
        fitter.fit(LeNet(), datamodule=DigitsDataModule(batch_size=32))
    assert str(info.value).startswith(
        f"trial: trial {trial.number} already reported epochs up to 2 through this callback in "
        "an earlier fit; this fit starts at epoch 1")
    assert study.trials[0].intermediate_values == kept


def test_reused_callback_resets_between_fits() -> None:
    study = optuna.create_study(pruner=PruneAt(1))
    callback, _ = _fit(study.ask(), epochs=2)
    assert callback.pruned
    fitter = L.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=1, limit_val_batches=1,
                       logger=False, enable_checkpointing=False, enable_progress_bar=False,
                       enable_model_summary=False, callbacks=[callback])
    callback.trial = optuna.create_study(pruner=PruneAt(None)).ask()
    fitter.fit(LeNet(), datamodule=DigitsDataModule(batch_size=32))
    assert not callback.pruned


def _run(
    script: list[str], tmp_path: Path, timeout: float = 420
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, *script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout, start_new_session=True)


@pytest.mark.slow
def test_ddp_example_trains_each_trial_on_both_ranks(tmp_path: Path) -> None:
    """examples/ddp_objective.py as a real 2-process job: N trials, both ranks train each one
    with the same params (a layer width among them), and pruned trials stop at the same epoch."""
    n_trials, storage = 4, f"sqlite:///{tmp_path / 'ddp.db'}"
    result = _run([str(ROOT / "examples" / "ddp_objective.py"), "--storage", storage,
                   "--n-trials", str(n_trials), "--max-epochs", "4",
                   "--record-dir", str(tmp_path / "ranks")], tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    study = optuna.load_study(study_name="ddp-objective", storage=storage)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == n_trials
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    rows = {rank: [json.loads(line) for line in
                   (tmp_path / "ranks" / f"rank{rank}.jsonl").read_text().splitlines()]
            for rank in (0, 1)}
    assert [r["trial"] for r in rows[0]] == [r["trial"] for r in rows[1]] == list(range(n_trials))
    for trial, zero, one in zip(trials, rows[0], rows[1], strict=True):
        assert zero["params"] == one["params"] == trial.params
        assert zero["epochs"] == one["epochs"]
        assert zero["pruned_at_epoch"] == one["pruned_at_epoch"]
        if trial.state == TrialState.PRUNED:
            assert trial.user_attrs["pruned_at_epoch"] == zero["pruned_at_epoch"] == zero["epochs"]
            assert max(trial.intermediate_values) == zero["epochs"]
    assert sum(t.state == TrialState.PRUNED for t in trials) >= 1
    assert len({t.params["num_hiddens_1"] for t in trials}) >= 2


@pytest.mark.slow
def test_ddp_example_by_steps_stops_both_ranks_at_the_same_step(tmp_path: Path) -> None:
    """``--steps 20``: trials trained by optimizer steps on 2 DDP ranks, reported at each
    validation's global step (every 5 batches of an epoch), rungs at steps 5 and 10: both ranks of a
    pruned trial stop at the step the pruner decided, mid-epoch where it falls there."""
    n_trials, storage = 4, f"sqlite:///{tmp_path / 'ddp.db'}"
    result = _run([str(ROOT / "examples" / "ddp_objective.py"), "--storage", storage,
                   "--n-trials", str(n_trials), "--steps", "20",
                   "--record-dir", str(tmp_path / "ranks")], tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = optuna.load_study(study_name="ddp-objective-steps", storage=storage).get_trials(
        deepcopy=False)
    rows = {rank: [json.loads(line) for line in
                   (tmp_path / "ranks" / f"rank{rank}.jsonl").read_text().splitlines()]
            for rank in (0, 1)}
    assert [r["trial"] for r in rows[0]] == [r["trial"] for r in rows[1]] == list(range(n_trials))
    for trial, zero, one in zip(trials, rows[0], rows[1], strict=True):
        assert (zero["steps"], zero["pruned_at_step"]) == (one["steps"], one["pruned_at_step"])
        assert zero["pruned_at_epoch"] is None
        reported = sorted(trial.intermediate_values)
        assert reported[0] == 5, reported  # the first validation, after 5 batches
        if trial.state == TrialState.PRUNED:
            assert trial.user_attrs["pruned_at_step"] == zero["pruned_at_step"] == zero["steps"]
            assert max(reported) == zero["steps"] < 20
        else:
            assert trial.state == TrialState.COMPLETE and zero["steps"] == 20
    assert sum(t.state == TrialState.PRUNED for t in trials) >= 1
    # The same study by epochs: both ranks refuse at the fit's start (none waits for the other)
    again = _run([str(ROOT / "examples" / "ddp_objective.py"), "--storage", storage,
                  "--study", "ddp-objective-steps", "--n-trials", "1"], tmp_path, timeout=300)
    assert again.returncode != 0
    said = again.stdout + again.stderr
    refusal = "resource: is 'epoch', but study 'ddp-objective-steps' counts steps"
    for rank in (0, 1):  # each rank ended on it
        assert any(line.startswith(f"[rank{rank}]") and refusal in line
                   for line in said.splitlines()), said[-3000:]
    after = optuna.load_study(study_name="ddp-objective-steps", storage=storage).trials
    assert len(after) == n_trials + 1 and after[-1].intermediate_values == {}


@pytest.mark.slow
def test_plain_optuna_study_under_ddp_is_refused_not_silently_wrong(tmp_path: Path) -> None:
    """The failure optuna-integration has: each rank asks its own trial. We stop it loudly."""
    script = tmp_path / "plain.py"
    script.write_text(
        "import lightning as L, optuna\n"
        "from lightning_hpo import DigitsDataModule, LeNet, PruningCallback\n"
        f"study = optuna.create_study(storage='sqlite:///{tmp_path}/p.db', study_name='p',"
        " load_if_exists=True)\n"
        "def objective(trial):\n"
        "    model = LeNet(lr=trial.suggest_float('lr', 1e-3, 1.0, log=True))\n"
        "    cb = PruningCallback(trial)\n"
        "    L.Trainer(accelerator='cpu', devices=2, strategy='ddp', max_epochs=1,"
        " limit_train_batches=2, limit_val_batches=1, logger=False, enable_checkpointing=False,"
        " enable_progress_bar=False, callbacks=[cb]).fit(model,"
        " datamodule=DigitsDataModule(batch_size=32))\n"
        "    return 0.0\n"
        "study.optimize(objective, n_trials=1)\n"
    )
    result = _run([str(script)], tmp_path, timeout=300)
    assert result.returncode != 0
    assert "lightning_hpo.create_study" in result.stdout + result.stderr


# --- What a stranger's Trainer does around the callback (found by testing as one) -----------


class _Progress(L.LightningModule):
    """Logs how many epochs it has trained when it validates (``epochs_seen``, fractional
    between epoch ends) and a per-epoch training metric (``train_epochs``)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = __import__("torch").nn.Linear(2, 1)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.log("train_epochs", float(self.current_epoch + 1), on_step=False, on_epoch=True)
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        seen = self.trainer.fit_loop.epoch_loop.batch_progress.current.completed
        self.log("epochs_seen", self.current_epoch + seen / self.trainer.num_training_batches)

    def configure_optimizers(self) -> Any:
        return __import__("torch").optim.SGD(self.parameters(), lr=0.01)


def _loader() -> Any:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    return DataLoader(TensorDataset(torch.ones(8, 2)), batch_size=2)  # 4 batches


def _trainer(callback: PruningCallback, **kwargs: Any) -> L.Trainer:
    return L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, callbacks=[callback], **kwargs)


def test_an_epoch_validated_twice_reports_its_last_validation() -> None:
    """``val_check_interval=0.5``: step N holds the value after N whole epochs."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen")
    _trainer(callback, max_epochs=3, val_check_interval=0.5).fit(
        _Progress(), _loader(), _loader())
    assert study.trials[0].intermediate_values == {1: 1.0, 2: 2.0, 3: 3.0}


@pytest.mark.parametrize("when", ["before", "after"])
def test_validate_outside_fit_reports_nothing(when: str) -> None:
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen")
    trainer = _trainer(callback, max_epochs=2)
    model = _Progress()
    if when == "before":
        trainer.validate(model, _loader())
    trainer.fit(model, _loader(), _loader())
    if when == "after":
        trainer.validate(model, _loader())
    assert study.trials[0].intermediate_values == {1: 1.0, 2: 2.0}


def test_a_per_epoch_training_metric_can_be_monitored() -> None:
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor="train_epochs")
    _trainer(callback, max_epochs=2).fit(_Progress(), _loader(), _loader())
    assert study.trials[0].intermediate_values == {1: 1.0, 2: 2.0}


def test_min_epochs_trains_on_after_pruning_but_reports_nothing_more() -> None:
    """Lightning trains to ``min_epochs`` whatever stops it; the trial stays pruned at the
    epoch the pruner decided on, and its later epochs reach no rung."""
    study = optuna.create_study(pruner=PruneAt(1))
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen")
    trainer = _trainer(callback, max_epochs=4, min_epochs=3)
    trainer.fit(_Progress(), _loader(), _loader())
    assert trainer.current_epoch == 3  # trained on
    assert study.trials[0].intermediate_values == {1: 1.0}
    assert callback.pruned_at_epoch == 1
    assert study.trials[0].user_attrs["pruned_at_epoch"] == 1


def test_a_fit_without_validation_says_that_nothing_was_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen")
    with caplog.at_level("WARNING", logger="lightning_hpo.callbacks"):
        _trainer(callback, max_epochs=2).fit(_Progress(), _loader())
    assert study.trials[0].intermediate_values == {}
    (record,) = [r for r in caplog.records if r.name == "lightning_hpo.callbacks"]
    assert "trained 2 epoch(s) and reported nothing: fit never validated" in record.message


# --- resource="step": a model trained by steps -----------------------------------------------


@pytest.fixture
def fresh_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """The once-a-process hint about resource='step' not yet said in this process."""
    monkeypatch.setattr(callbacks, "_hinted", False)


def test_resource_step_reports_each_validation_at_its_global_step() -> None:
    """``val_check_interval=2`` on 4-batch epochs, ``max_steps=10``: five validations, two an
    epoch, each reported at the optimizer steps done then (the epoch-based default reports
    two values for the same fit, at epochs 1 and 2)."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen", resource="step")
    trainer = _trainer(callback, max_epochs=-1, max_steps=10, val_check_interval=2)
    trainer.fit(_Progress(), _loader(), _loader())
    assert trainer.global_step == 10
    assert study.trials[0].intermediate_values == {2: 0.5, 4: 1.0, 6: 1.5, 8: 2.0, 10: 2.5}
    assert not callback.pruned


def test_resource_step_stops_right_after_the_validation_the_pruner_stopped() -> None:
    """Pruned at step 4 (the second validation, the end of the first epoch's 4 batches... of
    a 20-step fit): no optimizer step after it, the step recorded, raise_if_pruned says it."""
    study = optuna.create_study(pruner=PruneAt(4))
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen", resource="step")
    trainer = _trainer(callback, max_epochs=-1, max_steps=20, val_check_interval=2)
    trainer.fit(_Progress(), _loader(), _loader())
    assert trainer.global_step == 4
    assert (callback.pruned_at_step, callback.pruned_at_epoch) == (4, None)
    with pytest.raises(optuna.TrialPruned, match="pruned at step 4"):
        callback.raise_if_pruned()
    study.tell(trial, state=TrialState.PRUNED)
    frozen = study.trials[0]
    assert frozen.intermediate_values == {2: 0.5, 4: 1.0}
    assert frozen.user_attrs == {"pruned_at_step": 4}


def test_resource_step_pruned_mid_epoch_stops_in_that_epoch() -> None:
    """Pruned at step 6, half-way through the second epoch: training ends there."""
    study = optuna.create_study(pruner=PruneAt(6))
    trial = study.ask()
    callback = PruningCallback(trial, monitor="epochs_seen", resource="step")
    trainer = _trainer(callback, max_epochs=5, val_check_interval=2)
    trainer.fit(_Progress(), _loader(), _loader())
    assert (trainer.global_step, trainer.current_epoch) == (6, 2)  # the second, cut short
    assert sorted(study.trials[0].intermediate_values) == [2, 4, 6]


def test_resource_step_ranks_by_asha_rungs_counted_in_steps() -> None:
    """``ASHAPruner(2, 8, 2)`` in steps, validated at the third batch of each 4-batch epoch
    (steps 3 and 7): each report is recorded at the rung it passed (2, then 4), as rungs in
    epochs are; two equal trials both go on (ties continue)."""
    from lightning_hpo import ASHAPruner
    from lightning_hpo.pruners import rung_records

    study = optuna.create_study(pruner=ASHAPruner(min_resource=2, max_resource=8,
                                                  reduction_factor=2))
    for _ in range(2):  # the same values twice
        trial = study.ask()
        callback = PruningCallback(trial, monitor="epochs_seen", resource="step")
        _trainer(callback, max_epochs=-1, max_steps=8, val_check_interval=3).fit(
            _Progress(), _loader(), _loader())
        assert not callback.pruned
        study.tell(trial, 0.0)
    records = {(r.rung, r.trial_number) for r in rung_records(study)}
    assert records == {(2, 0), (4, 0), (2, 1), (4, 1)}
    assert [sorted(t.intermediate_values) for t in study.trials] == [[3, 7]] * 2


class _TwoMetrics(_Progress):
    """Also logs ``epochs_left`` (4 minus ``epochs_seen``) when it validates."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        seen = self.trainer.fit_loop.epoch_loop.batch_progress.current.completed
        self.log("epochs_left", 4 - self.current_epoch - seen / self.trainer.num_training_batches)


def test_resource_step_with_several_objectives_writes_each_steps_values() -> None:
    from lightning_hpo.schema import objective_curve

    study = optuna.create_study(directions=["minimize", "maximize"],
                                pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    callback = PruningCallback(trial, monitor=["epochs_seen", "epochs_left"], resource="step")
    _trainer(callback, max_epochs=-1, max_steps=4, val_check_interval=2).fit(
        _TwoMetrics(), _loader(), _loader())
    assert objective_curve(study.trials[0]) == {2: (0.5, 3.5), 4: (1.0, 3.0)}


def test_an_unknown_resource_is_refused_naming_both() -> None:
    trial = optuna.create_study().ask()
    with pytest.raises(ConfigError) as info:
        PruningCallback(trial, resource="steps")  # type: ignore[arg-type]
    assert str(info.value) == (
        "resource: is 'steps'; allowed: 'epoch' (reports at the end of each epoch that "
        "validated, at epochs completed); 'step' (reports at each validation, at optimizer "
        "steps done (trainer.global_step))")


@pytest.mark.parametrize("resource", ["epoch", "step"])
def test_the_first_fit_in_a_study_writes_what_its_steps_count(storage: Any, resource: str
                                                               ) -> None:
    """The study's ``RESOURCE_ATTR``, which the report reads to name the steps; another handle
    on the storage (another process) reads it."""
    study = optuna.create_study(storage=storage.make(), pruner=optuna.pruners.NopPruner())
    callback = PruningCallback(study.ask(), monitor="epochs_seen", resource=resource)
    _trainer(callback, max_epochs=1).fit(_Progress(), _loader(), _loader())
    other = optuna.load_study(study_name=study.study_name, storage=storage.make())
    attrs = storage_of(other).get_study_system_attrs(study_id_of(other))
    assert attrs[RESOURCE_ATTR] == resource


@pytest.mark.parametrize("written", [["step"], "steps", 3], ids=["list", "unknown", "number"])
def test_an_unreadable_resource_in_the_study_is_replaced_not_a_traceback(written: Any) -> None:
    """What another tool left under the name (a list, another word) is this fit's to write."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    storage_of(study).set_study_system_attr(study_id_of(study), RESOURCE_ATTR, written)
    callback = PruningCallback(study.ask(), monitor="epochs_seen", resource="step")
    _trainer(callback, max_epochs=1).fit(_Progress(), _loader(), _loader())
    assert storage_of(study).get_study_system_attrs(study_id_of(study))[RESOURCE_ATTR] == "step"


@pytest.mark.parametrize(("first", "then"), [("step", "epoch"), ("epoch", "step")])
def test_a_fit_by_the_other_resource_is_refused_before_it_trains(
    storage: Any, first: str, then: str
) -> None:
    """A study whose first fit counted steps refuses a fit by epochs (and the reverse): its
    pruner's rungs would compare the two. One line naming both, before a step is trained or
    reported, in this process and in another (a second handle, nothing remembered); a fit by
    the study's own resource goes on."""
    study = optuna.create_study(storage=storage.make(), pruner=optuna.pruners.NopPruner())
    callback = PruningCallback(study.ask(), monitor="epochs_seen", resource=first)
    _trainer(callback, max_epochs=1).fit(_Progress(), _loader(), _loader())
    for handle in (study, optuna.load_study(study_name=study.study_name,
                                            storage=storage.make())):
        trial = handle.ask()
        trainer = _trainer(PruningCallback(trial, monitor="epochs_seen", resource=then),
                           max_epochs=2)
        with pytest.raises(ConfigError) as info:
            trainer.fit(_Progress(), _loader(), _loader())
        assert str(info.value) == (
            f"resource: is '{then}', but study '{study.study_name}' counts {first}s (its first "
            f"PruningCallback had resource='{first}'), and its pruner's rungs cannot mix "
            f"epochs and steps; keep resource='{first}' or use a new study_name")
        assert trainer.global_step == 0
        assert handle.trials[trial.number].intermediate_values == {}
    again = PruningCallback(study.ask(), monitor="epochs_seen", resource=first)
    _trainer(again, max_epochs=1).fit(_Progress(), _loader(), _loader())
    assert len(study.trials[-1].intermediate_values) == 1


def test_a_fit_judged_once_though_it_validated_often_points_at_resource_step(
    fresh_hint: None, caplog: pytest.LogCaptureFixture,
) -> None:
    """One long epoch validated 4 times (``val_check_interval=0.25``): the pruner judged it
    once, at its end, so it could not stop it; said once a process, and not for a fit the
    pruner judged at several epochs."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    with caplog.at_level("WARNING", logger="lightning_hpo.callbacks"):
        for epochs in (1, 2, 1):
            callback = PruningCallback(study.ask(), monitor="epochs_seen")
            _trainer(callback, max_epochs=epochs, val_check_interval=0.25).fit(
                _Progress(), _loader(), _loader())
    said = [r.getMessage() for r in caplog.records if r.name == "lightning_hpo.callbacks"]
    assert said == [
        "PruningCallback: trial 0 validated 4 times in 1 epoch(s), and the pruner judged it at "
        "epoch ends only (1 time(s)): for a model trained by steps, PruningCallback(..., "
        "resource='step') reports each validation at its global_step (the pruner's rungs then "
        "count steps); said once"]


# --- What a stranger passes the callback (found by using it as optuna-integration's) ----------


@pytest.mark.parametrize("given", [None, 0, "study"], ids=["none", "number", "study"])
def test_what_is_not_a_trial_is_refused_when_the_callback_is_made(given: Any) -> None:
    """Not an Optuna trial (the study, a trial number): one line when the callback is made,
    not an AttributeError from ``report`` after the first epoch trained."""
    trial = optuna.create_study() if given == "study" else given
    with pytest.raises(ConfigError) as info:
        PruningCallback(trial, monitor="epochs_seen")
    message = str(info.value)
    assert message.startswith("trial: is ") and "which has no report or should_prune" in message
    assert f"({type(trial).__name__})" in message


def test_two_callbacks_of_one_trial_in_one_trainer_are_refused_before_training() -> None:
    """The second callback's values went nowhere (Optuna keeps a step's first report and warns
    each epoch); now ``fit`` refuses before an epoch trains."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    first = PruningCallback(trial, monitor="epochs_seen")
    second = PruningCallback(trial, monitor="train_epochs")
    trainer = _trainer(first, max_epochs=2)
    trainer.callbacks.append(second)
    model = _Progress()
    with pytest.raises(ConfigError) as info:
        trainer.fit(model, _loader(), _loader())
    assert str(info.value).startswith(
        "callbacks: hold two PruningCallbacks of trial 0 (monitor 'epochs_seen' and "
        "'train_epochs')")
    assert trainer.global_step == 0 and study.trials[0].intermediate_values == {}


def test_a_new_callback_refitting_a_trial_from_the_start_is_refused() -> None:
    """A second fit of the trial with a callback of its own (as a cross-validation loop does)
    reported epochs 1-2 again: Optuna dropped those values and the pruner judged the first
    fit's. It is refused as the same callback's refit is; a resumed fit goes on."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    _trainer(PruningCallback(trial, monitor="epochs_seen"), max_epochs=2).fit(
        _Progress(), _loader(), _loader())
    with pytest.raises(ConfigError) as info:
        _trainer(PruningCallback(trial, monitor="epochs_seen"), max_epochs=3).fit(
            _Progress(), _loader(), _loader())
    assert str(info.value).startswith(
        "trial: trial 0 already reported epochs up to 2 through another PruningCallback in an "
        "earlier fit; this fit starts at epoch 1")
    assert study.trials[0].intermediate_values == {1: 1.0, 2: 2.0}
    # another trial of the same study is a fit of its own
    other = study.ask()
    _trainer(PruningCallback(other, monitor="epochs_seen"), max_epochs=1).fit(
        _Progress(), _loader(), _loader())
    assert study.trials[1].intermediate_values == {1: 1.0}
    # a FixedTrial (a replay) records nothing, so nothing is dropped: not refused
    replay = optuna.trial.FixedTrial({})
    for _ in range(2):
        callback = PruningCallback(replay, monitor="epochs_seen")
        _trainer(callback, max_epochs=1).fit(_Progress(), _loader(), _loader())
        assert not callback.pruned


def test_a_finished_trial_is_refused_before_training() -> None:
    """A trial already told: Optuna's UpdateFinishedTrialError came after the first epoch."""
    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    trial = study.ask()
    study.tell(trial, 1.0)
    trainer = _trainer(PruningCallback(trial, monitor="epochs_seen"), max_epochs=2)
    with pytest.raises(ConfigError) as info:
        trainer.fit(_Progress(), _loader(), _loader())
    assert str(info.value).startswith("trial: trial 0 already ended COMPLETE (study.tell")
    assert trainer.global_step == 0


def test_a_non_finite_value_is_said_at_its_step(caplog: pytest.LogCaptureFixture) -> None:
    """By steps, the warning named the epoch ("at epoch 1") of a value reported at step 4."""

    class _Nan(_Progress):
        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("epochs_seen", float("nan"))

    study = optuna.create_study(pruner=optuna.pruners.NopPruner())
    callback = PruningCallback(study.ask(), monitor="epochs_seen", resource="step")
    with caplog.at_level(logging.WARNING, logger="lightning_hpo.callbacks"):
        _trainer(callback, max_epochs=1).fit(_Nan(), _loader(), _loader())
    said = [r.getMessage() for r in caplog.records if "nan" in r.getMessage()]
    assert said == ["PruningCallback: trial 0: epochs_seen is nan at step 4, reported as it is "
                    "(ASHAPruner and HyperbandPruner stop such a trial)"]


@pytest.mark.parametrize("resource", ["epoch", "step"])
def test_fast_dev_run_reports_nothing_but_still_checks_the_monitor(
    resource: Literal["epoch", "step"], caplog: pytest.LogCaptureFixture
) -> None:
    """A ``fast_dev_run`` smoke test reported its few batches' value to the trial, and ASHA
    kept it in the rung records every later trial is compared with. Now nothing is reported
    (said once), as Lightning's EarlyStopping and ModelCheckpoint skip it; a monitor that is
    not logged still fails the fit."""
    pruner = PruneAt(None)
    study = optuna.create_study(pruner=pruner)
    callback = PruningCallback(study.ask(), monitor="epochs_seen", resource=resource)
    with caplog.at_level(logging.WARNING, logger="lightning_hpo.callbacks"):
        _trainer(callback, fast_dev_run=2).fit(_Progress(), _loader(), _loader())
    assert study.trials[0].intermediate_values == {} and pruner.calls == []
    said = [r.getMessage() for r in caplog.records if r.name == "lightning_hpo.callbacks"]
    assert said == ["PruningCallback: trial 0: fast_dev_run=2, so nothing is reported and the "
                    "pruner is not asked (values of a few batches would stay in the rung "
                    "records every later trial is compared with); Lightning's EarlyStopping and "
                    "ModelCheckpoint skip it too"]
    typo = PruningCallback(study.ask(), monitor="epochs_sen", resource=resource)
    with pytest.raises(ConfigError, match="'epochs_sen' is not logged by the LightningModule"):
        _trainer(typo, fast_dev_run=True).fit(_Progress(), _loader(), _loader())
