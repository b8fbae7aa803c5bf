"""Replicas (issue 26): three `toolshim serve` processes behind a real HAProxy (Debian's
package) on loopback, sharing one Redis. A conversation chained by `previous_response_id`
works whichever replica serves each turn; killing a replica mid-run fails only the requests
it had in flight (HAProxy answers 502 for them, and the client's retry lands on another
replica) and loses no stored response. Bounded: a fixed number of requests, loopback only.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter

import openai
import pytest

from support import HTTP_TIMEOUT, MODEL, all_text, free_port, wait_for_port


@pytest.fixture
def haproxy_factory(tmp_path):
    """`haproxy_factory(backends)`: HAProxy on a free port, round robin over `backends`
    (base URLs), health-checking `/healthz` every 200 ms; its base URL."""
    binary = shutil.which("haproxy")
    if binary is None:
        pytest.fail("haproxy is not installed: `apt-get install haproxy` (.ci/run does)", pytrace=False)
    procs: list[subprocess.Popen] = []

    def start(backends: list[str]) -> str:
        port = free_port()
        servers = "\n".join(
            f"    server r{i} {url.split('://')[1].split('/')[0]} check inter 200ms fall 2 rise 1"
            for i, url in enumerate(backends)
        )
        config = tmp_path / "haproxy.cfg"
        config.write_text(
            f"""global
    maxconn 256
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    retries 2
    option redispatch
    retry-on conn-failure
frontend fe
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /healthz
{servers}
"""
        )
        proc = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(proc)
        wait_for_port(port, proc, "haproxy", timeout=10)
        time.sleep(0.5)  # the first health checks
        return f"http://127.0.0.1:{port}/v1"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def served(gateway) -> int:
    return sum("route=/v1/responses}" in line and " responses " in line for line in gateway.stderr_lines)


def test_a_conversation_crosses_replicas_and_a_killed_replica_loses_nothing(
    gateway_factory, upstream, redis_url, haproxy_factory
):
    upstream.script([{"text": "Noted.", "delay_s": 0.05}] * 400)
    replicas = [gateway_factory("--store", redis_url) for _ in range(3)]
    base_url = haproxy_factory([r.base_url.removesuffix("/v1") for r in replicas])
    client = openai.OpenAI(base_url=base_url, api_key="sk-replicas", max_retries=0, timeout=HTTP_TIMEOUT)

    # One conversation, turn by turn, round robin over the replicas.
    previous = None
    for turn in range(9):
        response = client.responses.create(model=MODEL, input=f"Question {turn}?", previous_response_id=previous)
        previous = response.id
    assert all(served(r) >= 2 for r in replicas), [served(r) for r in replicas]
    seen = all_text(upstream.requests[-1])
    at = [seen.find(f"Question {turn}?") for turn in range(9)]
    assert all(a >= 0 for a in at) and at == sorted(at), seen
    assert client.responses.retrieve(previous).id == previous

    # Four chains at once; one replica is killed a third of the way through.
    figures = Counter()
    returned: list[str] = []
    lock = threading.Lock()
    turns, chains = 12, 4
    kill_at = turns * chains // 3

    def chain(n: int) -> None:
        previous = None
        for turn in range(turns):
            while True:
                try:
                    response = client.responses.create(
                        model=MODEL, input=f"Chain {n} question {turn}?", previous_response_id=previous
                    )
                    break
                except (openai.APIStatusError, openai.APIConnectionError) as err:
                    status = getattr(err, "status_code", None)
                    assert status in (None, 502, 503), err
                    with lock:
                        figures["failed, then retried"] += 1
                    time.sleep(0.1)
            previous = response.id
            with lock:
                returned.append(response.id)
                figures["requests"] += 1
                if figures["requests"] == kill_at:
                    replicas[1].proc.kill()
                    figures["replicas killed"] += 1

    threads = [threading.Thread(target=chain, args=(n,)) for n in range(chains)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert figures["requests"] == turns * chains, figures
    assert figures["replicas killed"] == 1
    lost = []
    for response_id in returned:
        try:
            client.responses.retrieve(response_id)
        except openai.NotFoundError:
            lost.append(response_id)
    figures["responses lost"] = len(lost)
    print(f"replicas: {dict(figures)}")
    assert not lost, figures
    # The survivors served the chains' later turns, the killed one only the earlier ones.
    assert served(replicas[0]) > 0 and served(replicas[2]) > 0
    client.close()
