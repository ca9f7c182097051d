"""Each trial trains on 2 DDP processes, and all of them train the *same* hyperparameters.

Run it (CPU, gloo backend; about a minute on 2 cores)::

    python examples/ddp_objective.py --n-trials 4

Lightning starts rank 1 by re-running this script. ``lightning_hpo.create_study`` makes rank 0
the only process that asks trials and writes to the storage; on rank 1 it returns a follower whose
``optimize`` trains rank 0's trials, with each ``trial.suggest_*`` returning rank 0's value. The
study therefore ends with exactly ``--n-trials`` trials, and ``PruningCallback`` stops both ranks
after the same epoch. ``num_hiddens_1`` changes a layer's width: were the ranks to disagree, DDP
would fail on mismatched parameter shapes.

``--steps N`` trains each trial by optimizer steps instead (``max_steps=N``, a validation
every 5 batches), reported at each validation (``PruningCallback(..., resource="step")``), with
ASHA's rungs counted in steps (5, 10, 20, ... up to N): what a model trained by steps uses.

``--record-dir DIR`` makes every rank append what it trained (trial, params, epochs, steps) to
``DIR/rank<k>.jsonl``; the test suite uses it to check the ranks against the study.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import lightning as L
import optuna

import lightning_hpo as hpo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", default="sqlite:///runs/ddp_objective.db",
                        help="Optuna storage URL every rank can open (default: %(default)s)")
    parser.add_argument("--study", default=None,
                        help="study name (default: ddp-objective, or ddp-objective-steps with "
                             "--steps: a study counts epochs or steps, not both)")
    parser.add_argument("--n-trials", type=int, default=4, help="trials in the study")
    parser.add_argument("--max-epochs", type=int, default=4, help="epochs per trial (max_resource)")
    parser.add_argument("--steps", type=int, default=None,
                        help="train each trial N optimizer steps, pruned by steps (resource)")
    parser.add_argument("--record-dir", type=Path, default=None,
                        help="append what each rank trained to DIR/rank<k>.jsonl")
    args = parser.parse_args()
    if args.study is None:
        args.study = "ddp-objective" if args.steps is None else "ddp-objective-steps"
    if args.storage.startswith("sqlite:///") and not hpo.is_follower():
        Path(args.storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)

    def objective(trial: optuna.Trial) -> float:
        model = hpo.DropoutMLP(
            lr=trial.suggest_float("lr", 1e-3, 1.0, log=True),
            num_hiddens_1=trial.suggest_categorical("num_hiddens_1", [32, 64, 128]),
            momentum=0.9,
        )
        data = hpo.DigitsDataModule(batch_size=trial.suggest_int("batch_size", 32, 128))
        by_steps = args.steps is not None
        pruning = hpo.PruningCallback(trial, monitor="validation_error",
                                      resource="step" if by_steps else "epoch")
        length = (dict(max_epochs=-1, max_steps=args.steps, val_check_interval=5) if by_steps
                  else dict(max_epochs=args.max_epochs))
        trainer = L.Trainer(
            accelerator="cpu", devices=2, strategy="ddp", callbacks=[pruning], logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            **length,
        )
        trainer.fit(model, datamodule=data)
        if args.record_dir is not None:
            args.record_dir.mkdir(parents=True, exist_ok=True)
            row = {"rank": trainer.global_rank, "trial": trial.number,
                   "params": {k: model.hparams[k] for k in ("lr", "num_hiddens_1")}
                   | {"batch_size": data.hparams["batch_size"]},
                   "epochs": trainer.current_epoch, "pruned_at_epoch": pruning.pruned_at_epoch,
                   "steps": trainer.global_step, "pruned_at_step": pruning.pruned_at_step}
            with open(args.record_dir / f"rank{trainer.global_rank}.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        pruning.raise_if_pruned()
        return trainer.callback_metrics["validation_error"].item()

    study = hpo.create_study(
        storage=args.storage, study_name=args.study, load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=hpo.ASHAPruner(min_resource=1, max_resource=args.max_epochs, reduction_factor=2)
        if args.steps is None else hpo.ASHAPruner(min_resource=5, max_resource=args.steps,
                                                  reduction_factor=2),
    )
    study.optimize(objective, n_trials=args.n_trials)
    if not hpo.is_follower():
        best = study.best_trial
        print(f"{len(study.trials)} trials; best validation_error {best.value:.4f} "
              f"(trial {best.number}, {best.params})")
    # Leave the process group before the interpreter exits: under torch 2.14 a gloo group torn
    # down at exit can abort or hang one rank once the other is gone.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
