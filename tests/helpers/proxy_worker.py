"""A process that races others on one study, directly or through a gRPC proxy
(tests/integration/test_proxy.py).

    python tests/helpers/proxy_worker.py MODE STORAGE STUDY OUT [N]

MODE:
* ``claim``: claim trials with the launcher's ``claim_trial`` until none is left; OUT gets the
  numbers claimed, one per line.
* ``rank``: record trial numbers ``N*k .. N*k+N-1`` (k from OUT's name, ``rank-K.txt``) at rungs
  1 and 3 with ASHA's rung store; OUT gets ``number n n_better`` per record.
* ``lock``: N times, take the study's ``setup`` lock with the launcher's ``study_lock`` and add 1
  to the number in ``OUT``'s folder's ``counter`` file by read, sleep, write (lost without the
  lock); OUT gets each hold's ``start end`` (monotonic-free: ``time.time()``).
* ``hold``: take the ``setup`` lock, print ``held``, and sleep until killed.

Each process marks itself ready (``ready-MODE-K`` in OUT's folder) once its study is loaded and
waits for the file ``go`` there before it starts, so that all race. In ``claim`` mode each
process then claims one trial and waits for every ready process's first claim before it goes
on, so that each claims at least one however the machine schedules them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import optuna

from lightning_hpo.launch.config import load_config
from lightning_hpo.launch.study.creation import study_lock
from lightning_hpo.launch.study.trials import claim_trial
from lightning_hpo.pruners import open_rung_store
from lightning_hpo.storage import open_storage


def main() -> None:
    mode, spec, name, out = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out_path = Path(out)
    cfg = load_config("quickstart", [f"study={name}", f"storage={spec}", "stop.n_trials=1000"])
    study = optuna.load_study(study_name=name, storage=open_storage(spec, create=False))
    folder = out_path.parent
    (folder / f"ready-{out_path.stem}").touch()
    while not (folder / "go").exists():
        time.sleep(0.01)
    lines: list[str] = []
    if mode == "claim":
        first = claim_trial(study, cfg)
        assert first is not None, "nothing to claim"
        lines.append(str(first.number))
        (folder / f"first-{out_path.stem}").touch()
        deadline = time.monotonic() + 120
        while len(list(folder.glob("first-*"))) < len(list(folder.glob("ready-*"))):
            assert time.monotonic() < deadline, "another process never claimed its first"
            time.sleep(0.01)
        while (trial := claim_trial(study, cfg)) is not None:
            lines.append(str(trial.number))
    elif mode == "rank":
        k = int(out_path.stem.split("-")[1])
        store = open_rung_store(study)
        for number in range(n * k, n * k + n):
            got = store.add_and_rank(0, [1, 3], number, value=number / 1000, maximize=False)
            lines.append(f"{number} {got[0]} {got[1]}")
    elif mode == "lock":
        counter = out_path.parent / "counter"
        for _ in range(n):
            with study_lock(cfg, study._storage, "setup"):
                start = time.time()
                value = int(counter.read_text())
                time.sleep(0.005)
                counter.write_text(str(value + 1))
                lines.append(f"{start} {time.time()}")
    elif mode == "hold":
        with study_lock(cfg, study._storage, "setup"):
            print("held", flush=True)
            time.sleep(600)
    out_path.write_text("".join(f"{line}\n" for line in lines))


if __name__ == "__main__":
    main()
