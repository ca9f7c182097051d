"""The training step replayed from a CUDA graph (builtin._cuda_graph, ImageClassifier).

Where capture applies is pure logic, tested exhaustively. How the step meets Lightning (the
skipped zero_grad and backward, the gradients put back, an epoch's smaller last batch run
eagerly, clipping, momentum, global_step) is tested on CPU with the CUDA graph alone replaced:
:class:`_Recompute` stands in for ``torch.cuda.CUDAGraph`` and recomputes the captured
function into the same output tensors on each ``replay()``, so :meth:`Captured.replay` and the
model's hooks run as they do on a GPU. The real capture is tested where CUDA is available (on
the GPU machine; skipped here).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import pickle
from collections.abc import Iterator

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lightning_hpo.builtin import _cuda_graph
from lightning_hpo.builtin._cuda_graph import (
    EAGER_STEPS,
    Captured,
    StepGraph,
    capture_blockers,
    trainer_blockers,
)
from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import DropoutMLP, LeNet
from lightning_hpo.errors import ConfigError

CUDA = torch.cuda.is_available()

# -- where capture applies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "single", "precision", "accumulate", "anomaly"),
    list(itertools.product(("cuda", "cpu", "mps"), (True, False),
                           ("32-true", "32", "16-mixed", "bf16-mixed", "64-true"), (1, 2),
                           (False, True))),
)
def test_capture_blockers_name_every_reason_and_only_those(
        device: str, single: bool, precision: str, accumulate: int, anomaly: bool) -> None:
    reasons = capture_blockers(device_type=device, single_device=single, precision=precision,
                               accumulate_grad_batches=accumulate, anomaly=anomaly)
    expected = [
        device != "cuda" and f"the device is {device}, not cuda",
        not single and "the strategy is not one device in one process (DDP)",
        precision not in ("32-true", "32") and f"precision is {precision}, not 32-true",
        accumulate != 1 and f"accumulate_grad_batches is {accumulate}, not 1",
        anomaly and "autograd anomaly detection is on",
    ]
    assert reasons == tuple(r for r in expected if r)


def test_trainer_blockers_read_the_trainer_as_configured() -> None:
    cpu = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    assert trainer_blockers(cpu) == ("the device is cpu, not cuda",)
    mixed = pl.Trainer(accelerator="cpu", devices=1, precision="bf16-mixed",
                       accumulate_grad_batches=3, logger=False, enable_progress_bar=False)
    assert trainer_blockers(mixed) == ("the device is cpu, not cuda",
                                       "precision is bf16-mixed, not 32-true",
                                       "accumulate_grad_batches is 3, not 1")
    ddp = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", logger=False,
                     enable_progress_bar=False)
    assert "the strategy is not one device in one process (DDP)" in trainer_blockers(ddp)


def test_a_step_graph_that_is_off_never_captures() -> None:
    graph = StepGraph(blockers=("precision is 16-mixed, not 32-true",), eager_steps=0)
    calls = []
    graph.capture = lambda *args: calls.append(args)  # type: ignore[assignment,method-assign]
    for _ in range(3):
        assert graph.run(nn.Linear(2, 2), lambda x, y: x.sum(), torch.zeros(1, 2),
                         torch.zeros(1)) is None
    assert calls == [] and not graph.captured and not graph.replayed
    assert graph.off == "precision is 16-mixed, not 32-true"


@pytest.mark.parametrize("bad", ["yes", "Auto", 1, None])
def test_cuda_graphs_must_be_true_false_or_auto(bad: object) -> None:
    with pytest.raises(ConfigError, match=rf"model\.cuda_graphs: is {bad!r}, but must be true, "
                                          "false or auto"):
        LeNet(cuda_graphs=bad)  # type: ignore[arg-type]
    assert LeNet(cuda_graphs=True).hparams.cuda_graphs is True
    assert LeNet(cuda_graphs="auto").hparams.cuda_graphs == "auto"
    assert DropoutMLP().hparams.cuda_graphs is False  # off by default (the launcher: auto)


# -- the step in Lightning, on CPU, with the graph recomputed ----------------------------------


class _Recompute:
    """Stands in for ``torch.cuda.CUDAGraph``: ``replay()`` recomputes the captured step into
    the captured output tensors (the loss and each parameter's gradient), as a replay does."""

    def __init__(self, module: nn.Module, loss_fn, x: torch.Tensor, y: torch.Tensor) -> None:
        self.module, self.loss_fn, self.x, self.y = module, loss_fn, x, y
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.loss = torch.zeros((), device=x.device)
        self.grads = [torch.zeros_like(p) for p in self.params]
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        loss = self.loss_fn(self.x, self.y)
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():
            self.loss.copy_(loss)
            for out, grad in zip(self.grads, grads, strict=True):
                out.copy_(grad)


def _recomputed_capture(module: nn.Module, loss_fn, x: torch.Tensor,
                        y: torch.Tensor) -> Captured:
    static = _Recompute(module, loss_fn, x.clone(), y.clone())
    for p in static.params:
        p.grad = None  # as after a capture
    return Captured(static, static.x, static.y, static.loss, static.params,
                    list(static.grads))


class _Clipped(LeNet):
    """LeNet whose optimiser changes its learning rate every epoch (a scheduler)."""

    def configure_optimizers(self):  # type: ignore[override]
        optimizer = super().configure_optimizers()
        return {"optimizer": optimizer,
                "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.5)}


def _train(graphs: bool | str, monkeypatch: pytest.MonkeyPatch, epochs: int = 2,
           model_cls: type[LeNet] = LeNet, stand_in: bool = True,
           **trainer: object) -> tuple[LeNet, pl.Trainer]:
    """LeNet on the digits (batch 100: 15 batches an epoch, the last one of 37 images), with
    momentum and weight decay; with ``graphs`` built with ``cuda_graphs=True`` and the step
    graph applying on the CPU, captured by :func:`_recomputed_capture` if ``stand_in``."""
    with monkeypatch.context() as patch:
        if graphs:
            patch.setattr("lightning_hpo.builtin.models.trainer_blockers", lambda trainer: ())
            if stand_in:
                patch.setattr(StepGraph, "capture", staticmethod(_recomputed_capture))
        pl.seed_everything(3, verbose=False)
        model = model_cls(lr=0.05, momentum=0.9, weight_decay=1e-3, cuda_graphs=graphs)
        run = pl.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, **trainer)  # type: ignore[arg-type]
        steps = []
        model.on_train_batch_end = (  # type: ignore[method-assign]
            lambda outputs, batch, idx: steps.append(model._step_graph.replayed))
        run.fit(model, datamodule=DigitsDataModule(batch_size=100, seed=0))
        model._replay_flags = steps  # type: ignore[attr-defined]
    return model, run


@pytest.mark.parametrize("trainer", [{}, {"gradient_clip_val": 0.05},
                                     {"gradient_clip_val": 0.5,
                                      "gradient_clip_algorithm": "value"}],
                         ids=["plain", "clip-norm", "clip-value"])
def test_replayed_steps_train_exactly_as_eager_steps(
        monkeypatch: pytest.MonkeyPatch, trainer: dict) -> None:
    eager, eager_run = _train(False, monkeypatch, **trainer)
    graphed, graphed_run = _train(True, monkeypatch, **trainer)
    flags = graphed._replay_flags  # type: ignore[attr-defined]
    per_epoch = graphed_run.num_training_batches
    assert per_epoch == 15 and len(flags) == 2 * per_epoch
    # eager first, then every full batch replayed; each epoch's last (37 images) eager
    expected = [i >= EAGER_STEPS and i % per_epoch != per_epoch - 1 for i in range(len(flags))]
    assert flags == expected
    assert not any(eager._replay_flags)  # type: ignore[attr-defined]
    assert graphed_run.global_step == eager_run.global_step == 2 * per_epoch
    for (name, a), b in zip(eager.named_parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    assert graphed_run.callback_metrics["validation_error"] == pytest.approx(
        float(eager_run.callback_metrics["validation_error"]), abs=1e-6)


def test_a_scheduler_still_steps_the_learning_rate_under_replay(
        monkeypatch: pytest.MonkeyPatch) -> None:
    eager, _ = _train(False, monkeypatch, epochs=3, model_cls=_Clipped)
    graphed, run = _train(True, monkeypatch, epochs=3, model_cls=_Clipped)
    assert run.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.05 / 8)
    for a, b in zip(eager.parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


def test_a_failed_capture_leaves_the_steps_eager_and_says_so_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def refuse(*args: object) -> Captured:
        raise RuntimeError("operation not permitted when stream is capturing\nmore")

    eager, _ = _train(False, monkeypatch)
    monkeypatch.setattr(StepGraph, "capture", staticmethod(refuse))
    monkeypatch.setattr(_cuda_graph, "_failures_reported", set())
    for _ in range(2):
        with caplog.at_level("WARNING", logger="lightning_hpo.builtin._cuda_graph"):
            failed, _ = _train(True, monkeypatch, stand_in=False)
    said = [r.getMessage() for r in caplog.records if r.name == "lightning_hpo.builtin._cuda_graph"]
    assert said == ["training steps stay eager (no CUDA graph): capture failed: operation not "
                    "permitted when stream is capturing"]
    for a, b in zip(eager.parameters(), failed.parameters(), strict=True):
        torch.testing.assert_close(b, a)


def test_asked_for_where_it_cannot_apply_says_why_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_cuda_graph, "_off_reported", set())
    with caplog.at_level("WARNING", logger="lightning_hpo.builtin._cuda_graph"):
        for graphs in (True, True, False):
            model = LeNet(cuda_graphs=graphs)
            pl.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=2,
                       limit_val_batches=1, logger=False, enable_checkpointing=False,
                       enable_progress_bar=False, enable_model_summary=False).fit(
                model, datamodule=DigitsDataModule(batch_size=64))
    said = [r.getMessage() for r in caplog.records if r.name == "lightning_hpo.builtin._cuda_graph"]
    assert said == ["cuda_graphs: training steps stay eager (no CUDA graph): the device is cpu, "
                    "not cuda"]


