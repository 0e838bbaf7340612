"""Runs ps_train.py clusters (1 PS + N workers, each a process on loopback) for the grpc+tictac
tests and the bench. Ports: free gRPC ports whose TicTac port (+ TICTAC_TF_PORT_OFFSET, default
1000) is free too, both below the kernel's ephemeral port range (free_ports)."""
import json
import os
import pathlib
import random
import socket
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
PY = sys.executable
SCRIPT = HERE / "ps_train.py"


def env(extra=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), e.get("PYTHONPATH", "")])
    e["TF_CPP_MIN_LOG_LEVEL"] = "3"
    e.update(extra or {})
    return e


def _free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _ephemeral_low():
    """The lowest port the kernel hands out to outgoing connections and port-0 binds."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n, offset=None):
    """n free gRPC ports whose TicTac port (+ offset) is free too, both below the kernel's
    ephemeral range: a port taken from that range (as a port-0 bind gives) can be handed to
    another process's outgoing connection, for example a test running beside this one, between
    this probe and the servers' bind. Ports near torch's default 29500 are avoided."""
    offset = int(os.environ.get("TICTAC_TF_PORT_OFFSET", "1000")) if offset is None else offset
    top = _ephemeral_low() - offset  # p + offset stays below the ephemeral range
    rng = random.Random()
    ports = []
    for _ in range(10000):
        if len(ports) == n:
            return ports
        if top > 11000:
            p = rng.randrange(10000, top)
            if abs(p - 29500) < 200 or abs(p + offset - 29500) < 200:
                continue
        else:  # an unusual ephemeral range: take the kernel's pick, as before
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            s.close()
        taken = set(ports) | {q + offset for q in ports}  # no port may be another task's TicTac port
        if p + offset < 65536 and p not in taken and p + offset not in taken and _free(p) and _free(p + offset):
            ports.append(p)
    raise RuntimeError(f"no {n} free port pairs (gRPC port and +{offset}) found")


def cluster_spec(workers=2):
    ports = free_ports(workers + 1)
    return {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}


class Cluster:
    """Starts the PS and the workers of one run in ``d``; ``wait()`` collects the results."""

    def __init__(self, d: pathlib.Path, protocol, workers=2, extra_env=None, args=(), worker_args=()):
        d.mkdir(parents=True, exist_ok=True)
        self.d = d
        spec = json.dumps(cluster_spec(workers))
        base = [PY, str(SCRIPT), "--cluster", spec, "--protocol", protocol, "--dir", str(d), *args]
        self.logs = {}
        self.procs = {}
        for name, extra in [("ps", ["--role", "ps"])] + [
                (f"worker{i}", ["--role", "worker", "--index", str(i), *worker_args]) for i in range(workers)]:
            log = open(d / f"{name}.log", "w")
            self.logs[name] = log
            self.procs[name] = subprocess.Popen(base + extra, env=env(extra_env), stdout=log,
                                                stderr=subprocess.STDOUT)

    def kill(self, name):
        self.procs[name].kill()
        self.procs[name].wait()

    def wait(self, timeout=150):
        deadline = time.monotonic() + timeout
        rcs = {}
        for name, p in self.procs.items():
            try:
                rcs[name] = p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                rcs[name] = f"killed after {timeout}s"
        for log in self.logs.values():
            log.close()
        return rcs

    def log(self, name):
        return (self.d / f"{name}.log").read_text(errors="replace")[-3000:]

    def json(self, name):
        return json.loads((self.d / f"{name}.json").read_text())
