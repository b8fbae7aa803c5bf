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
SCRIPT = Path(__file__).with_name("ai_sdk_tool_loop.mjs")
FINAL = "Paris is 18°C and cloudy."


@pytest.mark.parametrize("mode", ["generate", "stream"])
def test_ai_sdk_tool_loop_through_the_responses_api(gateway, upstream, mode):
    if not (AI_SDK_DIR / "node_modules" / "ai").is_dir():
        pytest.fail(f"the AI SDK is not installed in {AI_SDK_DIR}: run `npm install --prefix {AI_SDK_DIR} ai @ai-sdk/openai zod`", pytrace=False)
    # Node resolves the packages from the script's folder.
    script = AI_SDK_DIR / SCRIPT.name
    shutil.copyfile(SCRIPT, script)
    upstream.script([hermes("get_weather", {"city": "Paris"}), {"text": FINAL, "chunk": 4}])
    env = {"PATH": os.environ.get("PATH", ""), "GATEWAY_URL": gateway.base_url, "MODEL": MODEL}
    done = subprocess.run(["node", str(script), mode], cwd=AI_SDK_DIR, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"node exited {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}\ngateway: {gateway.stderr_text()}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"text": FINAL, "calls": ["Paris"], "steps": 2}, result
    assert len(upstream.requests) == 2
    assert "AISDK-9" in all_text(upstream.requests[1])
    assert any("/v1/responses" in line for line in gateway.stderr_lines), "the default model speaks the Responses API"
