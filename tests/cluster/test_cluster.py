"""Tests of the emulated cluster launcher, bench/cluster (launcher.py, topology.py, cli.py).

Run: .venv/bin/python -m pytest tests/cluster -q
Tests that need root and network namespaces skip (with the reason) where those are missing.
Traffic goes only to addresses inside the namespaces the launcher creates, or to loopback.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT)) if str(ROOT) not in sys.path else None   # bench is a package at the root

import bench.cluster as cluster  # noqa: E402

# the launcher's command line, runnable from any folder by the subprocesses below
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
CLI = [sys.executable, "-m", "bench.cluster"]


def _netns_or_skip():
    ok, why = cluster.netns_support()
    if not ok:
        pytest.skip(f"network namespaces unavailable: {why}")


def _cli(*args, timeout=60):
    """Runs the launcher's command line (python -m bench.cluster); the result also carries the launcher's pid (.pid)."""
    p = subprocess.Popen([*CLI, *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    r.pid = p.pid
    return r


def _ns_of(pid):
    return [n for n in cluster.netns_list() if n.startswith(f"ttc-{pid}-") or n.startswith(f"ttc-{pid}.")]


def _script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def _dead(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_for(paths, limit=15.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if all(p.exists() and p.read_text().strip() for p in paths):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------


def test_parse_rate():
    assert cluster.parse_rate("1gbit") == 125_000_000
    assert cluster.parse_rate("100mbit") == 12_500_000
    assert cluster.parse_rate("500kbit") == 62_500
    assert cluster.parse_rate("64000bit") == 8_000
    assert cluster.parse_rate("10Gbit") == 1_250_000_000
    for bad in ["", "1", "gbit", "1 gbit", "1.5gbit", "-1mbit", "1gbps", "1tbit", "0bit", "7bit", "abc"]:
        with pytest.raises(cluster.RateError):
            cluster.parse_rate(bad)
    with pytest.raises(cluster.RateError):
        cluster.Cluster(2, "fast")


def test_bad_rate_cli_exit_2():
    r = _cli("run", "--hosts", 2, "--rate", "100mbps", "--", "true")
    assert r.returncode == 2
    assert "100mbps" in r.stderr and "tc rate" in r.stderr
    r = _cli("run", "--hosts", 2, "--rate", "1gbit")  # no command
    assert r.returncode == 2


ENV_AND_PEER = """
    import os, socket, sys, time
    rank, ws = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert ws == 2 and os.environ["LOCAL_RANK"] == str(rank), os.environ
    assert os.environ["LOCAL_WORLD_SIZE"] == "2"
    assert sys.argv[1] == str(rank), sys.argv          # {rank} was substituted
    assert os.environ["OMP_NUM_THREADS"] == os.environ["TICTAC_TORCH_THREADS"] == "1"
    assert os.environ["TICTAC_CLUSTER_RATE"] == "12500000"
    assert os.environ["TICTAC_CLUSTER_MODE"] == "netns"
    assert "TICTAC_RATE_LIMIT" not in os.environ
    addrs = os.environ["TICTAC_CLUSTER_ADDRS"].split(",")
    me, other = os.environ["TICTAC_LISTEN_ADDR"], addrs[1 - rank]
    assert me == addrs[rank] and me.startswith("10.232.") and me != other
    assert os.environ["MASTER_ADDR"] == addrs[0] and os.environ["MASTER_PORT"] == "29500"
    port = int(os.environ["MASTER_PORT"])
    srv = socket.create_server((me, port))      # each host has its own stack: same port is fine
    srv.settimeout(10)
    for _ in range(200):                        # bounded: at most ~10 s
        try:
            c = socket.create_connection((other, port), timeout=2)
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("could not connect to " + other)
    c.sendall(b"hello from %d" % rank)
    conn, peer = srv.accept()
    data = conn.recv(100).decode()
    assert peer[0] == other and data == "hello from %d" % (1 - rank), (peer, data)
    print("PEER-OK", me, "<-", peer[0], data, flush=True)
    c.close()
