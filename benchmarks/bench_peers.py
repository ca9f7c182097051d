"""Our launcher against the script a user would otherwise write, on the quickstart's search.

The same search as ``make demo``: LeNet on scikit-learn's digits, the quickstart's space and
initial configuration, asynchronous successive halving with rungs at epochs 1, 3 and 9, 40
trials, 2 workers with one torch thread each. Both systems train the same 40 configurations
(the initial one, then 39 drawn by Optuna's ``RandomSampler(seed=0)``), enqueued in both
studies before the clock starts:

- **lightning_hpo**: ``python -m lightning_hpo.launch CONFIG --quiet`` (the quickstart's config,
  storage and run folder in a temporary directory), every default on: resume and best
  checkpoints, TensorBoard logging, seeding, the study's records, and the channels-last layout
  it gives its built-in models on a CPU (``model.channels_last: auto``; the plain script's
  ``LeNet(...)`` keeps the class's default, the layout PyTorch gives, unless
  ``--plain-channels-last``).
- **plain Optuna**: ``peers/plain_optuna.py`` (Optuna's documented parallel recipe: two
  processes on one journal file, 20 trials each, optuna-integration's
  ``PyTorchLightningPruningCallback``, ``SuccessiveHalvingPruner(min_resource=1,
  reduction_factor=3)``, Lightning's default checkpointing and logger), reporting 1-based epochs
  so that its rungs are ours. optuna-integration is installed into this benchmark's own folder
  (``benchmarks/.peers/``, ``pip install --target``) on first use, never into the project.
- **Syne Tune 0.16** (``peers/syne_tune_asha.py``: ``Tuner``, ``LocalBackend`` and ``ASHA``
  with the same rungs, a process per trial, the tuner's default 5-second polling), when it is
  installed in the benchmark's folder (``--install-syne-tune`` puts it in
  ``benchmarks/.peers/syne/``) or the environment; one run of it per run of the others, figures
  for context (no target). **Ray Tune** is not run here (its install is a framework of its own);
  BENCHMARKS.md has issue 24's figures of it.

Figures per run: wall-clock from the command's start to its exit, time from the start to the
first epoch's end, seconds per epoch of work (the trials' summed time from start to end over
their summed epochs: model, data and Trainer set-up included), epochs trained, and the best
validation error seen. ``--long`` runs the variant whose epochs are 10x longer (each training
image 10 times an epoch: ``peers/bigger_digits.py``, named in our config as
``data: {name: "bigger_digits:RepeatedDigits", repeat: 10}``). ``--cli`` builds our trials
through Lightning's ``LightningCLI`` instead (model and data by ``class_path``, the way a
project's own CLI config comes in).

Every system first runs once untimed on a 2-trial search (``--no-warm-up`` skips it): the first
process to import torch after a pause reads it from disk, and without the warm-up that cost
fell on whichever system ran first (ours: its first run's first epoch read 9.4 s, the next two
5.8 s and 4.9 s). The order then alternates from run to run (:func:`run_order`), so neither
system always runs right after the other. Besides the ratio of the medians, the figures give
the median of the per-run ratios, each pair measured a minute apart (the VM drifts over
minutes).

    python benchmarks/bench_peers.py                 # 3 runs each, quickstart
    python benchmarks/bench_peers.py --long --runs 2
    python benchmarks/bench_peers.py --cli           # our trials through LightningCLI
    python benchmarks/bench_peers.py --plain-channels-last   # its LeNet in our CPU layout too
    python benchmarks/bench_peers.py --storage postgresql://postgres@127.0.0.1:5432/bench

``--storage`` puts both systems' studies somewhere other than a journal file: ``sqlite`` (a
database file per run) or a PostgreSQL URL (the setup of several machines; each run's studies
get names of their own and are deleted after it). Both systems use the same storage.

On a machine with more than 2 cores the whole run is pinned to 2 of them (``--all-cores`` does
not), so both systems run the issue's setup: 2 workers, one torch thread each.

Both systems import this project's modules (ours all of them, plain Optuna's script the LeNet and
the data module) from bytecode, as pip leaves an installed package: the benchmark compiles them
first (:func:`compile_package`; ``make`` does too), or, where ``PYTHONDONTWRITEBYTECODE`` is set
(CI images, many containers), every process would compile them again.

Targets: wall-clock at most 0.8x plain Optuna's, time to the first epoch at most plain
Optuna's, seconds per epoch at most 1.05x (medians over the runs).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from _record import Figure, machine_line, write_figures

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
PEER_SITE = HERE / ".peers" / "site"
SYNE_SITE = HERE / ".peers" / "syne"
INTEGRATION = "optuna-integration==5.0.0"
#: Syne Tune and what it needs beyond this project's environment (whose numpy, pandas, scipy
#: and scikit-learn it uses: ``--no-deps`` keeps pip from installing copies of them).
SYNE_TUNE = ["syne-tune==0.16.0", "dill", "sortedcontainers", "psutil", "statsmodels", "patsy",
             "formulaic", "interface-meta", "wrapt", "xgboost"]
N_TRIALS, EPOCHS, WORKERS = 40, 9, 2
INITIAL = {"lr": 0.1, "batch_size": 128, "momentum": 0.0, "activation": "relu"}
SPACE = {
    "lr": optuna.distributions.FloatDistribution(0.01, 1.0, log=True),
    "batch_size": optuna.distributions.IntDistribution(32, 256),
    "momentum": optuna.distributions.FloatDistribution(0.0, 0.9),
    "activation": optuna.distributions.CategoricalDistribution(["relu", "sigmoid"]),
}


#: A trial's (start, end, epoch end times), unix seconds, by trial number (= configuration).
Spans = dict[int, tuple[float, float, list[float]]]


@dataclass(frozen=True)
class Run:
    """One run's figures (seconds) and its trials' spans."""

    wall: float
    first_epoch: float
    per_epoch: float
    epochs: int
    best: float
    spans: Spans


def steady_epochs(spans: Spans) -> dict[int, float]:
    """Each trial's median epoch time after its first epoch (the epoch itself, without the
    trial's set-up), for trials that trained at least 2 epochs.

    Example::

        >>> steady_epochs({0: (0.0, 5.0, [1.5, 2.5, 3.7]), 1: (0.0, 2.0, [1.8])})
        {0: 1.1}
    """
    steady = {}
    for number, (_, _, ends) in spans.items():
        gaps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
        if gaps:
            steady[number] = statistics.median(gaps)
    return steady


def epoch_ratio(ours: list[Run], base: list[Run]) -> tuple[float, float, float, int]:
    """The same epoch in both systems: for each configuration both trained past epoch 1 in
    a pair of runs, our steady epoch time over the baseline's. Returns (our mean, the
    baseline's mean, the median ratio, how many configurations were compared)."""
    a_all, b_all, ratios = [], [], []
    for a_run, b_run in zip(ours, base, strict=True):
        a, b = steady_epochs(a_run.spans), steady_epochs(b_run.spans)
        for number in sorted(a.keys() & b.keys()):
            a_all.append(a[number])
            b_all.append(b[number])
            ratios.append(a[number] / b[number])
    if not ratios:
        raise SystemExit("no configuration trained 2 epochs in both systems")
    return statistics.mean(a_all), statistics.mean(b_all), statistics.median(ratios), len(ratios)


