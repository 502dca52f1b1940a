"""Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) via the openai SDK.

The API key is read from the environment variable named in config (never the key itself in
config), so it cannot reach a record, a trace or Hydra's saved config. Responses are cached on
disk keyed by (model, messages, temperature), so a rerun costs nothing. Concurrency is bounded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planners.llm.base import Completion, Message, Request
from planners.llm.profiles import ModelProfile


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 4,
        temperature: float = 0.0,
        max_tokens: int = 1500,
        cache_dir: str | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.cache = Path(cache_dir) if cache_dir else None
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._client: Any = None

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import AsyncOpenAI

            key = os.environ.get(self.api_key_env)
            if not key and self.base_url is None:
                raise RuntimeError(
                    f"set the {self.api_key_env} environment variable "
                    "(or llm.base_url for a local server)"
                )
            self._client = AsyncOpenAI(
                api_key=key or "not-needed", base_url=self.base_url, timeout=self.timeout_s
            )
        return self._client

    def _cache_path(self, messages: Sequence[Message]) -> Path | None:
        if self.cache is None:
            return None
        material = json.dumps(
            {
                "model": self.model,
                "base_url": self.base_url,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
                "messages": [dict(m) for m in messages],
            },
            sort_keys=True,
        )
        digest = hashlib.sha256(material.encode()).hexdigest()
        return self.cache / digest[:2] / f"{digest}.json"

    async def generate(
        self, messages: Sequence[Message], *, role: str, model: ModelProfile, request: Request
    ) -> Completion:
        path = self._cache_path(messages)
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            return Completion(
                data["text"], data["prompt_tokens"], data["completion_tokens"], data["wall_s"]
            )
        async with self._semaphore:
            start = time.perf_counter()
            response = await self._get_client().chat.completions.create(
                model=self.model,
                messages=[dict(m) for m in messages],
                temperature=self.temperature,
                max_tokens=self.max_tokens,
            )
            wall = time.perf_counter() - start
        text = response.choices[0].message.content or ""
        usage = response.usage
        out = Completion(
            text,
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
            wall,
        )
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(
                json.dumps(
                    {
                        "text": out.text,
                        "prompt_tokens": out.prompt_tokens,
                        "completion_tokens": out.completion_tokens,
                        "wall_s": wall,
                    }
                )
            )
            os.replace(tmp, path)
        return out