"""


def test_two_hosts_env_and_connect(tmp_path):
    _netns_or_skip()
    s = _script(tmp_path, "peer.py", ENV_AND_PEER)
    logs = tmp_path / "logs"
    r = _cli("run", "--hosts", 2, "--rate", "100mbit", "--threads-per-proc", 1, "--log-dir", logs,
             "--timeout", 30, "--", sys.executable, s, "{rank}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mode netns" in r.stderr and "1 per process" in r.stderr
    for i in range(2):
        log = (logs / f"rank{i}.log").read_text()
        assert "PEER-OK" in log, log
        assert f"[rank {i}] PEER-OK" in r.stdout
    assert not _ns_of(r.pid)


THROUGHPUT = """
    import json, os, socket, sys, time
    rank = int(os.environ["RANK"]); addrs = os.environ["TICTAC_CLUSTER_ADDRS"].split(",")
    port, size = 29600, int(sys.argv[1])
    if rank == 0:
        srv = socket.create_server((addrs[0], port)); srv.settimeout(20)
        conn, _ = srv.accept()
        t0, got = time.monotonic(), 0
        while True:
            b = conn.recv(1 << 20)
            if not b:
                break
            got += len(b)
        secs = time.monotonic() - t0
        print("RESULT " + json.dumps({"bytes": got, "secs": secs}), flush=True)
        sys.exit(0 if got == size else 1)
    else:
        for _ in range(200):
            try:
                c = socket.create_connection((addrs[0], port), timeout=2)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("no connection")
        c.sendall(b"x" * size)
        c.shutdown(socket.SHUT_WR)
        c.recv(1)
        c.close()
"""


def test_api_shaped_throughput_and_reuse(tmp_path):
    """Two jobs in one Cluster; an 8 MB transfer at 100mbit takes about the shaped time."""
    _netns_or_skip()
    links_before = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    s = _script(tmp_path, "tput.py", THROUGHPUT)
    size = 8 * 1000 * 1000
    rate = cluster.parse_rate("100mbit")
    with cluster.Cluster(2, "100mbit", log_dir=str(tmp_path / "logs"), echo=False, timeout=30) as c:
        assert c.mode == "netns" and len(c.addrs) == 2
        names = set(cluster.netns_list())
        assert {f"ttc-{c.id}-h0", f"ttc-{c.id}-h1", f"ttc-{c.id}-br"} <= names
        # both directions shaped: host egress and the bridge-side veth towards each host
        for ns, dev in [(f"ttc-{c.id}-h0", "eth0"), (f"ttc-{c.id}-br", "vh1")]:
            q = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", dev], capture_output=True, text=True).stdout
            assert "tbf" in q and "100Mbit" in q, q
        # nothing created in the caller's namespace
        assert subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout == links_before
        results = []
        for job in ("a", "b"):
            codes = c.run([[sys.executable, str(s), str(size)]] * 2, env_extra={"JOB": job}, name=job)
            assert codes == [0, 0], (tmp_path / "logs" / job / "rank0.log").read_text()
            log = (tmp_path / "logs" / job / "rank0.log").read_text()
            res = json.loads(log.split("RESULT ", 1)[1].splitlines()[0])
            assert res["bytes"] == size
            results.append(size / res["secs"])
        cid = c.id
    for tput in results:
        assert 0.3 * rate <= tput <= 1.3 * rate, f"throughput {tput / 1e6:.2f} MB/s vs rate {rate / 1e6:.2f} MB/s"
    assert not [n for n in cluster.netns_list() if n.startswith(f"ttc-{cid}-")]


FAIL = """
    import os, signal, sys, time
    rank = int(sys.argv[1]); d = sys.argv[2]
    if rank == 1:
        time.sleep(0.3)
        print("boom: rank 1 gives up", flush=True)
        sys.exit(3)
    if rank == 2:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # must be SIGKILLed
    open(os.path.join(d, "pid%d" % rank), "w").write(str(os.getpid()))
    time.sleep(60)