def test_auto_is_silent_where_it_cannot_apply(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_cuda_graph, "_off_reported", set())
    with caplog.at_level("WARNING", logger="lightning_hpo.builtin._cuda_graph"):
        model = LeNet(cuda_graphs="auto")
        pl.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                   logger=False, enable_checkpointing=False, enable_progress_bar=False,
                   enable_model_summary=False).fit(model, datamodule=DigitsDataModule())
    assert [r for r in caplog.records if r.name == "lightning_hpo.builtin._cuda_graph"] == []


@pytest.mark.parametrize("graphs", [True, "auto"])
def test_auto_replays_where_it_applies_as_true_does(
        monkeypatch: pytest.MonkeyPatch, graphs: bool | str) -> None:
    model, run = _train(graphs, monkeypatch, epochs=1)  # type: ignore[arg-type]
    per_epoch = run.num_training_batches
    assert model._replay_flags == [  # type: ignore[attr-defined]
        EAGER_STEPS <= i < per_epoch - 1 for i in range(per_epoch)]


def test_a_copy_of_a_captured_module_starts_without_the_graph() -> None:
    model = LeNet()
    graph = StepGraph()
    graph._captured = _recomputed_capture(model, model._loss_of, torch.zeros(2, 1, 28, 28),
                                          torch.zeros(2, dtype=torch.long))
    model._step_graph = graph
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert not twin._step_graph.captured
        assert twin._step_graph.off == "a copy of a module starts without a graph"


