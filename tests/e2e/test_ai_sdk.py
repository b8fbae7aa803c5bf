"""The Vercel AI SDK (`ai` and `@ai-sdk/openai` from npm) with its default OpenAI model, which
speaks the Responses API, in a tool loop through the gateway (issue 16): `generateText` and
`streamText` with a tool and a step limit, against the scripted chat-only upstream.

The packages come from `AI_SDK_DIR`, else `target/ai-sdk` (`.ci/run` installs them there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from support import MODEL, all_text, hermes

AI_SDK_DIR = Path(os.environ.get("AI_SDK_DIR", REPO_ROOT / "target" / "ai-sdk"))
# AI SDK 6 (`ai@6`, `@ai-sdk/openai@3`, what most apps still pin): its second step sends the
# first step's output as `item_reference` items, resolved from the gateway's response store.
AI_SDK6_DIR = Path(os.environ.get("AI_SDK6_DIR", REPO_ROOT / "target" / "ai-sdk6"))
SDKS = {"ai7": AI_SDK_DIR, "ai6": AI_SDK6_DIR}
SCRIPT = Path(__file__).with_name("ai_sdk_tool_loop.mjs")
FINAL = "Paris is 18°C and cloudy."


@pytest.mark.parametrize("sdk", list(SDKS))
@pytest.mark.parametrize("mode", ["generate", "stream"])
def test_ai_sdk_tool_loop_through_the_responses_api(gateway, upstream, mode, sdk):
    sdk_dir = SDKS[sdk]
    if not (sdk_dir / "node_modules" / "ai").is_dir():
        pytest.fail(f"the AI SDK is not installed in {sdk_dir}: see .ci/run for the pinned `npm install --prefix {sdk_dir} ai @ai-sdk/openai zod`", pytrace=False)
    # Node resolves the packages from the script's folder.
    script = sdk_dir / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    # Text before the call: AI SDK 6 sends that message back as an item reference.
    upstream.script(["Let me check. " + hermes("get_weather", {"city": "Paris"}), {"text": FINAL, "chunk": 4}])
    env = {"PATH": os.environ.get("PATH", ""), "GATEWAY_URL": gateway.base_url, "MODEL": MODEL}
    done = subprocess.run(["node", str(script), mode], cwd=sdk_dir, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"node exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\ngateway: {gateway.stderr_text()}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # `streamText`'s text stream holds every step's text; `generateText`'s text is the last step's.
    text = FINAL if mode == "generate" else "Let me check." + FINAL
    assert result == {"text": text, "calls": ["Paris"], "steps": 2}, result
    assert len(upstream.requests) == 2
    assert "AISDK-9" in all_text(upstream.requests[1])
    assert "Let me check." in all_text(upstream.requests[1]), "the first step's message, referred to or sent"
    assert any("/v1/responses" in line for line in gateway.stderr_lines), "the default model speaks the Responses API"
    if sdk == "ai6":
        assert any("resolved from the store" in line and "references=" in line and "references=0" not in line for line in gateway.stderr_lines), (
            "AI SDK 6 refers to the first step's items: " + gateway.stderr_text()
        )