"""


@pytest.mark.parametrize("loopback", [False, True], ids=["netns", "loopback"])
def test_failure_kills_others_and_propagates(tmp_path, loopback):
    if not loopback:
        _netns_or_skip()
    s = _script(tmp_path, "fail.py", FAIL)
    t0 = time.monotonic()
    extra = ["--loopback"] if loopback else []
    p = subprocess.Popen([*CLI, "run", "--hosts", "3", "--rate", "1gbit",
                          "--log-dir", str(tmp_path / "logs"), *extra, "--",
                          sys.executable, str(s), "{rank}", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert p.returncode == 3, out + err
    assert elapsed < 20, elapsed
    assert "rank 1 failed with exit status 3" in err and "boom: rank 1 gives up" in err, err
    for r in (0, 2):
        pid = int((tmp_path / f"pid{r}").read_text())
        assert _dead(pid), f"rank {r} (pid {pid}) still alive"
    assert not _ns_of(p.pid)


def test_sigint_mid_run_tears_down(tmp_path):
    _netns_or_skip()
    s = _script(tmp_path, "sleep.py", """
        import os, sys, time
        open(os.path.join(sys.argv[2], "pid" + sys.argv[1]), "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    p = subprocess.Popen([*CLI, "run", "--hosts", "2", "--rate", "1gbit",
                          "--log-dir", str(tmp_path / "logs"), "--", sys.executable, str(s), "{rank}",
                          str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for([tmp_path / "pid0", tmp_path / "pid1"]), "ranks did not start"
        assert len(_ns_of(p.pid)) == 3
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, out + err
    assert not _ns_of(p.pid), cluster.netns_list()
    for r in (0, 1):
        assert _dead(int((tmp_path / f"pid{r}").read_text()))


def test_sigterm_mid_run_tears_down(tmp_path):
    _netns_or_skip()
    p = subprocess.Popen([*CLI, "run", "--hosts", "2", "--rate", "1gbit",
                          "--log-dir", str(tmp_path / "logs"), "--", "sh", "-c", "echo up; exec sleep 60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        logs = [tmp_path / "logs" / f"rank{i}.log" for i in range(2)]
        assert _wait_for(logs), "ranks did not start"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 143, out + err
    assert not _ns_of(p.pid)


def test_timeout_exit_124(tmp_path):
    t0 = time.monotonic()
    r = _cli("run", "--hosts", 2, "--rate", "1gbit", "--timeout", 1, "--log-dir", tmp_path,
             "--", "sleep", "30", timeout=30)
    assert r.returncode == 124, r.stdout + r.stderr
    assert "TIMEOUT" in r.stderr and time.monotonic() - t0 < 15


LOOPBACK = """
    import os, socket, sys, time
    rank = int(os.environ["RANK"])
    assert os.environ["MASTER_ADDR"] == os.environ["TICTAC_LISTEN_ADDR"] == "127.0.0.1"
    assert os.environ["TICTAC_RATE_LIMIT"] == os.environ["TICTAC_CLUSTER_RATE"] == "12500000"
    assert os.environ["TICTAC_CLUSTER_MODE"] == "loopback"
    port = int(os.environ["MASTER_PORT"])
    if rank == 0:
        srv = socket.create_server(("127.0.0.1", port)); srv.settimeout(10)
        conn, _ = srv.accept()
        print("LOOP-OK", conn.recv(10).decode(), flush=True)
    else:
        for _ in range(200):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=2)
                break
            except OSError:
                time.sleep(0.05)
        else:
            sys.exit("no connection")
        c.sendall(b"hi")
        c.close()
"""


def test_loopback_fallback(tmp_path):
    s = _script(tmp_path, "loop.py", LOOPBACK)
    r = _cli("run", "--hosts", 2, "--rate", "100mbit", "--loopback", "--log-dir", tmp_path / "logs",
             "--timeout", 30, "--", sys.executable, s)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mode loopback" in r.stderr and "--loopback was asked for" in r.stderr
    assert "TICTAC_RATE_LIMIT=12500000" in r.stderr
    assert "[rank 0] LOOP-OK hi" in r.stdout


def test_cleanup_removes_only_dead_creators():
    _netns_or_skip()
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert _dead(dead.pid)
    live = subprocess.Popen(["sleep", "30"])
    dead_ns, live_ns = f"ttc-{dead.pid}-h0", f"ttc-{live.pid}-br"
    try:
        subprocess.run(["ip", "netns", "add", dead_ns], check=True)
        subprocess.run(["ip", "netns", "add", live_ns], check=True)
        r = _cli("cleanup")
        assert r.returncode == 0, r.stderr
        names = cluster.netns_list()
        assert dead_ns not in names and live_ns in names, (names, r.stderr)
    finally:
        for ns in (dead_ns, live_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        live.kill()
        live.wait()
