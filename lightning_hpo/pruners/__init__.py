"""Successive halving: ASHA and Hyperband as Optuna pruners, their rung arithmetic and records.

The folder, from the bottom up:

* :mod:`~lightning_hpo.pruners.rungs`: rung arithmetic (ladders, synchronous rounds, Hyperband
  brackets), pure functions, no Optuna;
* ``_records``, ``_store``, ``_table``, ``_vectors``: where a rung's values live, in the study's
  own storage (study attributes, an SQL table, the gRPC proxy; value vectors for several
  objectives), read through :func:`open_rung_store`, :func:`rung_records` and
  :func:`open_vector_store`;
* ``_asha``: the decision (:func:`asha_continues`) and the two pruners, :class:`ASHAPruner`
  (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020) and
  :class:`HyperbandPruner` (Li et al., JMLR 2018).

The pausing schedules built on the same rungs (synchronous SH, promotion ASHA) are in
:mod:`lightning_hpo.schedules`.

Example::

    >>> from lightning_hpo.pruners import ASHAPruner, rung_levels
    >>> rung_levels(1, max_resource=27, reduction_factor=3)
    [1, 3, 9, 27]
    >>> pruner = ASHAPruner(min_resource=1, max_resource=27, reduction_factor=3)

Names are imported on first use: ``lightning_hpo.pruners.rungs`` alone does not import Optuna.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lightning_hpo._lazy import lazy_exports

_EXPORTS = {
    "ASHAPruner": "lightning_hpo.pruners._asha",
    "HyperbandPruner": "lightning_hpo.pruners._asha",
    "asha_continues": "lightning_hpo.pruners._asha",
    "RungRecord": "lightning_hpo.pruners._records",
    "RungStore": "lightning_hpo.pruners._records",
    "open_rung_store": "lightning_hpo.pruners._store",
    "rung_records": "lightning_hpo.pruners._store",
    "rung_store_of": "lightning_hpo.pruners._store",
    "VectorRecord": "lightning_hpo.pruners._vectors",
    "VectorRungStore": "lightning_hpo.pruners._vectors",
    "open_vector_store": "lightning_hpo.pruners._vectors",
    "rung_levels": "lightning_hpo.pruners.rungs",
    "successive_halving_plan": "lightning_hpo.pruners.rungs",
}

__all__ = [
    "ASHAPruner",
    "HyperbandPruner",
    "RungRecord",
    "RungStore",
    "VectorRecord",
    "VectorRungStore",
    "asha_continues",
    "open_rung_store",
    "open_vector_store",
    "rung_levels",
    "rung_records",
    "rung_store_of",
    "successive_halving_plan",
]

if TYPE_CHECKING:
    from lightning_hpo.pruners._asha import ASHAPruner, HyperbandPruner, asha_continues
    from lightning_hpo.pruners._records import RungRecord, RungStore
    from lightning_hpo.pruners._store import open_rung_store, rung_records, rung_store_of
    from lightning_hpo.pruners._vectors import VectorRecord, VectorRungStore, open_vector_store
    from lightning_hpo.pruners.rungs import rung_levels, successive_halving_plan

__getattr__, __dir__ = lazy_exports(sys.modules[__name__], _EXPORTS, __all__)
