"""The emulated cluster (see README.md): topology.py (namespaces, bridge, shaped links, or the
loopback fallback) and launcher.py (the Cluster: one process per host, logs, teardown)."""
from .launcher import Cluster, ClusterTimeout, Interrupted  # noqa: F401
from .topology import ClusterError, RateError, cleanup, netns_list, netns_support, parse_rate  # noqa: F401
