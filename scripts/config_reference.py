"""Print the launcher's field reference (Markdown), generated from the config's definition.

Usage: ``python scripts/config_reference.py > docs/config-fields.md`` (the same as
``python -m lightning_hpo.launch --list-fields``).
"""

from __future__ import annotations

from lightning_hpo.launch.config import field_reference

if __name__ == "__main__":
    print(field_reference(), end="")
