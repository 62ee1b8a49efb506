"""Where the driver of the unmodified C++-based ``rocketmq==0.4.4`` client is, and whether that
client is installed: for the interop tests and the failover test that uses it as a producer."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).with_name("cpp_client_script.py")


def cpp_client_installed() -> bool:
    """Looked up, not imported: importing rocketmq runs the 5.x client's package __init__, whose
    generated protobuf code registers the apache.rocketmq.v2 names that pocketmq.grpc.v2
    (imported by other tests in this process) registers too."""
    spec = importlib.util.find_spec("rocketmq")
    return spec is not None and any(
        (Path(p) / "client.py").exists() for p in spec.submodule_search_locations or ()
    )
