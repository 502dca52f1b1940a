"""The Hydra config tree (``planarena.configs``): its groups are the registry."""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent
"""Where the tree is, installed or in a checkout."""
