"""The LLM layer planners use: the metered handle (``base``), the request protocol
(``protocol``: the kinds a request declares) and the backends (``sim``, ``openai_backend``)."""

from planarena.planners.llm.protocol import RESERVED, ProtocolError, RequestKind

__all__ = ["RESERVED", "ProtocolError", "RequestKind"]