def configurations(n: int = N_TRIALS) -> list[dict[str, Any]]:
    """The ``n`` configurations both systems train: the initial one, then random ones drawn by
    ``RandomSampler(seed=0)``.

    Example::

        >>> configs = configurations(3)
        >>> configs[0] == INITIAL, len(configs), sorted(configs[1]) == sorted(SPACE)
        (True, 3, True)
    """
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    configs = [INITIAL]
    for _ in range(n - 1):
        trial = study.ask(SPACE)
        configs.append(dict(trial.params))
        study.tell(trial, 0.0)
    return configs


def peer_env() -> dict[str, str]:
    """The baseline's environment: this benchmark's own site folder with optuna-integration."""
    if not (PEER_SITE / "optuna_integration").is_dir():
        print(f"installing {INTEGRATION} into {PEER_SITE} (the benchmark's own folder)")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--target", str(PEER_SITE), INTEGRATION], check=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PEER_SITE), str(SYNE_SITE), str(PEERS), *filter(None, [env.get("PYTHONPATH")])])
    return env


def syne_tune_found(env: dict[str, str], install: bool) -> bool:
    """Whether Syne Tune imports in the peers' environment (installed first when asked)."""
    if install and not (SYNE_SITE / "syne_tune").is_dir():
        print(f"installing {SYNE_TUNE[0]} into {SYNE_SITE} (the benchmark's own folder)")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--target", str(SYNE_SITE), *SYNE_TUNE], check=True)
    probe = subprocess.run([sys.executable, "-c", "import syne_tune"], env=env,
                           capture_output=True)
    return probe.returncode == 0


