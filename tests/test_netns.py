"""Real separate hosts: workers in their own network namespaces, joined to the leader over a bridge.

Needs root and iproute2 (`ip netns`); skipped with the reason otherwise.  Every namespace, link
and process made here is removed in the fixture's ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import psutil
import pytest

from tests._cluster import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "netns-test-key-0123456789abcdef"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _netns_available() -> str | None:
    if shutil.which("ip") is None:
        return "iproute2 ('ip') is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"audprobe{uuid.uuid4().hex[:6]}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"'ip netns add' failed: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_netns_available()), reason=str(_netns_available()))]




class Net:
    """A bridge in the root namespace (the leader's host) and one namespace per worker host."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:5]
        self.bridge = f"audbr{self.tag}"
        self.subnet = f"10.213.{int(self.tag[:2], 16) % 200}"
        self.leader_ip = f"{self.subnet}.1"
        self.hosts: dict[str, tuple[str, str, str]] = {}  # name -> (netns, root-side veth, ip)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.leader_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")

    def add_host(self, name: str, n: int) -> str:
        ns, veth = f"aud{self.tag}{name}", f"aud{self.tag}{name}r"
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge)
        _ip("link", "set", veth, "up")
        ip = f"{self.subnet}.{10 + n}"
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        self.hosts[name] = (ns, veth, ip)
        return ip

    def link(self, name: str, up: bool) -> None:
        _ip("link", "set", self.hosts[name][1], "up" if up else "down")

    def pids(self, name: str) -> list[int]:
        r = _ip("netns", "pids", self.hosts[name][0], check=False)
        return [int(p) for p in r.stdout.split()]

    def close(self) -> None:
        for ns, veth, _ in self.hosts.values():
            for pid in self.pids_of(ns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("link", "del", veth, check=False)
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)

    @staticmethod
    def pids_of(ns: str) -> list[int]:
        r = _ip("netns", "pids", ns, check=False)
        return [int(p) for p in r.stdout.split()]


@pytest.fixture
def net():
    n = Net()
    try:
        yield n
    finally:
        n.close()
        left = _ip("netns", "list").stdout
        assert n.tag not in left, f"namespaces left: {left}"


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=ROOT, AUDITION_CLUSTER_KEY=KEY)


def _start_worker(net: Net, name: str, port: int) -> subprocess.Popen:
    ns, _, ip = net.hosts[name]
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "actors._cli", "worker", "--leader",
         f"{net.leader_ip}:{port}", "--bind", ip, "--cpus", "1", "--id", f"{name}-{net.tag}"],
        env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def _listening(ip: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((ip, port)) == 0


def test_workers_in_namespaces_survive_a_cut_link(net, tmp_path):
    ip_a = net.add_host("a", 1)
    net.add_host("b", 2)
    storage = str(tmp_path / "res")
    port = _free_port(net.leader_ip)
    driver = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "_netns_driver.py"),
                               f"{net.leader_ip}:{port}", storage, "8"],
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: list[subprocess.Popen] = []
    try:
        wait_for(lambda: _listening(net.leader_ip, port), 30, "the leader to listen")
        workers = [_start_worker(net, "a", port), _start_worker(net, "b", port)]
        tag_a = f"a-{net.tag}"

        def a_running() -> bool:
            for f in (tmp_path / "res" / "ns").glob("*/result.json"):
                rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
                if sum(1 for r in rows if r.get("member") == tag_a) >= 3:
                    return True
            return False

        wait_for(a_running, 60, "a trial to run on host a")
        cut_at = time.time()
        net.link("a", up=False)

        def loss_counted() -> bool:  # the cut-off run's failure is counted (its error.txt): the trial is requeued
            return any((tmp_path / "res" / "ns").glob("*/error.txt"))

        # (as in Ray, the requeued trial runs after the trials waiting: with the link back before then, on a or b)
        wait_for(loss_counted, 60, "the cut-off host's run to be counted failed")
        net.link("a", up=True)
        back_at = time.time()

        def a_works_again() -> bool:  # 8 trials of 2.5 s on 2 one-CPU hosts: work is left for a
            for f in (tmp_path / "res" / "ns").glob("*/result.json"):
                rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
                if any(r.get("member") == tag_a and r["wall"] > back_at for r in rows):
                    return True
            return False

        wait_for(a_works_again, 60, "host a to get work again after its link came back")
        out, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, err[-3000:]
        trials = json.loads(out.strip().splitlines()[-1])
        assert [t["status"] for t in trials] == ["TERMINATED"] * 8
        for t in trials:
            assert [h["training_iteration"] for h in t["history"]] == list(range(1, 26))
        moved = [t for t in trials if t["failures"]]
        assert moved, "the trial on the cut host did not count a failure"
        for t in moved:
            # rows the cut-off run reported after the cut are kept when it committed them before
            # the loss was noticed (from the checkpoints' manifests); the moved run follows them
            # the retry's rows: after the cut from b, or from a once its link is back (the cut-off run's are fenced)
            after = [h for h in t["history"] if h["wall"] > cut_at and (h["member"] != tag_a or h["wall"] > back_at)]
            first = t["history"].index(after[0])
            if first == 0:  # a trial that started on the cut host moments before the cut: nothing committed
                assert after[0]["restored_from"] == -1
                continue
            assert after[0]["restored_from"] == t["history"][first - 1]["training_iteration"] - 1
            if sum(1 for h in t["history"][:first] if h["member"] == tag_a) >= 3:
                assert after[0]["restored_from"] >= 2  # the trial a_running saw: resumed from its checkpoint
            print(f"link cut -> trial running again: {after[0]['wall'] - cut_at:.1f}s")
        used_after = {h["member"] for t in trials for h in t["history"] if h["wall"] > back_at}
        assert tag_a in used_after, "host a never got work again after its link came back"
        print(f"members used after the link came back: {sorted(used_after)} (ip a = {ip_a})")
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                w.kill()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for p in psutil.process_iter(["cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if net.tag in cmd or f"{net.leader_ip}:{port}" in cmd:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
