"""A real S3 API (moto's server) on loopback for tests and benchmarks.

The server runs in a child process: its global settings (auth on/off) stay out of this process,
where other tests may use moto's in-process mocks, and it does not compete for our GIL. It exits
when we close its stdin, so it cannot outlive the test run even if we are killed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

_SERVER_SCRIPT = """
import logging, sys
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
srv.start()
print(srv.get_host_and_port()[1], flush=True)
sys.stdin.read()
srv.stop()
srv._server.server_close()
"""

_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


@dataclass
class MotoServer:
    """Handle on a running moto server; ``key``/``secret`` are valid credentials for it."""

    process: subprocess.Popen[str]
    endpoint: str
    key: str = "testing"
    secret: str = "testing"
    auth: bool = False
    _buckets: list[str] = field(default_factory=list)

    def storage_options(self, **extra: Any) -> dict[str, Any]:
        """s3fs options for this server (no region: moto rejects one on bucket creation)."""
        options: dict[str, Any] = {
            "key": self.key,
            "secret": self.secret,
            "client_kwargs": {"endpoint_url": self.endpoint},
        }
        options.update(extra)
        return options

    def client(self, service: str = "s3", key: str | None = None, secret: str | None = None) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=key or self.key,
            aws_secret_access_key=secret or self.secret,
            region_name="us-east-1",
        )

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        self._buckets.append(name)
        return name

    def new_location(self, prefix: str = "results", **extra: Any) -> tuple[str, dict[str, Any]]:
        """A fresh bucket: returns (``s3://bucket/prefix``, storage options)."""
        return f"s3://{self.create_bucket()}/{prefix}", self.storage_options(**extra)

    def enable_auth(self) -> None:
        """Require real signatures from now on, with a generated key that may do everything.

        moto's signature check fails on some list requests (query strings containing '/'), so only
        use an auth-enabled server for single-object operations such as credential checks.
        """
        iam = self.client("iam")
        iam.create_user(UserName="audition")
        iam.put_user_policy(UserName="audition", PolicyName="all", PolicyDocument=json.dumps(_ALLOW_ALL))
        access = iam.create_access_key(UserName="audition")["AccessKey"]
        self.key, self.secret = access["AccessKeyId"], access["SecretAccessKey"]
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        self.auth = True

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_moto_server(*, auth: bool = False, timeout: float = 30.0) -> MotoServer:
    """Start moto on 127.0.0.1 with a free port and wait until it answers."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not line or not line[0].strip().isdigit():
        process.kill()
        process.wait(timeout)
        raise RuntimeError(f"moto server did not start within {timeout}s (is 'moto[server]' installed?)")
    server = MotoServer(process=process, endpoint=f"http://127.0.0.1:{int(line[0])}")
    if auth:
        server.enable_auth()
    return server


def s3_location(server: MotoServer, prefix: str = "results", **extra: Any) -> tuple[str, dict[str, Any]]:
    """(url, storage_options) of a fresh bucket on ``server``."""
    return server.new_location(prefix, **extra)