def compile_package(folder: Path | None = None) -> bool:
    """Write the bytecode of the modules in ``folder`` (default: lightning_hpo's) where it is
    missing or stale, as pip does when it installs a package (this checkout's is editable);
    quiet. False if a module failed to compile."""
    if folder is None:
        import lightning_hpo

        folder = Path(lightning_hpo.__file__).parent
    return bool(compileall.compile_dir(str(folder), quiet=2))


def pin_cores(n: int) -> str:
    """Pin this process (and so every process it starts) to ``n`` of its cores, when it has
    more: the comparison is the issue's, 2 workers on 2 cores with one torch thread each. Our
    launcher gives each slot its share of the cores it sees, the baseline one thread, so on a
    16-core machine they would otherwise differ by 8 threads to 1. Returns what was done."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) <= n:
        return f"cores: {len(cores)} (all of them)"
    os.sched_setaffinity(0, cores[:n])
    return (f"cores: pinned to {', '.join(map(str, cores[:n]))} of {len(cores)} (the issue's "
            f"{n}-core setup; --all-cores leaves them all)")


def ours_config(root: Path, configs: list[dict[str, Any]], repeat: int = 1,
                cli: bool = False) -> dict[str, Any]:
    """The quickstart's config for our launcher on ``configs``, its study and folders in
    ``root``: with ``repeat > 1`` the data module is ``peers/bigger_digits.py``'s (each image
    ``repeat`` times an epoch), by its ``package.module:Class`` name; with ``cli`` the model
    and data are given by ``class_path`` instead, so every trial is built through Lightning's
    own ``LightningCLI`` (space keys are then the CLI's dotted keys).

    Example::

        >>> raw = ours_config(Path("/tmp/x"), [INITIAL], repeat=10)
        >>> raw["data"], raw["stop"]["n_trials"]
        ({'name': 'bigger_digits:RepeatedDigits', 'repeat': 10}, 1)
        >>> sorted(ours_config(Path("/tmp/x"), [INITIAL], cli=True)["space"])[:2]
        ['data.init_args.batch_size', 'model.init_args.activation']
    """
    raw = yaml.safe_load((HERE.parent / "configs" / "quickstart.yaml").read_text())
    raw.update(study="ours", storage=str(root / "ours.journal"), run_dir=str(root / "runs"),
               initial=configs)
    raw["stop"]["n_trials"] = len(configs)
    # as many slots as the baseline's processes, whatever the machine's cores (the quickstart
    # takes every core: 2 here, 16 on a GPU machine)
    raw["devices"] = {**raw["devices"], "count": WORKERS}
    if repeat > 1:
        raw["data"] = {"name": "bigger_digits:RepeatedDigits", "repeat": repeat}
    if cli:  # the same model and data by class_path (LightningCLI)
        raw["model"] = {"class_path": "lightning_hpo.builtin.models.LeNet"}
        raw["data"] = ({"class_path": "bigger_digits.RepeatedDigits",
                        "init_args": {"repeat": repeat}} if repeat > 1
                       else {"class_path": "lightning_hpo.builtin.data.DigitsDataModule"})
        key = {"batch_size": "data.init_args.batch_size"}
        raw["space"] = {key.get(k, f"model.init_args.{k}"): v for k, v in raw["space"].items()}
        raw["initial"] = [{key.get(k, f"model.init_args.{k}"): v for k, v in c.items()}
                          for c in configs]
    return raw


def run_storage(choice: str, root: Path, name: str) -> tuple[str, str]:
    """``(storage, study name)`` of one system's run in folder ``root``: a journal file or SQLite
    database there, or the PostgreSQL URL given with a study name no earlier run used.

    Example::

        >>> run_storage("journal", Path("/tmp/r"), "ours")
        ('/tmp/r/ours.journal', 'ours')
        >>> run_storage("sqlite", Path("/tmp/r"), "ours")
        ('sqlite:////tmp/r/ours.db', 'ours')
    """
    if choice == "journal":
        return str(root / f"{name}.journal"), name
    if choice == "sqlite":
        return f"sqlite:///{root / name}.db", name
    return choice, f"{name}-{root.name}"  # root is a fresh temporary folder


def _open(storage: str) -> Any:
    if "://" in storage:
        return storage
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(storage))


def _drop(storage: str, study: str) -> None:
    """Delete a run's study from a database the user gave (``--storage postgresql://``)."""
    if storage.startswith("postgresql"):
        optuna.delete_study(study_name=study, storage=storage)


def _ours(root: Path, configs: list[dict[str, Any]], repeat: int, env: dict[str, str],
          cli: bool = False, storage_choice: str = "journal") -> Run:
    """The launcher, as the quickstart runs it, on ``configs``."""
    raw = ours_config(root, configs, repeat, cli)
    storage, name = run_storage(storage_choice, root, "ours")
    raw.update(storage=storage, study=name)
    path = root / "ours.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "lightning_hpo.launch", str(path), "--quiet"],
                          cwd=root, env=env, capture_output=True, text=True)
    wall = time.time() - start
    try:
        if done.returncode != 0:
            raise SystemExit(f"lightning_hpo failed ({done.returncode}):\n{done.stderr[-2000:]}")
        trials = optuna.load_study(study_name=name, storage=_open(storage)).get_trials(
            deepcopy=False)
    finally:
        _drop(storage, name)
    spans = {t.number: (t.user_attrs["start_time"], t.user_attrs["end_time"],
                        t.user_attrs.get("epoch_end_times") or []) for t in trials}
    values = [v for t in trials for v in t.intermediate_values.values()]
    return figures_of(start, wall, spans, values)


