"""Fixtures for the gateway end-to-end tests.

Nothing here builds anything: `cargo build -p toolshim` first, or point `TOOLSHIM_BIN` at a
binary. Every test gets a fresh scripted upstream (`upstream`) and a fresh gateway process in
emulate mode in front of it (`gateway`); `gateway_factory` starts more with other flags.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

from mock_upstream import MockUpstream
from support import HTTP_TIMEOUT, SHUTDOWN_TIMEOUT_S, UPSTREAM_KEY, Capture, recording_http_client

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO_ROOT / "target" / "debug" / "toolshim"
STARTUP_TIMEOUT_S = 15.0
LISTEN_LINE = re.compile(r"^toolshim: listening on http://127\.0\.0\.1:(\d+)$")


def toolshim_bin() -> Path:
    return Path(os.environ.get("TOOLSHIM_BIN") or DEFAULT_BIN)


@dataclass
class Gateway:
    """A running `toolshim serve`."""

    proc: subprocess.Popen
    port: int
    args: list[str]
    stderr_lines: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        """`http://127.0.0.1:PORT`"""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, what an OpenAI client is given."""
        return self.root + "/v1"

    def stderr_text(self) -> str:
        return "".join(self.stderr_lines)

    def stop(self) -> int | None:
        """SIGTERM, then wait; returns the exit code, None if it had to be killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
                return None
        return self.proc.returncode


def _drain(stream, lines: list[str], first: "queue.Queue[str | None]") -> None:
    sent = False
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        lines.append(line)
        if not sent:
            first.put(line)
            sent = True
    if not sent:
        first.put(None)
    stream.close()


STATE_HOME = tempfile.mkdtemp(prefix="toolshim-e2e-state-")


def spawn_gateway(upstream_url: str, *extra: str, env: dict[str, str] | None = None) -> Gateway:
    """Start `toolshim serve` on a free port and wait for its listening line."""
    binary = toolshim_bin()
    if not binary.is_file() or not os.access(binary, os.X_OK):
        pytest.fail(
            f"toolshim binary not found or not executable at {binary}. "
            "Build it with `cargo build -p toolshim` at the repository root, "
            "or set TOOLSHIM_BIN to its path.",
            pytrace=False,
        )
    args = [str(binary), "serve", "--upstream", upstream_url, "--listen", "127.0.0.1:0"]
    if not any(a == "--mode" or a.startswith("--mode=") for a in extra):
        args += ["--mode", "emulate"]
    args += list(extra)
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TOOLSHIM_"))}
    proc_env["TOOLSHIM_UPSTREAM_API_KEY"] = UPSTREAM_KEY
    # The default store (`auto`: a file in the state directory), in a folder of this
    # gateway's own: gateways of different tests share no responses and no refusals.
    proc_env["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="toolshim-e2e-state-", dir=STATE_HOME)
    proc_env.update(env or {})
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=proc_env
    )
    lines: list[str] = []
    first: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stderr, lines, first), daemon=True).start()
    try:
        line = first.get(timeout=STARTUP_TIMEOUT_S)
    except queue.Empty:
        line = ""
        proc.kill()
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        pytest.fail(f"`{' '.join(args)}` wrote nothing to stderr within {STARTUP_TIMEOUT_S} s", pytrace=False)
    if line is None:
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        pytest.fail(
            f"`{' '.join(args)}` exited with {proc.returncode} before listening; stderr:\n" + "".join(lines),
            pytrace=False,
        )
    m = LISTEN_LINE.match(line.rstrip("\r\n"))
    if not m:
        proc.kill()
        proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
        pytest.fail(
            "the first stderr line of `toolshim serve` must be exactly "
            f"'toolshim: listening on http://127.0.0.1:PORT', got {line!r}; stderr:\n" + "".join(lines),
            pytrace=False,
        )
    return Gateway(proc=proc, port=int(m.group(1)), args=args, stderr_lines=lines)


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[MockUpstream]:
    up = MockUpstream().start()
    request.node._e2e_upstreams = getattr(request.node, "_e2e_upstreams", []) + [up]
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture
def gateway_factory(
    request: pytest.FixtureRequest, upstream: MockUpstream
) -> Iterator[Callable[..., Gateway]]:
    """`gateway_factory(*flags, env=None, upstream_url=None)` starts one more gateway."""
    started: list[Gateway] = []

    def start(*extra: str, env: dict[str, str] | None = None, upstream_url: str | None = None) -> Gateway:
        gw = spawn_gateway(upstream_url or upstream.base_url, *extra, env=env)
        started.append(gw)
        request.node._e2e_gateways = getattr(request.node, "_e2e_gateways", []) + [gw]
        return gw

    yield start
    stuck = []
    for gw in started:
        if gw.proc.poll() is None and gw.stop() is None:
            stuck.append(gw)
    if stuck:
        pytest.fail(
            f"toolshim serve did not exit within {SHUTDOWN_TIMEOUT_S} s of SIGTERM; stderr:\n"
            + stuck[0].stderr_text(),
            pytrace=False,
        )


@pytest.fixture
def gateway(gateway_factory: Callable[..., Gateway]) -> Gateway:
    """`toolshim serve --upstream … --listen 127.0.0.1:0 --mode emulate`."""
    return gateway_factory()


@pytest.fixture
def sse_captures() -> list[Capture]:
    """Raw responses the `client` fixture received, in order (bodies filled as they stream)."""
    return []


@pytest.fixture
def client(gateway: Gateway, sse_captures: list[Capture]):
    import openai

    c = openai.OpenAI(
        base_url=gateway.base_url,
        api_key="test",
        max_retries=0,
        timeout=HTTP_TIMEOUT,
        _strict_response_validation=True,
        http_client=recording_http_client(sse_captures),
    )
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def anthropic_client(gateway: Gateway, sse_captures: list[Capture]):
    """A strict `anthropic.Anthropic` (`max_retries=0`) on the gateway root (no `/v1`).

    It records its raw responses into `sse_captures`, like `client` does.
    """
    import anthropic

    c = anthropic.Anthropic(
        base_url=gateway.root,
        api_key="test",
        max_retries=0,
        timeout=HTTP_TIMEOUT,
        _strict_response_validation=True,
        http_client=recording_http_client(sse_captures, sdk="anthropic"),
    )
    try:
        yield c
    finally:
        c.close()


# -- show the gateway's stderr and the upstream's requests when a test fails ------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when not in ("call", "setup") or not report.failed:
        return
    for i, gw in enumerate(getattr(item, "_e2e_gateways", [])):
        report.sections.append(
            (f"toolshim serve #{i} stderr ({' '.join(gw.args[1:])})", gw.stderr_text() or "(empty)")
        )
    for i, up in enumerate(getattr(item, "_e2e_upstreams", [])):
        report.sections.append((f"mock upstream #{i} requests", up.describe()))


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A `redis-server` of its own (Debian's package, which `.ci/run` installs) on a free
    loopback port, with nothing saved to disk; stopped after the test."""
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: `apt-get install redis-server` (.ci/run does)", pytrace=False)
    from support import free_port, wait_for_port

    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for_port(port, proc, "redis-server", timeout=10)
    try:
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
