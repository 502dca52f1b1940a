"""planarena: which LLM-agent planning strategy wins, on which task, under which faults, at what cost."""

__version__ = "0.2.0"
