"""An embedded broker for test suites: ours and our users'.

    from kafka_compat.testing import kafka_broker      # a pytest fixture
    def test_it(kafka_broker):
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})

or, without pytest, `with EmbeddedBroker() as b: ...`. The broker runs in a
child process on a free loopback port with a temporary data directory, so it
behaves exactly as the real command does and a crashing test cannot leave it
half-stopped.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedBroker:
    def __init__(self, overrides: dict | None = None, data_dir: str | None = None, port: int | None = None):
        self.overrides = dict(overrides or {})
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kafka-compat-")
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.data_dir, "broker.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "EmbeddedBroker":
        args = [sys.executable, "-m", "kafka_compat", "serve",
                "--listeners", f"PLAINTEXT://127.0.0.1:{self.port}",
                "--log-dirs", os.path.join(self.data_dir, "logs")]
        for k, v in self.overrides.items():
            args += ["-o", f"{k}={v}"]
        os.makedirs(self.data_dir, exist_ok=True)        # a caller's data_dir need not exist yet
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not start within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM: a graceful shutdown that flushes and writes the clean-shutdown marker."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def kill(self) -> None:
        """SIGKILL: an unclean stop, as a crash or power loss would leave things."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> "EmbeddedBroker":
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if getattr(self, "_log", None):
            self._log.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


try:
    import pytest

    @pytest.fixture
    def kafka_broker():
        """A fresh broker for one test."""
        with EmbeddedBroker() as broker:
            yield broker
except ImportError:  # pragma: no cover - pytest is optional for users
    pass
