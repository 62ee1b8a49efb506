"""grpc/consumer_channel.py: the version and language a 5.x client is registered with."""

from __future__ import annotations

from pocketmq.grpc.consumer_channel import client_version, consumer_channel, language_of
from pocketmq.protocol.remoting import CURRENT_VERSION
from pocketmq.protocol.versions import version_name, version_ordinal


def test_the_client_version_header_is_read_as_the_proxy_reads_it() -> None:
    # ClientActivity.parseClientVersion: MQVersion.Version.valueOf(upper-cased header).
    assert version_ordinal("V5_0_4") == 421 and version_name(421) == "V5_0_4"
    assert version_ordinal("5.0.4") is None
    assert client_version("v5_0_4") == 421
    # Not a version name, or none: the server's own version, never 0.
    assert client_version("5.0.4") == CURRENT_VERSION
    assert client_version("") == CURRENT_VERSION
    channel = consumer_channel("127.0.0.1:5", language_of("python"), client_version("V5_1_2"))
    assert channel.attributes == {"language": "PYTHON", "version": version_ordinal("V5_1_2")}
