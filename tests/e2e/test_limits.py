"""Named keys with limits that hold across replicas (issue 27): two `toolshim serve` processes
sharing one Redis (Debian's `redis-server`, which `.ci/run` installs), a key with an `rpm`
limit, and the official SDKs driving both replicas at once from several threads. Exactly
`rpm` requests pass in the minute, whichever replica serves them; the others are each SDK's
own rate-limit error, with `retry-after`; an admin key reads the usage of each replica.
"""

from __future__ import annotations

import threading
from collections import Counter

import anthropic
import httpx
import openai
import pytest

from support import HTTP_TIMEOUT, MODEL

RPM = 30

CONFIG = f"""
[keys.team]
key = "sk-team"
rpm = {RPM}
models = ["{MODEL}", "claude-*"]

[keys.ops]
key_env = "TOOLSHIM_E2E_OPS_KEY"
admin = true
"""


@pytest.fixture
def replicas(gateway_factory, upstream, redis_url, tmp_path):
    upstream.script([{"text": "Hello."}] * 200)
    config = tmp_path / "keys.toml"
    config.write_text(CONFIG)
    env = {"TOOLSHIM_E2E_OPS_KEY": "sk-ops"}
    return [gateway_factory("--config", str(config), "--store", redis_url, env=env) for _ in range(2)]


def test_an_rpm_limit_holds_exactly_across_two_replicas_sharing_redis(replicas, upstream):
    clients = [
        openai.OpenAI(base_url=r.base_url, api_key="sk-team", max_retries=0, timeout=HTTP_TIMEOUT) for r in replicas
    ]
    figures: Counter = Counter()
    waits: list[int] = []
    lock = threading.Lock()

    def hammer(n: int) -> None:
        for i in range(20):
            client = clients[(n + i) % 2]
            try:
                reply = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
                assert reply.choices[0].message.content == "Hello."
                outcome = "passed"
            except openai.RateLimitError as err:
                assert err.response.headers.get("x-should-retry") == "true"
                assert "team" in err.message and "(rpm)" in err.message, err.message
                with lock:
                    waits.append(int(err.response.headers["retry-after"]))
                outcome = "refused"
            with lock:
                figures[outcome] += 1

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    print(f"limits: {dict(figures)} (rpm {RPM}, two replicas, one Redis)")
    assert figures["passed"] == RPM, figures
    assert figures["refused"] == 80 - RPM, figures
    assert all(1 <= w <= 60 for w in waits), waits

    # The Anthropic SDK meets the same limit, in its own error type.
    messages = anthropic.Anthropic(base_url=replicas[1].root, api_key="sk-team", max_retries=0, timeout=HTTP_TIMEOUT)
    with pytest.raises(anthropic.RateLimitError) as refused:
        messages.messages.create(model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert refused.value.response.headers.get("retry-after")

    # A model outside the key's list is each SDK's not-found error.
    with pytest.raises(openai.NotFoundError):
        clients[0].chat.completions.create(model="other", messages=[{"role": "user", "content": "Hi"}])

    # Usage: each replica counts what it served; the window is shared.
    served = 0
    for replica in replicas:
        assert httpx.get(f"{replica.root}/admin/usage", timeout=HTTP_TIMEOUT).status_code == 401
        team_key = httpx.get(f"{replica.root}/admin/usage", headers={"authorization": "Bearer sk-team"})
        assert team_key.status_code == 403
        usage = httpx.get(f"{replica.root}/admin/usage", headers={"authorization": "Bearer sk-ops"}).json()
        assert usage["counters"].startswith("redis://"), usage
        team = next(k for k in usage["keys"] if k["name"] == "team")
        served += team["models"][MODEL]["requests"]
        assert team["now"]["requests_last_minute"] == RPM, team
        metrics = httpx.get(f"{replica.root}/metrics", timeout=HTTP_TIMEOUT).text
        assert 'toolshim_key_limited_total{key="team",limit="rpm"}' in metrics
        assert "sk-team" not in metrics and "sk-team" not in replica.stderr_text()
    assert served == RPM