def test_the_graph_is_let_go_when_fit_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = _train(True, monkeypatch, epochs=1)
    assert any(model._replay_flags)  # type: ignore[attr-defined]
    assert not model._step_graph.captured and model._step_graph.off == "not in fit"


# -- the real capture (GPU only) ---------------------------------------------------------------
# Deterministic cuDNN and no TF32 in these comparisons: with TF32 convolutions (PyTorch's
# default) two runs that pick different algorithms differ by about 1e-3 per step, which 30
# steps with momentum amplify; the first GPU run of an earlier version of this test failed so.


@contextlib.contextmanager
def _exact_cuda() -> Iterator[None]:
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
         torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) = saved


def _gpu_fit(model: pl.LightningModule, epochs: int = 2) -> pl.Trainer:
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=epochs, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, datamodule=DigitsDataModule(batch_size=100, seed=0))
    return trainer


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on the GPU machine)")
def test_on_a_gpu_a_replay_gives_each_batch_its_own_loss_and_gradients() -> None:
    with _exact_cuda():
        torch.manual_seed(0)
        model = LeNet(momentum=0.9).cuda().train()
        loss_fn = model._loss_of
        batches = [(torch.randn(32, 1, 28, 28, device="cuda"),
                    torch.randint(0, 10, (32,), device="cuda")) for _ in range(3)]
        captured = Captured.of(model, loss_fn, *batches[0])
        assert all(p.grad is None for p in model.parameters())  # the capture computed nothing
        for step, (x, y) in enumerate([*batches, batches[0]]):
            if step == 2:
                model.zero_grad(set_to_none=True)  # what Lightning's eager steps do
            loss = captured.replay(x, y)
            eager_loss = loss_fn(x, y)
            eager = torch.autograd.grad(eager_loss, list(model.parameters()))
            torch.testing.assert_close(loss, eager_loss.detach(), rtol=1e-5, atol=1e-6)
            for (name, p), grad in zip(model.named_parameters(), eager, strict=True):
                assert p.grad is not None, name
                torch.testing.assert_close(p.grad, grad, rtol=1e-4, atol=1e-6,
                                           msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on the GPU machine)")
