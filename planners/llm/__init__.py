"""The LLM layer planners use: the metered handle (``base``), the request protocol
(``protocol``: the kind a request declares and the context it carries) and the backends
(``sim``, ``openai_backend``)."""

from planarena.planners.llm.protocol import (
    NEEDS,
    RESERVED,
    Observed,
    ProtocolError,
    RequestContext,
    RequestKind,
)

__all__ = ["NEEDS", "RESERVED", "Observed", "ProtocolError", "RequestContext", "RequestKind"]
