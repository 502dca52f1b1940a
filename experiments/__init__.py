"""Runner, records, metrics, tables and figures; ``experiments.load`` reads any run for notebooks."""

from experiments.records import load

__all__ = ["load"]
