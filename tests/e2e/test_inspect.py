"""The request inspector (issue 27) in a real browser: headless Chromium (Debian's `chromium`,
which `.ci/run` installs), driven by Playwright, opens `/inspect` with the admin key given as
the HTTP Basic password, follows the link to a request that needed a retry, and sees its two
attempts side by side; the model's `<script>` shows as text and never runs. A screenshot is
written (to `TOOLSHIM_INSPECT_SCREENSHOT` when set: docs/inspector.png was made that way).
Then the inspector's memory under load: many large requests at once, against a small bound.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.request
from pathlib import Path

import openai
import pytest

from support import HTTP_TIMEOUT, MODEL, PLAIN_WEATHER_TOOL, hermes

MAX_BYTES = 1 << 19

CONFIG = f"""
[keys.app]
key = "sk-app"

[keys.ops]
key = "sk-ops"
admin = true

[inspect]
enabled = true
requests = 100
max_bytes = {MAX_BYTES}
"""

SCRIPT = "<script>document.title = 'pwned'; document.body.innerHTML = 'pwned'</script>"

WEATHER = PLAIN_WEATHER_TOOL


def chromium() -> str:
    found = os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (Debian's `chromium`; .ci/run installs it)", pytrace=False)
        pytest.skip("chromium is not installed")
    return found


@pytest.fixture
def inspected(gateway_factory, tmp_path):
    config = tmp_path / "inspect.toml"
    config.write_text(CONFIG)
    return gateway_factory("--config", str(config))


def admin_json(gateway, path: str) -> dict:
    request = urllib.request.Request(
        gateway.root + path, headers={"Authorization": "Bearer sk-ops", "Accept": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
        return json.load(response)


def test_a_retried_request_in_headless_chromium(inspected, upstream, tmp_path):
    from playwright.sync_api import sync_playwright

    upstream.script([f"{SCRIPT} I cannot look up the weather.", hermes("get_weather", {"city": "Paris"})])
    client = openai.OpenAI(base_url=inspected.base_url, api_key="sk-app", max_retries=0, timeout=HTTP_TIMEOUT)
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice="required",
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
    request_id = admin_json(inspected, "/inspect")["data"][0]["id"]

    screenshot = Path(os.environ.get("TOOLSHIM_INSPECT_SCREENSHOT") or tmp_path / "inspector.png")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            context = browser.new_context(
                http_credentials={"username": "ops", "password": "sk-ops"}, viewport={"width": 1440, "height": 1000}
            )
            page = context.new_page()
            assert page.goto(inspected.root + "/inspect").status == 200
            page.click(f"a[href='/inspect/{request_id}']")
            page.wait_for_url(f"**/inspect/{request_id}")
            first, second = page.locator("#attempt-1"), page.locator("#attempt-2")
            assert "retry" in first.inner_text() and "missing_call" in first.inner_text()
            assert "answer" in second.inner_text() and "correction sent" in second.inner_text()
            # Side by side, both on the screen.
            a, b = first.bounding_box(), second.bounding_box()
            assert a and b and b["x"] >= a["x"] + a["width"] and abs(a["y"] - b["y"]) < 2, (a, b)
            assert b["x"] + b["width"] <= 1440, b
            # The model's markup is text on the page, and nothing of it ran.
            assert SCRIPT in first.locator("pre.raw").inner_text()
            assert page.title() != "pwned" and page.evaluate("document.scripts.length") == 0
            assert page.locator("mark.call").count() >= 1
            page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000


def test_the_inspector_stays_within_its_bound_under_load(inspected, upstream):
    long = "All clear. " * 1200  # 13 KB a reply
    upstream.script([long] * 160)
    client = openai.OpenAI(base_url=inspected.base_url, api_key="sk-app", max_retries=0, timeout=HTTP_TIMEOUT)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                text = client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": f"Status {n}.{i}? " + "x" * 4000}]
                )
                assert text.choices[0].message.content == long
        except BaseException as err:  # noqa: BLE001 (reported below)
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors[:3]
    totals = admin_json(inspected, "/inspect")["inspector"]
    rss = int(
        next(line for line in Path(f"/proc/{inspected.proc.pid}/status").read_text().splitlines() if line.startswith("VmRSS"))
        .split()[1]
    )
    print(f"inspector under load: 160 requests (8 at once) of 4 KB asked, 13 KB answered: {totals}, gateway RSS {rss} kB")
    assert totals["bytes"] <= MAX_BYTES, totals
    assert 0 < totals["kept"] < 160, totals
    assert rss < 200 * 1024, rss
