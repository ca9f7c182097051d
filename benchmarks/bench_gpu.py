"""One GPU: seconds per epoch of one trial (Lightning vs a plain loop), then trials per GPU.

What is measured, on Fashion-MNIST-size data the benchmark writes itself (:func:`write_idx_files`:
torchvision's four uncompressed IDX files, 60,000 training and 10,000 validation 28x28 images
made from scikit-learn's digits, resized, shifted and noised with a fixed seed, so nothing is
downloaded):

1. **One trial.** LeNet (relu) with SGD lr 0.1, at batch 128 and 256. The Lightning path is
   ``Trainer.fit`` of ``LeNet`` on ``FashionMNISTDataModule`` (no logger, progress bar or
   checkpointing), each epoch timed from ``on_train_epoch_start`` to ``on_train_epoch_end``
   (validation runs in between). The plain path is the same network and optimiser in a
   hand-written loop over the same images held as normalised tensors on the device, shuffled each
   epoch with a seeded ``torch.randperm``, then a validation pass computing the mean loss and the
   error. On CUDA the clock is read after ``torch.cuda.synchronize()``; on CPU both paths use all
   cores' threads. The first epoch of each path is a warm-up and is not counted. On CUDA the
   Lightning path is LeNet with ``cuda_graphs=True``, whose training step is replayed from a
   CUDA graph (:mod:`lightning_hpo.builtin._cuda_graph`); the same run with the default
   ``cuda_graphs=False`` is shown beside it (*eager Lightning*), not judged.
2. **Trials per GPU.** Random search through the launcher's own ``Supervisor`` (run in this
   process, as ``bench_workers.py`` does), no pruning, each trial LeNet (the launcher's
   default ``cuda_graphs: auto``: a CUDA graph on a GPU) on the same files for 3
   epochs at batch 128, with ``devices.trials_per_device`` = 1, 2, 4 and 8 on one GPU and
   3 trials per slot. *Epochs per second* is the epochs of the trials that ended between the
   first trial's fit start and the end of the last trial, over that window (worker start-up is
   not in it); *end to end* is every epoch over the supervisor's whole run. The *speed-up* is
   against 1 trial per GPU. While each run goes a thread samples the GPU's utilisation every
   0.15 s (NVML through ``pynvml`` when importable, else ``nvidia-smi``); *busy* is the mean
   utilisation of the samples inside the steady window (and the share of samples above 0).
3. With ``--mps`` and ``nvidia-cuda-mps-control`` on the PATH, step 2 again under the CUDA
   Multi-Process Service (the daemon is started with its pipe and log folders in the run's
   temporary folder and stopped afterwards; this process keeps its own CUDA context outside
   MPS); shown for comparison, not judged.

Targets (the issue's, for an H100-class GPU): Lightning / plain <= 1.3x at batch 128 (judged on
every device, as ``bench_epoch.py`` does); on CUDA also one trial at most 0.6 s per epoch at
batch 128, 8 trials per GPU at least 5x the epochs per second of 1, and the GPU busy at least 90%
of the steady window at the fastest trials-per-GPU. Without CUDA the same benchmark runs at small
sizes (6,000 / 1,000 images, 1 and 2 trials per device on the CPU, 2 epochs a trial) and prints
the launcher's figures with no verdict.

Example::

    python benchmarks/bench_gpu.py                      # several minutes on a GPU; ~20 s on 2 cores
    python benchmarks/bench_gpu.py --mps --json gpu.json
    python benchmarks/bench_gpu.py --trials-per-device 1,4,8 --trials-per-slot 4
    python benchmarks/bench_gpu.py --quick              # smoke run (~35 s on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import lightning.pytorch as pl
import numpy as np
import optuna
import torch
import torch.nn.functional as F
from _record import Figure, machine_line, write_figures
from bench_epoch import lightning_epochs, sync
from bench_workers import all_complete, steady_window

from lightning_hpo.builtin.data import FashionMNISTDataModule
from lightning_hpo.builtin.models import LeNet

LR = 0.1
#: Fashion-MNIST training-set pixel mean and standard deviation, as the data module uses them.
MEAN, STD = 0.2860, 0.3530
TARGET_RATIO = 1.3  # Lightning / plain, s per epoch, batch 128
TARGET_EPOCH_SECONDS = 0.6  # Lightning, one trial, batch 128, CUDA
TARGET_SPEEDUP = 5.0  # epochs/s at 8 trials per GPU vs 1, CUDA
TARGET_BUSY = 0.9  # GPU busy fraction at the fastest trials-per-GPU, CUDA
SPEEDUP_AT = 8
LAUNCHER_BATCH_SIZE = 128
SAMPLE_SECONDS = 0.15
IMAGE_SIZE = 28


# -- data: Fashion-MNIST-format files made from the digits -----------------------------------


def _digit_images() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 digits as 28x28 uint8 images (0..255) and their labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = torch.as_tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    big = F.interpolate(small, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear",
                        align_corners=False).clamp_(0.0, 1.0)
    images = (big.squeeze(1) * 255.0).round().to(torch.uint8).numpy()
    return images, digits.target.astype(np.uint8)


def _variants(base: np.ndarray, labels: np.ndarray, n: int,
              rng: np.random.Generator, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images drawn from ``base``, each shifted by up to 2 pixels and noised."""
    pad = 2
    padded = np.pad(base, ((0, 0), (pad, pad), (pad, pad)))
    out = np.empty((n, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    picks = rng.integers(0, len(base), size=n)
    offsets = np.arange(IMAGE_SIZE)
    for start in range(0, n, chunk):
        idx = picks[start:start + chunk]
        dy = rng.integers(0, 2 * pad + 1, size=len(idx))
        dx = rng.integers(0, 2 * pad + 1, size=len(idx))
        rows = (dy[:, None] + offsets)[:, :, None]
        cols = (dx[:, None] + offsets)[:, None, :]
        shifted = padded[idx[:, None, None], rows, cols].astype(np.int16)
        noise = rng.normal(0.0, 12.0, size=shifted.shape).round().astype(np.int16)
        out[start:start + len(idx)] = np.clip(shifted + noise, 0, 255).astype(np.uint8)
    return out, labels[picks]


def _write_idx(path: Path, data: np.ndarray) -> None:
    """One uncompressed IDX file: big-endian magic (uint8, 1 or 3 dims), the dims, the bytes."""
    magic = 0x00000800 | data.ndim
    header = struct.pack(f">I{data.ndim}I", magic, *data.shape)
    path.write_bytes(header + np.ascontiguousarray(data, dtype=np.uint8).tobytes())


def write_idx_files(root: str | Path, n_train: int, n_val: int, seed: int = 0) -> Path:
    """Write Fashion-MNIST-format files of ``n_train`` / ``n_val`` images under ``root``.

    The four files torchvision's ``FashionMNIST(root, download=False)`` reads
    (``<root>/FashionMNIST/raw/train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``), made from scikit-learn's digits
    resized to 28x28 and scaled to 0..255, drawn at random with a shift of up to 2 pixels and
    Gaussian noise (all from ``seed``), so no two are alike. Returns the ``raw`` folder.

    Example::

        >>> import tempfile, torchvision
        >>> root = tempfile.mkdtemp()
        >>> _ = write_idx_files(root, 300, 100)
        >>> ds = torchvision.datasets.FashionMNIST(root, train=False, download=False)
        >>> tuple(ds.data.shape), int(ds.targets.max())
        ((100, 28, 28), 9)
    """
    if n_train < 1 or n_val < 1:
        raise ValueError(f"need at least one image per split, got {n_train} / {n_val}")
    raw = Path(root) / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    base, labels = _digit_images()
    rng = np.random.default_rng(seed)
    for prefix, n in (("train", n_train), ("t10k", n_val)):
        images, targets = _variants(base, labels, n, rng)
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", images)
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", targets)
    return raw


# -- one trial: Lightning vs a plain loop ----------------------------------------------------


def device_tensors(root: str, train: bool,
                   device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The split's images as normalised ``(N, 1, 28, 28)`` float32 and its labels, on ``device``."""
    from torchvision.datasets import FashionMNIST

    ds = FashionMNIST(root, train=train, download=False)
    images = (ds.data.to(device=device, dtype=torch.float32) / 255.0 - MEAN) / STD
    return images.unsqueeze(1).contiguous(), ds.targets.to(device=device, dtype=torch.int64)


def plain_epochs(device: torch.device, root: str, epochs: int, batch_size: int,
                 seed: int = 0) -> list[float]:
    """Seconds of each of ``epochs`` epochs of a hand-written loop (warm-up included)."""
    pl.seed_everything(seed, verbose=False)
    net = LeNet(lr=LR).net.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.0, weight_decay=0.0)
    x_train, y_train = device_tensors(root, True, device)
    x_val, y_val = device_tensors(root, False, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    n_train, n_val = len(y_train), len(y_val)
    seconds = []
    for _ in range(epochs):
        sync(device)
        start = time.perf_counter()
        net.train()
        train_loss = torch.zeros((), device=device)
        order = torch.randperm(n_train, device=device, generator=generator)
        for first in range(0, n_train, batch_size):
            idx = order[first:first + batch_size]
            x, y = x_train[idx], y_train[idx]
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            train_loss += loss.detach() * len(y)
        net.eval()
        val_loss = torch.zeros((), device=device)
        wrong = torch.zeros((), device=device, dtype=torch.int64)
        with torch.no_grad():
            for first in range(0, n_val, batch_size):
                x, y = x_val[first:first + batch_size], y_val[first:first + batch_size]
                logits = net(x)
                val_loss += F.cross_entropy(logits, y, reduction="sum")
                wrong += (logits.argmax(dim=1) != y).sum()
        # as Lightning reads them: mean train loss, mean validation loss, error
        _ = (float(train_loss) / n_train, float(val_loss) / n_val, int(wrong) / n_val)
        sync(device)
        seconds.append(time.perf_counter() - start)
    return seconds


@dataclass(frozen=True)
class EpochRow:
    """Mean seconds per timed epoch of both paths at one batch size."""

    batch_size: int
    lightning: float
    plain: float
    eager: float | None = None  # Lightning with cuda_graphs=False (CUDA only)

    @property
    def ratio(self) -> float:
        return self.lightning / self.plain if self.plain > 0 else float("inf")


def one_trial(device: torch.device, root: str, epochs: int,
              batch_sizes: Iterable[int]) -> list[EpochRow]:
    """Both paths at every batch size, ``epochs`` timed epochs after one warm-up each."""
    rows = []
    for batch_size in batch_sizes:
        light = lightning_epochs(
            epochs + 1, batch_size, seed=0, device=device,
            model_args={"cuda_graphs": True} if device.type == "cuda" else None,
            datamodule=FashionMNISTDataModule(root=root, batch_size=batch_size))[1:]
        plain = plain_epochs(device, root, epochs + 1, batch_size)[1:]
        eager = None
        if device.type == "cuda":  # the same without the CUDA graph, for comparison
            eager = statistics.fmean(lightning_epochs(
                epochs + 1, batch_size, seed=0, device=device, model_args={"cuda_graphs": False},
                datamodule=FashionMNISTDataModule(root=root, batch_size=batch_size))[1:])
        rows.append(EpochRow(batch_size, statistics.fmean(light), statistics.fmean(plain), eager))
        print(f"# batch {batch_size}: lightning {rows[-1].lightning:.3f} s/epoch, plain "
              f"{rows[-1].plain:.3f} s/epoch" + (f", lightning eager {eager:.3f}" if eager else ""),
              file=sys.stderr, flush=True)
    return rows


# -- GPU utilisation ---------------------------------------------------------------------------


def _gpu_id() -> str:
    """The first visible GPU as NVML and nvidia-smi name it (index or UUID)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


class UtilSampler:
    """Samples the GPU's utilisation (percent) every ``interval`` seconds in a thread.

    NVML through ``pynvml`` when it imports, else one ``nvidia-smi`` query per sample. Use as a
    context manager; ``samples`` holds ``(unix time, percent)``.
    """

    def __init__(self, interval: float = SAMPLE_SECONDS) -> None:
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self.source = "none"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None  # the pynvml module once initialised, to shut it down
        self._read = self._reader()

    def _reader(self) -> Callable[[], float | None] | None:
        gpu = _gpu_id()
        try:
            nvml: Any = importlib.import_module("pynvml")
        except ImportError:
            nvml = None
        if nvml is not None:
            try:
                nvml.nvmlInit()
                handle = (nvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit()
                          else nvml.nvmlDeviceGetHandleByUUID(gpu))
            except (nvml.NVMLError, ValueError) as error:
                print(f"# NVML unusable ({error}); sampling with nvidia-smi", file=sys.stderr)
            else:
                self.source, self._nvml = "NVML", nvml

                def read_nvml() -> float | None:
                    try:
                        return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                    except nvml.NVMLError:
                        return None

                return read_nvml
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return None
        self.source = "nvidia-smi"
        command = [smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", gpu]

        def read() -> float | None:
            done = subprocess.run(command, capture_output=True, text=True, timeout=5, check=False)
            text = done.stdout.strip().splitlines()
            try:
                return float(text[0]) if done.returncode == 0 and text else None
            except ValueError:
                return None

        return read

    def _loop(self) -> None:
        read = self._read
        assert read is not None  # started only with a reader
        while not self._stop.is_set():
            before = time.time()
            try:
                value = read()
            except (OSError, subprocess.SubprocessError):
                value = None
            if value is not None:
                self.samples.append(((before + time.time()) / 2, value))
            self._stop.wait(max(0.0, self.interval - (time.time() - before)))

    def __enter__(self) -> UtilSampler:
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, name="gpu-util", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None

    def busy(self, start: float, end: float) -> tuple[float, float] | None:
        """Mean utilisation / 100 and the share of samples above 0, in ``[start, end]``."""
        inside = [value for when, value in self.samples if start <= when <= end]
        if not inside:
            return None
        return statistics.fmean(inside) / 100.0, sum(v > 0 for v in inside) / len(inside)


# -- the launcher at k trials per device -------------------------------------------------------


class _Row(Protocol):
    """What the rates need of a trial (``lightning_hpo.launch.processes.supervisor.TrialRow``)."""

    fit_started: float | None
    ended: float | None
    epochs: int
    from_epoch: int


@dataclass(frozen=True)
class Rate:
    """Epochs trained in the window ``[start, end]`` (unix seconds)."""

    epochs: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def per_second(self) -> float:
        """Epochs per second (0 for an empty window)."""
        return self.epochs / self.seconds if self.seconds > 0 else 0.0


def steady_epochs(rows: Iterable[_Row]) -> Rate:
    """Epochs of the trials that ended from the first fit start to the end of the last trial.

    Raises:
        ValueError: when no trial both started fitting and ended.

    Example::

        >>> from types import SimpleNamespace as Row
        >>> rate = steady_epochs([Row(fit_started=10.0, ended=13.0, epochs=3, from_epoch=0),
        ...                       Row(fit_started=11.0, ended=16.0, epochs=3, from_epoch=0),
        ...                       Row(fit_started=15.0, ended=None, epochs=1, from_epoch=0)])
        >>> rate.epochs, rate.seconds, rate.per_second
        (6, 6.0, 1.0)
    """
    rows = list(rows)
    first, last = steady_window(rows)
    epochs = sum(r.epochs - r.from_epoch for r in rows if r.ended is not None and r.ended >= first)
    return Rate(epochs, first, last)


def speedup(ours: Rate, baseline: Rate) -> float:
    """Epochs per second relative to the baseline's (``inf`` when the baseline trained none)."""
    return ours.per_second / baseline.per_second if baseline.per_second > 0 else float("inf")


def build_config(study: str, storage: str, run_dir: str, root: str, trials: int,
                 accelerator: str, trials_per_device: int, epochs: int) -> dict[str, Any]:
    """The launcher config of one scaling run, as the raw mapping."""
    return {
        "study": study, "storage": storage, "run_dir": run_dir,
        # the launcher's own default for a built-in model: cuda_graphs auto (a CUDA graph on
        # the GPU, eager elsewhere)
        "model": {"name": "lenet"},
        "data": {"name": "fashion_mnist", "root": root, "batch_size": LAUNCHER_BATCH_SIZE},
        "metric": "validation_error",
        "space": {"lr": {"loguniform": [0.05, 0.5]}},
        "sampler": {"name": "random", "seed": 0}, "pruner": {"name": "none"},
        "trainer": {"max_epochs": epochs},
        "devices": {"accelerator": accelerator, "count": 1, "per_trial": 1,
                    "trials_per_device": trials_per_device},
        "stop": {"n_trials": trials},
    }


@dataclass
class ScalingResult:
    """One launcher run at ``k`` trials per device."""

    k: int
    trials: int
    steady: Rate
    total: Rate
    busy: tuple[float, float] | None = None  # mean utilisation / 100, share of samples > 0
    samples: int = 0
    states: dict[str, int] = field(default_factory=dict)


def run_launcher(raw: dict[str, Any], k: int, sample_gpu: bool) -> ScalingResult:
    """Run one study with the supervisor in this process (all cores shared by the workers),
    sampling the GPU's utilisation meanwhile when ``sample_gpu``."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.config.devices import detect_devices, plan_slots
    from lightning_hpo.launch.processes.supervisor import Supervisor
    from lightning_hpo.launch.study.creation import open_study
    from lightning_hpo.storage import open_storage

    cfg = parse_config(raw)
    kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
    slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
    study, _ = open_study(cfg, open_storage(cfg.storage))
    sup = Supervisor(cfg, study, slots, kind, n_cores=len(os.sched_getaffinity(0)))
    sampler = UtilSampler() if sample_gpu else None
    with sampler if sampler is not None else contextlib.nullcontext():
        start = time.time()
        sup.run()
        end = time.time()
    rows = list(sup.rows.values())
    states = all_complete(rows, cfg.stop.n_trials, cfg.study,
                          hint=f" (worker logs: {cfg.study_dir / 'workers'})")
    steady = steady_epochs(rows)
    total = Rate(sum(r.epochs - r.from_epoch for r in rows if r.ended is not None), start, end)
    busy = sampler.busy(steady.start, steady.end) if sampler is not None else None
    return ScalingResult(k, len(rows), steady, total, busy,
                         len(sampler.samples) if sampler is not None else 0, states)


def scaling(tmp: Path, root: str, ks: list[int], trials_per_slot: int, epochs: int,
            accelerator: str, sample_gpu: bool, tag: str = "") -> list[ScalingResult]:
    """The launcher at every ``k`` in ``ks`` trials per device, ``k * trials_per_slot`` trials
    (at least 2) each."""
    results = []
    for k in ks:
        name = f"gpu-k{k}" + ("-mps" if "MPS" in tag else "")
        trials = max(k * trials_per_slot, 2)
        raw = build_config(name, str(tmp / f"{name}.journal"), str(tmp / "runs"), root, trials,
                           accelerator, k, epochs)
        results.append(run_launcher(raw, k, sample_gpu))
        r = results[-1]
        print(f"# {k} trial(s) per device{tag}: {r.trials} trials, {r.total.seconds:.1f} s, "
              f"{r.steady.per_second:.2f} epochs/s steady", file=sys.stderr, flush=True)
    return results


MPS_ENV = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")


@contextlib.contextmanager
def mps_daemon(tmp: Path) -> Iterator[bool]:
    """Run the CUDA MPS control daemon for the block (its folders in ``tmp``, exported through
    ``os.environ`` so the launcher's workers join it); yields False when it cannot start."""
    binary = shutil.which("nvidia-cuda-mps-control")
    if binary is None:
        print("MPS: nvidia-cuda-mps-control not found, not measured")
        yield False
        return
    saved = {key: os.environ.get(key) for key in MPS_ENV}
    for key, folder in zip(MPS_ENV, ("mps-pipe", "mps-log"), strict=True):
        (tmp / folder).mkdir(exist_ok=True)
        os.environ[key] = str(tmp / folder)
    started = False
    try:
        done = subprocess.run([binary, "-d"], env=dict(os.environ), capture_output=True,
                              text=True, timeout=30, check=False)
        started = done.returncode == 0
        if not started:
            why = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
            print(f"MPS: nvidia-cuda-mps-control -d failed ({why}), not measured")
        yield started
    finally:
        if started:
            subprocess.run([binary], input="quit\n", env=dict(os.environ), capture_output=True,
                           text=True, timeout=30, check=False)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- report ------------------------------------------------------------------------------------


def report_one_trial(rows: list[EpochRow], cuda: bool, where: str) -> tuple[bool, list[Figure]]:
    """Print the s/epoch table and the verdicts; returns whether the judged targets were met,
    and the figures (at batch 128, else the first batch size)."""
    eager = any(r.eager is not None for r in rows)
    print(f"\n{'batch':>6} {'Lightning s/epoch':>18} {'plain s/epoch':>14} {'ratio':>7}"
          + (f" {'eager Lightning':>16} {'graph/eager':>12}" if eager else ""))
    for r in rows:
        print(f"{r.batch_size:>6} {r.lightning:>18.4f} {r.plain:>14.4f} {r.ratio:>6.2f}x"
              + (f" {r.eager:>16.4f} {r.lightning / r.eager:>11.2f}x" if r.eager else ""))
    if eager:
        print("(Lightning: cuda_graphs=True, the training step replayed from a CUDA graph; "
              "eager Lightning: the default, cuda_graphs=False)")
    head = next((r for r in rows if r.batch_size == 128), rows[0])
    ok_ratio = head.ratio <= TARGET_RATIO
    print(f"\n{'PASS' if ok_ratio else 'MISS'}  Lightning / plain at batch {head.batch_size}: "
          f"{head.ratio:.2f}x (target <= {TARGET_RATIO}x)")
    figures = [Figure(f"Lightning vs plain loop, s/epoch, batch {head.batch_size} ({where})",
                      "bench_gpu.py", f"{head.lightning:.4f} s", f"{head.plain:.4f} s plain loop",
                      f"{head.ratio:.2f}x", f"<= {TARGET_RATIO}x", ok_ratio)]
    ok = ok_ratio
    if head.eager:
        figures.append(Figure(
            f"Lightning s/epoch, CUDA graph vs eager, batch {head.batch_size} ({where})",
            "bench_gpu.py", f"{head.lightning:.4f} s", f"{head.eager:.4f} s eager",
            f"{head.lightning / head.eager:.2f}x", "-", None))
    if cuda:
        seconds_met: bool | None = None
        if head.batch_size == 128:
            seconds_met = head.lightning <= TARGET_EPOCH_SECONDS
            ok = ok and seconds_met
            print(f"{'PASS' if seconds_met else 'MISS'}  one trial through Lightning at batch "
                  f"128: {head.lightning:.3f} s per epoch (target <= {TARGET_EPOCH_SECONDS} s)")
        else:
            print("(s/epoch target not judged: it is set at batch 128, not measured here)")
        figures.append(Figure(
            f"one trial, Lightning s/epoch, batch {head.batch_size} ({where})", "bench_gpu.py",
            f"{head.lightning:.3f} s", f"{head.plain:.3f} s plain loop", f"{head.ratio:.2f}x",
            f"<= {TARGET_EPOCH_SECONDS} s" if seconds_met is not None else "-", seconds_met))
    return ok, figures


def _busy_text(busy: tuple[float, float] | None) -> str:
    return "n/a" if busy is None else f"{busy[0]:.0%}"


def report_scaling(results: list[ScalingResult], cuda: bool, judged: bool,
                   tag: str = "") -> tuple[bool, list[Figure]]:
    """Print the scaling table and, when ``judged`` (CUDA, no MPS), the verdicts; returns
    whether the judged targets were met, and one figure per k plus one for the busy share."""
    unit = "GPU" if cuda else "CPU"
    base = results[0]
    print(f"\n{f'trials/{unit}':>10} {'trials':>6} {'epochs':>6} {'steady s':>9} "
          f"{'epochs/s':>9} {'speed-up':>9} {'e2e epochs/s':>13} {f'{unit} busy':>9} "
          f"{'busy>0':>7}" + (f"   ({tag.strip(', ')})" if tag else ""))
    for r in results:
        share = "n/a" if r.busy is None else f"{r.busy[1]:.0%}"
        print(f"{r.k:>10} {r.trials:>6} {r.steady.epochs:>6} {r.steady.seconds:>9.1f} "
              f"{r.steady.per_second:>9.2f} {speedup(r.steady, base.steady):>8.2f}x "
              f"{r.total.per_second:>13.2f} {_busy_text(r.busy):>9} {share:>7}")
    ok = True
    figures = []
    for r in results:
        ratio = speedup(r.steady, base.steady)
        met: bool | None = None
        target = "-"
        if judged and r.k == SPEEDUP_AT and base.k == 1:
            met, target = ratio >= TARGET_SPEEDUP, f">= {TARGET_SPEEDUP:g}x"
            ok = ok and met
        figures.append(Figure(
            f"launcher epochs/s, {r.k} trial(s) per {unit}{tag}", "bench_gpu.py",
            f"{r.steady.per_second:.2f} epochs/s",
            f"{base.steady.per_second:.2f} epochs/s at {base.k} trial(s)", f"{ratio:.2f}x",
            target, met))
    best = max(results, key=lambda r: r.steady.per_second)
    busy_met: bool | None = None
    if judged:
        at = f"{SPEEDUP_AT} trials per GPU vs 1"
        if any(r.k == SPEEDUP_AT for r in results) and base.k == 1:
            r8 = next(r for r in results if r.k == SPEEDUP_AT)
            ratio = speedup(r8.steady, base.steady)
            print(f"\n{'PASS' if ratio >= TARGET_SPEEDUP else 'MISS'}  epochs/s at {at}: "
                  f"{ratio:.2f}x (target >= {TARGET_SPEEDUP:g}x)")
        else:
            print(f"\n(speed-up target not judged: needs k = 1 and k = {SPEEDUP_AT})")
        if best.busy is None:
            print("(GPU busy not judged: no utilisation samples; install nvidia-ml-py or put "
                  "nvidia-smi on the PATH)")
        else:
            busy_met = best.busy[0] >= TARGET_BUSY
            ok = ok and busy_met
            print(f"{'PASS' if busy_met else 'MISS'}  GPU busy at {best.k} trials per GPU (the "
                  f"fastest): {best.busy[0]:.0%} of the steady window (target >= "
                  f"{TARGET_BUSY:.0%})")
    elif not cuda:
        print("\n(CPU: no target for the launcher's scaling; the figures are shown for context)")
    ratio_text = ("-" if best.busy is None or base.busy is None or base.busy[0] <= 0
                  else f"{best.busy[0] / base.busy[0]:.2f}x")
    figures.append(Figure(
        f"{unit} busy, {best.k} trial(s) per {unit} (fastest){tag}", "bench_gpu.py",
        _busy_text(best.busy), f"{_busy_text(base.busy)} at {base.k} trial(s)", ratio_text,
        f">= {TARGET_BUSY:.0%}" if judged else "-", busy_met))
    return ok, figures


# -- main --------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must list integers >= 1")
    return values


def quiet() -> None:
    """No Lightning or Optuna chatter (the launcher's workers log to their own files)."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")
    warnings.filterwarnings("ignore", module="torchvision")
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_gpu.py --mps --json gpu.json",
    )
    parser.add_argument("--device", choices=("cuda", "cpu"),
                        help="default: cuda when available, else cpu")
    parser.add_argument("--train", type=int, help="training images (GPU 60000, CPU 6000)")
    parser.add_argument("--val", type=int, help="validation images (GPU 10000, CPU 1000)")
    parser.add_argument("--epochs", type=int, help="timed epochs of one trial, after 1 warm-up "
                        "(default 3)")
    parser.add_argument("--batch-sizes", type=_ints, help="one-trial batch sizes (default 128,256)")
    parser.add_argument("--trials-per-device", type=_ints,
                        help="launcher runs, trials sharing the device (GPU 1,2,4,8; CPU 1,2)")
    parser.add_argument("--trials-per-slot", type=int,
                        help="trials per slot in each launcher run (default 3)")
    parser.add_argument("--launcher-epochs", type=int,
                        help="epochs of each launcher trial (GPU 3, CPU 2)")
    parser.add_argument("--mps", action="store_true",
                        help="also run the launcher scaling under CUDA MPS")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2000/500 images, 1 timed "
                        "epoch at batch 128, 1 and 2 trials per device, 2 trials per slot, 1 "
                        "epoch each")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)

    cuda_ok = torch.cuda.is_available()
    if args.device == "cuda" and not cuda_ok:
        parser.error("--device cuda: no CUDA device is available")
    cuda = cuda_ok if args.device is None else args.device == "cuda"
    device = torch.device("cuda" if cuda else "cpu")
    quick = args.quick

    def pick(value: Any, gpu: Any, cpu: Any, small: Any) -> Any:
        return value if value is not None else small if quick else gpu if cuda else cpu

    n_train = pick(args.train, 60000, 6000, 2000)
    n_val = pick(args.val, 10000, 1000, 500)
    epochs = pick(args.epochs, 3, 3, 1)
    batch_sizes = pick(args.batch_sizes, [128, 256], [128, 256], [128])
    ks = pick(args.trials_per_device, [1, 2, 4, 8], [1, 2], [1, 2])
    per_slot = pick(args.trials_per_slot, 3, 3, 2)
    launcher_epochs = pick(args.launcher_epochs, 3, 2, 1)
    if min(n_train, n_val, epochs, per_slot, launcher_epochs) < 1:
        parser.error("--train, --val, --epochs, --trials-per-slot and --launcher-epochs "
                     "must be >= 1")

    quiet()
    print(machine_line(gpu=True))
    cores = len(os.sched_getaffinity(0))
    if cuda:
        where = torch.cuda.get_device_name(device)
        print(f"device: cuda ({where})")
    else:
        torch.set_num_threads(cores)
        where = "CPU"
        print(f"device: cpu; torch threads: {torch.get_num_threads()} (all cores, both paths)")
    print(f"data: {n_train} training / {n_val} validation 28x28 images in Fashion-MNIST files "
          f"(made from the digits); LeNet relu, SGD lr {LR}")
    print(f"one trial: batch {', '.join(map(str, batch_sizes))}; {epochs} timed epoch(s) + 1 "
          f"warm-up per path")
    print(f"launcher: {', '.join(map(str, ks))} trial(s) per {'GPU' if cuda else 'CPU'}, "
          f"{per_slot} trials per slot, {launcher_epochs} epoch(s) each at batch "
          f"{LAUNCHER_BATCH_SIZE}, no pruning" + ("; then again under MPS" if args.mps else ""))

    ok = True
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as name:
        tmp = Path(name)
        root = str(tmp / "data")
        began = time.perf_counter()
        write_idx_files(root, n_train, n_val)
        print(f"# data files written in {time.perf_counter() - began:.1f} s", file=sys.stderr,
              flush=True)

        rows = one_trial(device, root, epochs, batch_sizes)
        met, found = report_one_trial(rows, cuda, where)
        ok, figures = ok and met, figures + found
        if cuda:
            torch.cuda.empty_cache()  # the launcher's workers get the memory back

        accelerator = "gpu" if cuda else "cpu"
        results = scaling(tmp, root, ks, per_slot, launcher_epochs, accelerator, cuda)
        met, found = report_scaling(results, cuda, judged=cuda)
        ok, figures = ok and met, figures + found

        if args.mps and not cuda:
            print("MPS: needs CUDA, not measured")
        elif args.mps:
            with mps_daemon(tmp) as running:
                if running:
                    mps = scaling(tmp, root, ks, per_slot, launcher_epochs, accelerator, cuda,
                                  tag=", MPS")
                    figures += report_scaling(mps, cuda, judged=False, tag=", MPS")[1]
                    print("(MPS: shown for comparison with the run above, not judged)")
    write_figures(args.json, figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
