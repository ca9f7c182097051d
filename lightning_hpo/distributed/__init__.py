"""One trial on every DDP rank: ``create_study`` / ``load_study`` for ``strategy="ddp"``.

Why this exists. With ``Trainer(strategy="ddp")`` Lightning starts ranks 1..N-1 by re-running the
user's script. Each re-run reaches ``study.optimize`` and, with a plain Optuna study, asks for a
trial of its own: the ranks then train *different* hyperparameters in one training run, and the
study gets N times too many trials. ``ddp_spawn`` avoids the re-run but pays a process spawn per
trial.

The fix is one rule: **rank 0 leads, the other ranks follow.** Create (or load) the study with
:func:`create_study` / :func:`load_study`, which take exactly Optuna's arguments:

* on global rank 0 they return a :class:`DistributedStudy`, a real :class:`optuna.Study` whose
  :meth:`~DistributedStudy.optimize` hands every suggested value to the other ranks;
* on every other rank they return a follower that never touches the storage: its ``optimize``
  runs the same objective once per trial of rank 0, and each ``trial.suggest_*`` returns the value
  rank 0 suggested.

The trial and follower objects live in ``_follower`` (the launcher's DDP slots use them too).
How values travel (``_channel`` has the details): the
trial whose ``fit`` launches the other ranks reaches them through their environment; later
trials, each suggested value, the end of each ``optimize`` call and an error that ends one travel
through a small mailbox rank 0 hosts. So a script may call ``optimize`` any number of times, on
one study or several, and suggest every hyperparameter before ``trainer.fit``, as any objective
that builds its model from them does. When rank 0's ``optimize`` raises, the other ranks raise
the same exception.

Example (``examples/ddp_objective.py`` is the runnable version)::

    import lightning as L
    import lightning_hpo as hpo

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
