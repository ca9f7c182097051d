"""Whole processes across packages: the launcher end to end, DDP runs, kills, SLURM, the
installed wheel, the examples and the benchmarks' smoke runs."""
