"""The container image (issue 26; deploy/Dockerfile, docs/deploy.md), built here without a
registry by deploy/build-image.sh (buildah, from scratch, with the test binary and the libraries
it links) and run: its entrypoint as its non-root user, configured by environment variables
and a mounted TOML file named by TOOLSHIM_CONFIG, serving the `openai` SDK, keeping stored
responses in its state volume, answering its own HEALTHCHECK command, and stopping cleanly on
SIGTERM. `buildah run --isolation chroot --network host` stands in for a container runtime.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess

import openai
import pytest

from conftest import REPO_ROOT, toolshim_bin
from support import HTTP_TIMEOUT, MODEL, free_port, hermes, wait_for_port

BUILDAH = ["buildah", "--storage-driver", "vfs"]
TAG = "localhost/toolshim:e2e"


def buildah(*args: str) -> str:
    done = subprocess.run([*BUILDAH, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture
def image():
    if shutil.which("buildah") is None:
        pytest.fail("buildah is not installed: `apt-get install buildah` (.ci/run does)", pytrace=False)
    build = subprocess.run(
        [str(REPO_ROOT / "deploy" / "build-image.sh"), str(toolshim_bin()), TAG],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    config = json.loads(buildah("inspect", "--type", "image", TAG))["Docker"]["config"]
    try:
        yield config
    finally:
        subprocess.run([*BUILDAH, "rmi", "--force", TAG], capture_output=True, timeout=120)


def test_the_image_serves_as_its_non_root_user_and_answers_its_health_check(image, upstream, tmp_path):
    assert image["User"] == "10001:10001"
    assert image["Entrypoint"] == ["/usr/local/bin/toolshim", "serve"]
    assert "XDG_STATE_HOME=/var/lib/toolshim" in image["Env"]
    health = image["Healthcheck"]["Test"]
    assert health[:3] == ["CMD", "/usr/local/bin/toolshim", "health"], health

    port = free_port()
    # A config folder as a ConfigMap mounts one: readable by the image's user.
    conf = tmp_path / "conf"
    conf.mkdir(mode=0o755)
    conf.chmod(0o755)
    config = conf / "toolshim.toml"
    config.write_text('max_retries = 2\n[store]\nttl_secs = 3600\n')
    config.chmod(0o644)
    ctr = buildah("from", TAG)
    try:
        for env in [
            f"TOOLSHIM_UPSTREAM_URL={upstream.base_url}",
            f"TOOLSHIM_LISTEN=127.0.0.1:{port}",
            "TOOLSHIM_MODE=emulate",
            "TOOLSHIM_API_KEYS=sk-image",
            "TOOLSHIM_CONFIG=/etc/toolshim/toolshim.toml",
        ]:
            buildah("config", "--env", env, ctr)
        # The image declares its state folder a volume. A container runtime mounts the state
        # volume there; `buildah run` also mounts an anonymous volume for it, over the given
        # one or under it in no fixed order (the test failed now and then, the database in
        # the anonymous volume). So the working container drops the declaration, and the
        # state volume alone is mounted at that path.
        assert "/var/lib/toolshim" in image["Volumes"], image["Volumes"]
        buildah("config", "--volume", "/var/lib/toolshim-", ctr)
        run = [*BUILDAH, "run", "--isolation", "chroot", "--network", "host"]
        # The state volume: a folder the image's user owns, as a volume is made for it.
        state = tmp_path / "state"
        state.mkdir()
        os.chown(state, 10001, 10001)
        mount = ["--volume", f"{state}:/var/lib/toolshim", "--volume", f"{conf}:/etc/toolshim:ro"]
        proc = subprocess.Popen(
            [*run, *mount, ctr, "--", *image["Entrypoint"]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            wait_for_port(port, proc, "the image's gateway")

            upstream.script([hermes("get_weather", {"city": "Paris"}), "Stored answer."])
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-image", max_retries=0, timeout=HTTP_TIMEOUT
            )
            tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
            chat = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools
            )
            assert chat.choices[0].message.tool_calls[0].function.name == "get_weather"
            response = client.responses.create(model=MODEL, input="Keep this.")
            assert client.responses.retrieve(response.id).output_text == "Stored answer."
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong", max_retries=0).models.list()

            # Its HEALTHCHECK command, inside the image, on the port this test listens on.
            check = [part.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for part in health[1:]]
            done = subprocess.run([*run, ctr, "--", *check], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
            assert '"status"' in done.stdout, done.stdout

            # The state volume holds the store, written by the image's user, not root.
            database = state / "toolshim" / "responses.db"
            assert database.is_file(), list(state.rglob("*"))
            assert database.stat().st_uid == 10001
            # SIGTERM to the gateway itself (buildah run does not pass signals on, as a
            # container runtime does): it drains and exits 0.
            found = subprocess.run(["pgrep", "-f", "^/usr/local/bin/toolshim serve"], capture_output=True, text=True)
            pids = [int(p) for p in found.stdout.split()]
            assert len(pids) == 1, found
            os.kill(pids[0], signal.SIGTERM)
            code = proc.wait(timeout=60)
            assert code == 0, f"exit {code}: {proc.stderr.read().decode() if proc.stderr else ''}"
        finally:
            if proc.poll() is None:
                subprocess.run(["pkill", "-KILL", "-f", "^/usr/local/bin/toolshim serve"], capture_output=True)
                proc.kill()
                proc.wait(timeout=60)
    finally:
        subprocess.run([*BUILDAH, "rm", ctr], capture_output=True, timeout=120)


def test_the_kubernetes_manifests_agree_with_the_image_and_the_gateway(gateway_factory, tmp_path):
    """deploy/k8s: the probes are routes the gateway serves, the pod runs as the image's user,
    the grace period outlasts the drain, and the ConfigMap's TOML is a config the gateway
    takes (checked by starting one with it, its upstream and store pointed here)."""
    import yaml

    docs = [d for path in sorted((REPO_ROOT / "deploy" / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(path.read_text()) if d]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {("Deployment", "toolshim"), ("Service", "toolshim"), ("ConfigMap", "toolshim"), ("Secret", "toolshim")} <= kinds
    deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "toolshim")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsUser"] == 10001
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile").read_text()
    assert "USER 10001:10001" in dockerfile and "--uid 10001" in dockerfile
    toml_text = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["toolshim.toml"]
    drain = float(next(line.split("=")[1] for line in toml_text.splitlines() if line.startswith("drain_timeout_secs")))
    assert pod["terminationGracePeriodSeconds"] > drain

    # The ConfigMap's file, as a gateway reads it (its URLs pointed at this machine).
    config = tmp_path / "toolshim.toml"
    config.write_text(toml_text.replace("http://vllm:8000", "http://127.0.0.1:9").replace('url = "redis://toolshim-redis:6379"', 'url = "memory"'))
    gateway = gateway_factory("--config", str(config))
    for probe in ("livenessProbe", "readinessProbe"):
        path = container[probe]["httpGet"]["path"]
        with socket.create_connection(("127.0.0.1", int(gateway.base_url.split(":")[2].split("/")[0])), timeout=5) as conn:
            conn.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            head = conn.recv(64).decode()
        assert head.split()[1] in ("200", "503"), (probe, path, head)
