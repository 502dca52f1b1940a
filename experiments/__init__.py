"""Runner, records, metrics, tables, figures; ``experiments.load`` reads runs for notebooks."""

from experiments.records import load

__all__ = ["load"]
