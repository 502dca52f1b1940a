"""Runner, records, metrics, tables, figures; ``experiments.load`` reads runs for notebooks."""

from planarena.experiments.records.runs import load

__all__ = ["load"]
