"""One trial on every DDP rank: ``create_study`` / ``load_study`` for ``strategy="ddp"``.

With ``Trainer(strategy="ddp")`` Lightning starts ranks 1..N-1 by re-running the user's script;
with a plain Optuna study each rank would ask for a trial of its own, training *different*
hyperparameters in one run and giving the study N times too many trials. The rule here: **rank 0
leads, the other ranks follow.** :func:`create_study` / :func:`load_study` take exactly Optuna's
arguments; on global rank 0 they return a :class:`DistributedStudy`, a real
:class:`optuna.Study` whose :meth:`~DistributedStudy.optimize` hands every suggested value to the
other ranks; on every other rank a follower that never touches the storage, runs the same
objective once per trial of rank 0, and whose ``trial.suggest_*`` return rank 0's values
(``_follower``; ``_channel`` carries them). A script may call ``optimize`` any number of times;
when rank 0's ``optimize`` raises, the other ranks raise the same exception.

Example (``examples/ddp_objective.py`` is the runnable version)::

    def objective(trial):
        model = hpo.LeNet(lr=trial.suggest_float("lr", 1e-2, 1.0, log=True))
        pruning = hpo.PruningCallback(trial, monitor="validation_error")
        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=9,
                            callbacks=[pruning])
        trainer.fit(model, datamodule=hpo.DigitsDataModule(batch_size=64))
        pruning.raise_if_pruned()
        return trainer.callback_metrics["validation_error"].item()

    study = hpo.create_study(storage="sqlite:///ddp.db", study_name="ddp",
                             load_if_exists=True, pruner=hpo.ASHAPruner(max_resource=9))
    study.optimize(objective, n_trials=4)   # exactly 4 trials, whatever the number of ranks
"""

from lightning_hpo.distributed._channel import LeaderChannel, LeaderError
from lightning_hpo.distributed._follower import FollowerStudy, LeaderTrial, share_segment
from lightning_hpo.distributed._study import (
    DistributedStudy,
    create_study,
    is_follower,
    load_study,
)

__all__ = [
    "DistributedStudy",
    "FollowerStudy",
    "LeaderChannel",
    "LeaderError",
    "LeaderTrial",
    "create_study",
    "is_follower",
    "load_study",
    "share_segment",
]
