"""One Chat Completions request to an OpenAI-compatible endpoint, measured.

Plain HTTP (urllib), so what is measured is the endpoint and nothing an SDK adds (an SDK
retries some errors by itself; here an error is counted as one).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from score import Call


@dataclass
class Reply:
    """What one request got back."""

    calls: list[Call] = field(default_factory=list)
    content: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    # An HTTP error or a reply that is not a Chat Completion: a protocol error.
    error: str = ""
    # The assistant message as the next request's history holds it.
    message: dict[str, Any] = field(default_factory=dict)


def chat(base_url: str, model: str, messages: list[dict], tools: list[dict], *, max_tokens: int,
         timeout: float, extra: dict[str, Any] | None = None) -> Reply:
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
    if tools:
        body["tools"] = tools
    body.update(extra or {})
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer unused"},
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            payload = json.load(resp)
    except urllib.error.HTTPError as err:
        detail = err.read(2000).decode("utf-8", "replace")
        return Reply(error=f"HTTP {err.code}: {detail}", seconds=time.monotonic() - started)
    except (OSError, ValueError) as err:
        return Reply(error=f"{type(err).__name__}: {err}", seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    try:
        choice = payload["choices"][0]
        message = choice["message"]
        calls = [
            Call(name=c["function"]["name"], arguments=c["function"].get("arguments") or "")
            for c in message.get("tool_calls") or []
        ]
        usage = payload.get("usage") or {}
        history: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            history["tool_calls"] = message["tool_calls"]
        return Reply(
            calls=calls,
            content=message.get("content") or "",
            finish_reason=choice.get("finish_reason") or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            message=history,
        )
    except (KeyError, IndexError, TypeError, ValueError) as err:
        return Reply(error=f"not a chat completion ({err}): {json.dumps(payload)[:500]}", seconds=seconds)


def counters(root_url: str) -> dict[str, int]:
    """The gateway's counters that a request moves, read from `/metrics`: `retries`
    (`toolshim_retries_total`, every reason: a plain answer asked for instead of guessed
    calls is one) and `continuations` (`toolshim_continuations_total`, every result); all 0
    for an endpoint without them (the engine itself)."""
    try:
        with urllib.request.urlopen(root_url.rstrip("/") + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except (OSError, ValueError):
        return {"retries": 0, "continuations": 0}
    totals = {"retries": 0.0, "continuations": 0.0}
    for line in text.splitlines():
        for name, metric in (("retries", "toolshim_retries_total"), ("continuations", "toolshim_continuations_total")):
            if line.startswith(metric):
                try:
                    totals[name] += float(line.rsplit(" ", 1)[1])
                except (IndexError, ValueError):
                    pass
    return {name: int(value) for name, value in totals.items()}
