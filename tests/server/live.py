"""A real gateway in a subprocess (``dalenius serve`` on a free loopback port), for end-to-end tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

START_TIMEOUT = 60.0


def wait_until_up(
    url: str, process: subprocess.Popen[str], output: list[str] | None = None
) -> None:
    """Wait until the gateway at ``url`` answers, or fail loudly if it exits or never does."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("the gateway exited:\n" + "".join(output or []))
        try:
            if httpx.get(f"{url}/v1/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"the gateway did not start within {START_TIMEOUT} s")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_config(path: Path, ledger: str, **limits: int) -> Path:
    lines = ["[gateway]", f'listen = "127.0.0.1:{free_port()}"', f'ledger = "{ledger}"']
    lines.append("[limits]")
    lines += [f"{key} = {value}" for key, value in limits.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


class LiveGateway:
    """``dalenius serve --config FILE`` running in a subprocess until :meth:`stop`.

    Args:
        config: the configuration file.
        issue: ``role:name`` principals whose start-up tokens are read from the output.
        workers: how many worker processes serve it (``dalenius serve --workers``).
    """

    def __init__(self, config: Path, *, issue: tuple[str, ...] = (), workers: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable,
            "-c",
            "import sys; from dalenius.cli.main import main; sys.exit(main())",
            "serve",
            "--config",
            str(config),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        for item in issue:
            command += ["--issue-token", item]
        if workers > 1:
            command += ["--workers", str(workers)]
        env = os.environ | {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        self.tokens: dict[str, str] = {}
        self.output: list[str] = []
        assert self.process.stdout is not None
        while len(self.tokens) < len(issue):
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("the gateway exited:\n" + "".join(self.output))
            self.output.append(line)
            found = re.search(r"New token for \w+ '([^']+)' \(shown once\): (\S+)", line)
            if found:
                self.tokens[found.group(1)] = found.group(2)
        # Keep reading, so a chatty server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        self._wait_until_up()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def _wait_until_up(self) -> None:
        wait_until_up(self.url, self.process, self.output)

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
