"""lightning_hpo: asynchronous multi-fidelity HPO for PyTorch Lightning on Optuna."""
__version__ = "0.1.0"