def _plain(root: Path, configs: list[dict[str, Any]], repeat: int, env: dict[str, str],
           storage_choice: str = "journal", channels_last: bool = False) -> Run:
    """Plain Optuna: two processes of ``peers/plain_optuna.py`` on one journal file (or the
    storage of ``--storage``)."""
    storage, name = run_storage(storage_choice, root, "plain")
    study = optuna.create_study(study_name=name, storage=_open(storage))
    try:
        for params in configs:
            study.enqueue_trial(params)
        return _run_plain(root, configs, repeat, env, storage, name, study, channels_last)
    finally:
        _drop(storage, name)


def _run_plain(root: Path, configs: list[dict[str, Any]], repeat: int, env: dict[str, str],
               storage: str, name: str, study: optuna.Study, channels_last: bool = False) -> Run:
    """The timed part of :func:`_plain`: its two processes on the study, configs enqueued."""
    start = time.time()
    procs = [subprocess.Popen(
        [sys.executable, str(PEERS / "plain_optuna.py"), "--storage", storage,
         "--study", name, "--worker", str(w), "--n-trials", str(len(configs) // WORKERS),
         "--epochs", str(EPOCHS),
         "--repeat", str(repeat), "--run-dir", str(root / "plain-runs"),
         "--times", str(root / f"plain-{w}.json"), *(["--channels-last"] * channels_last)],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for w in range(WORKERS)]
    errors = [p.communicate()[1] for p in procs]
    wall = time.time() - start
    for p, err in zip(procs, errors, strict=True):
        if p.returncode != 0:
            raise SystemExit(f"plain Optuna failed ({p.returncode}):\n{err[-2000:]}")
    spans = {}
    for w in range(WORKERS):
        for t in json.loads((root / f"plain-{w}.json").read_text())["trials"]:
            spans[t["trial"]] = (t["start"], t["end"], t["epochs"])
    values = [v for t in study.get_trials(deepcopy=False) for v in t.intermediate_values.values()]
    return figures_of(start, wall, spans, values)


def _syne_tune(root: Path, configs: list[dict[str, Any]], repeat: int,
               env: dict[str, str]) -> Run:
    """Syne Tune's ASHA on the same configurations (``peers/syne_tune_asha.py``)."""
    (root / "configs.json").write_text(json.dumps(configs))
    start = time.time()
    done = subprocess.run(
        [sys.executable, str(PEERS / "syne_tune_asha.py"), "--configs", str(root / "configs.json"),
         "--epochs", str(EPOCHS), "--repeat", str(repeat), "--workers", str(WORKERS),
         "--run-dir", str(root / "syne-runs"), "--times", str(root / "syne.json")],
        cwd=root, env=env, capture_output=True, text=True)
    wall = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"Syne Tune failed ({done.returncode}):\n{done.stderr[-2000:]}")
    times = json.loads((root / "syne.json").read_text())
    spans = {t["trial"]: (t["start"], t["end"], t["epochs"]) for t in times["trials"]}
    return figures_of(start, wall, spans, times["values"])


def run_order(k: int, names: list[str]) -> list[str]:
    """The systems in run ``k`` (0-based): the first two swap places every other run, so
    neither always runs just after the other; the rest keep their place.

    Example::

        >>> [run_order(k, ["ours", "plain", "syne"]) for k in range(2)]
        [['ours', 'plain', 'syne'], ['plain', 'ours', 'syne']]
    """
    first = names[:2] if k % 2 == 0 else names[1::-1]
    return [*first, *names[2:]]


def paired_ratio(ours: list[float], base: list[float]) -> float:
    """The median over runs of ours / the baseline, run by run.

    Example::

        >>> paired_ratio([10.0, 30.0, 12.0], [20.0, 20.0, 12.0])
        1.0
    """
    return statistics.median(a / b for a, b in zip(ours, base, strict=True))


def figures_of(start: float, wall: float, spans: Spans, values: list[float]) -> Run:
    """A run's figures from its trials' spans and every value they reported."""
    epochs = sum(len(e) for _, _, e in spans.values())
    first = min(e[0] for _, _, e in spans.values() if e)
    work = sum(b - a for a, b, _ in spans.values())
    return Run(wall, first - start, work / epochs, epochs, min(values), spans)


def _range(values: list[float], fmt: str) -> str:
    return f"{min(values):{fmt}}-{max(values):{fmt}}" if len(values) > 1 else f"{values[0]:{fmt}}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each system (default 3)")
    parser.add_argument("--long", action="store_true", help="epochs 10x longer (more data)")
    parser.add_argument("--cli", action="store_true",
                        help="our trials built through LightningCLI (model and data by "
                        "class_path), not the registry's names")
    parser.add_argument("--trials", type=int, default=N_TRIALS,
                        help=f"trials per run, even (default {N_TRIALS}; fewer: a quick check)")
    parser.add_argument("--install-syne-tune", action="store_true",
                        help=f"install Syne Tune into {SYNE_SITE} first (pip, the registry)")
    parser.add_argument("--no-syne-tune", action="store_true",
                        help="leave Syne Tune out even where it is installed")
    parser.add_argument("--all-cores", action="store_true",
                        help=f"do not pin the run to {WORKERS} cores on a bigger machine")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="no untimed 2-trial run of each system first")
    parser.add_argument("--storage", default="journal", metavar="WHERE",
                        help="both systems' storage: journal (default), sqlite, or a "
                        "PostgreSQL URL (each run's studies are deleted after it)")
    parser.add_argument("--plain-channels-last", action="store_true",
                        help="plain Optuna's LeNet in the channels-last layout too, as our "
                        "launcher trains it on a CPU: the comparison without that difference")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    if args.storage not in ("journal", "sqlite") and not args.storage.startswith("postgresql"):
        parser.error(f"--storage: is {args.storage!r}, but must be journal, sqlite or a "
                     "postgresql:// URL")
    if "://" in args.storage:  # a server that does not answer: one line, its password masked
        from lightning_hpo.errors import ConfigError
        from lightning_hpo.storage import StorageSpec

        try:
            StorageSpec(args.storage).check()
        except ConfigError as error:
            parser.error(f"--storage: {error.message}")
    if args.trials < 2 or args.trials % WORKERS:
        parser.error(f"--trials: is {args.trials}, but must be an even number >= 2")
    if args.runs < 1:
        parser.error(f"--runs: is {args.runs}, but must be >= 1")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    repeat = 10 if args.long else 1
    print(machine_line())
    if not args.all_cores:
        print(pin_cores(WORKERS))
    compile_package()
    env = peer_env()
    configs = configurations(args.trials)
    def ours(root: Path, configs: list[dict[str, Any]], repeat: int, env: dict[str, str]) -> Run:
        return _ours(root, configs, repeat, env, cli=args.cli, storage_choice=args.storage)

    def plain(root: Path, configs: list[dict[str, Any]], repeat: int, env: dict[str, str]) -> Run:
        return _plain(root, configs, repeat, env, storage_choice=args.storage,
                      channels_last=args.plain_channels_last)

    systems = [("lightning_hpo", ours), ("plain Optuna", plain)]
    if not args.no_syne_tune:
        if syne_tune_found(env, args.install_syne_tune):
            systems.append(("Syne Tune", _syne_tune))
        else:
            print("Syne Tune: not installed, left out (--install-syne-tune installs it into "
                  f"{SYNE_SITE})")
    results: dict[str, list[Run]] = {name: [] for name, _ in systems}
    if not args.no_warm_up:  # torch and the rest read from disk once, by every system
        for _, warm in systems:
            with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
                warm(Path(tmp), configs[:WORKERS], repeat, env)
        print(f"warm-up: each system ran {WORKERS} trials untimed", flush=True)
    runs = dict(systems)
    for k in range(args.runs):
        for name in run_order(k, list(runs)):
            run = runs[name]
            with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
                r = run(Path(tmp), configs, repeat, env)
            results[name].append(r)
            print(f"run {k + 1} {name:<14} wall {r.wall:6.2f} s  first epoch {r.first_epoch:5.2f}"
                  f" s  {r.per_epoch:.4f} s/epoch  {r.epochs} epochs  best {r.best:.4f}",
                  flush=True)
    variant = ("10x longer epochs" if args.long else "quickstart") + (
        ", ours through LightningCLI" if args.cli else "") + (
        "" if args.storage == "journal" else
        f", on {'SQLite' if args.storage == 'sqlite' else 'PostgreSQL'}") + (
        ", plain Optuna's LeNet channels-last too" if args.plain_channels_last else "")
    print(f"\n{variant}, {args.runs} runs each (ranges)")
    print(f"{'system':<14} {'wall s':>13} {'first epoch s':>13} {'s/epoch':>15} {'epochs':>9}"
          f" {'best':>13}")
    for name, runs in results.items():
        print(f"{name:<14} {_range([r.wall for r in runs], '.2f'):>13} "
              f"{_range([r.first_epoch for r in runs], '.2f'):>13} "
              f"{_range([r.per_epoch for r in runs], '.4f'):>15} "
              f"{_range([r.epochs for r in runs], 'd'):>9} "
              f"{_range([r.best for r in runs], '.4f'):>13}")
    ours, base = results["lightning_hpo"], results["plain Optuna"]
    figures = []
    for what, attr, fmt, target, limit in (
        ("wall-clock", "wall", ".2f", "<= 0.80x", 0.80),
        ("time to first epoch", "first_epoch", ".2f", "<= 1.00x", 1.00),
        ("seconds per epoch", "per_epoch", ".4f", "<= 1.05x", 1.05),
    ):
        a = statistics.median(getattr(r, attr) for r in ours)
        b = statistics.median(getattr(r, attr) for r in base)
        paired = paired_ratio([getattr(r, attr) for r in ours], [getattr(r, attr) for r in base])
        print(f"{what}: {a:{fmt}} s vs plain Optuna {b:{fmt}} s: {a / b:.2f}x (target {target};"
              f" run by run: median {paired:.2f}x)")
        figures.append(Figure(f"{what} vs plain Optuna ({variant})", "bench_peers.py",
                              f"{a:{fmt}} s", f"{b:{fmt}} s plain Optuna", f"{a / b:.2f}x",
                              target, a / b <= limit))
    a, b, ratio, n = epoch_ratio(ours, base)
    print(f"the same epoch (steady epoch time of the {n} configurations both trained past "
          f"epoch 1, over the runs): {a:.4f} s vs plain Optuna {b:.4f} s: median ratio "
          f"{ratio:.2f}x (target <= 1.05x)")
    figures.append(Figure(f"the same epoch vs plain Optuna ({variant})", "bench_peers.py",
                          f"{a:.4f} s", f"{b:.4f} s plain Optuna", f"{ratio:.2f}x",
                          "<= 1.05x", ratio <= 1.05))
    write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
