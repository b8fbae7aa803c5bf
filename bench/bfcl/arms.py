"""The arms a run compares: the engine's own tool calling, and `toolshim serve` in front of
the same engine in each configuration measured. An arm is a row here: a name, what it is,
and the gateway's flags (None: the engine itself, no gateway).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LISTEN_LINE = re.compile(r"^toolshim: listening on http://127\.0\.0\.1:(\d+)$")
STARTUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Arm:
    name: str
    what: str
    # `toolshim serve` flags after --upstream; None: requests go to the engine itself.
    flags: tuple[str, ...] | None
    # Config file keys (TOML) for the keys that have no flag.
    config: str = ""


ARMS = {
    arm.name: arm
    for arm in (
        Arm("engine", "the engine's own tool calling (llama.cpp `--jinja`), no gateway", None),
        Arm("auto", "toolshim serve, default configuration (`--mode auto`: native tools, the reply repaired)", ()),
        Arm("emulate", "toolshim serve --mode emulate", ("--mode", "emulate")),
        Arm("native", "toolshim serve --mode native (native tools, the reply repaired)", ("--mode", "native")),
        Arm("auto-no-repair", "auto without native repair (`native_repair = false`: the engine's reply relayed)",
            (), "native_repair = false\n"),
        Arm("auto-no-continue", "auto without continuations (`continue_calls = 0`)", (), "continue_calls = 0\n"),
        Arm("auto-no-odds", "auto without the model's odds of a call (`min_call_confidence = 0`)", (),
            "min_call_confidence = 0\n"),
        Arm("auto-no-grounding", "auto without the guess check (`check_grounding = false`)", (),
            "check_grounding = false\n"),
        Arm("emulate-no-retry", "emulate with retries off (`--max-retries 0`)",
            ("--mode", "emulate", "--max-retries", "0")),
        Arm("emulate-no-check", "emulate without the arguments check (`check_arguments = false`)",
            ("--mode", "emulate"), "check_arguments = false\n"),
        Arm("emulate-no-continue", "emulate without continuations (`continue_calls = 0`)", ("--mode", "emulate"),
            "continue_calls = 0\n"),
        Arm("emulate-no-grounding", "emulate without the guess check (`check_grounding = false`)",
            ("--mode", "emulate"), "check_grounding = false\n"),
        # Lever 3: `call_format = "auto"` asks each model in the syntax its chat template
        # teaches; these ask in another one, to see what the family's syntax is worth.
        Arm("emulate-json", "emulate asking for bare JSON calls (`call_format = \"json\"`)",
            ("--mode", "emulate"), "call_format = \"json\"\n"),
        Arm("emulate-xml", "emulate asking for `<function_calls>` XML (`call_format = \"xml\"`)",
            ("--mode", "emulate"), "call_format = \"xml\"\n"),
        Arm("emulate-llama", "emulate asking for Llama 3's JSON (`call_format = \"llama\"`)",
            ("--mode", "emulate"), "call_format = \"llama\"\n"),
        Arm("emulate-mistral", "emulate asking for Mistral's `[TOOL_CALLS]` list (`call_format = \"mistral\"`)",
            ("--mode", "emulate"), "call_format = \"mistral\"\n"),
        Arm("emulate-no-grammar", "emulate without constrained decoding (`upstream.constrain = \"off\"`)",
            ("--mode", "emulate"), "[upstream]\nconstrain = \"off\"\n"),
    )
}


def toolshim_bin() -> Path:
    if os.environ.get("TOOLSHIM_BIN"):
        return Path(os.environ["TOOLSHIM_BIN"])
    for profile in ("release", "debug"):
        path = ROOT / "target" / profile / "toolshim"
        if path.is_file():
            return path
    raise SystemExit("no toolshim binary: run `cargo build --release -p toolshim` or set TOOLSHIM_BIN")


class Gateway:
    """A `toolshim serve` on a free loopback port, stopped by `stop()`."""

    def __init__(self, engine_url: str, flags: tuple[str, ...], config: str = "", log: Path | None = None):
        """`log`: a file that keeps the gateway's whole log, at `info` (the levers' decisions:
        retries and their reasons, guesses, continuations, splits), appended to."""
        args = [str(toolshim_bin()), "serve", "--upstream", engine_url, "--listen", "127.0.0.1:0", *flags]
        self.config_file = None
        if config:
            self.config_file = tempfile.NamedTemporaryFile("w", suffix=".toml", prefix="bfcl-arm-", delete=False)
            self.config_file.write(config)
            self.config_file.close()
            args += ["--config", self.config_file.name]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSHIM_")}
        if not env.get("RUST_LOG"):  # unset or empty
            env["RUST_LOG"] = "info" if log else "warn"
        self.log_file = log.open("a", encoding="utf-8") if log else None
        self.args = args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env)
        self.log: list[str] = []
        first: queue.Queue[str | None] = queue.Queue()
        self.drain = threading.Thread(target=self._drain, args=(first,), daemon=True)
        self.drain.start()
        try:
            line = first.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            line = None
        match = LISTEN_LINE.match((line or "").rstrip())
        if not match:
            self.stop()
            raise SystemExit(f"`{' '.join(args)}` did not start: {''.join(self.log)[-2000:]}")
        self.root = f"http://127.0.0.1:{match.group(1)}"

    def _drain(self, first: "queue.Queue[str | None]") -> None:
        sent = False
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            self.log.append(line)
            if self.log_file is not None:
                self.log_file.write(line)
                self.log_file.flush()
            if len(self.log) > 2000:
                del self.log[:1000]
            if not sent:
                first.put(line)
                sent = True
        if not sent:
            first.put(None)

    def mark(self, text: str) -> None:
        """A line of the runner's own in the kept log (which case follows)."""
        if self.log_file is not None:
            self.log_file.write(f"===== {text}\n")
            self.log_file.flush()

    def stop(self) -> None:
        if self.config_file is not None:
            Path(self.config_file.name).unlink(missing_ok=True)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        # The gateway's last lines (and, for a short run, its start-up ones) may still be in
        # the pipe when it exits: the log is whole only once the drain has read them all.
        self.drain.join(timeout=15)