def test_on_a_gpu_captured_training_matches_eager_training() -> None:
    runs = {}
    with _exact_cuda():
        for graphs in (False, True):
            pl.seed_everything(3, verbose=False)
            model = LeNet(lr=0.05, momentum=0.9, weight_decay=1e-3, cuda_graphs=graphs)
            seen: list[bool] = []
            model.on_train_batch_end = (  # type: ignore[method-assign]
                lambda outputs, batch, idx, model=model, seen=seen:
                seen.append(model._step_graph.replayed))
            runs[graphs] = (model, _gpu_fit(model), seen)
    (eager, eager_run, eager_seen), (graphed, trainer, graphed_seen) = runs[False], runs[True]
    assert not any(eager_seen)
    assert sum(graphed_seen) == 2 * 14 - EAGER_STEPS
    assert trainer.global_step == eager_run.global_step == 30
    for (name, a), b in zip(eager.named_parameters(), graphed.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on the GPU machine)")
def test_on_a_gpu_dropout_under_replay_is_random_and_seeded() -> None:
    def weights(seed: int) -> list[torch.Tensor]:
        pl.seed_everything(seed, verbose=False)
        model = DropoutMLP(lr=0.1, num_hiddens_1=64, num_hiddens_2=64, dropout_1=0.5,
                           cuda_graphs=True)
        trainer = _gpu_fit(model)
        assert trainer.callback_metrics["validation_error"] < 0.5
        return [p.detach().cpu() for p in model.parameters()]

    with _exact_cuda():
        first, again, other = weights(1), weights(1), weights(2)
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b)
    assert any(not torch.allclose(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (run on the GPU machine)")
def test_on_a_gpu_the_capture_leaves_no_trace_in_the_random_state() -> None:
    model = DropoutMLP(num_hiddens_1=32, num_hiddens_2=32).cuda().train()
    x = torch.randn(16, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (16,), device="cuda")
    before = torch.cuda.get_rng_state()
    captured = Captured.of(model, lambda a, b: F.cross_entropy(model(a), b), x, y)
    assert torch.equal(torch.cuda.get_rng_state(), before)
    loss = captured.replay(x, y)
    assert torch.isfinite(loss)
    assert all(p.grad is g for p, g in zip(captured.params, captured.grads, strict=True))
