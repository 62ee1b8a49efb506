"""A ``pocketmq serve`` with ACL on, for the ACL integration and interop tests: its
plain_acl.yml, its broker.conf and the accounts the tests use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from server_procs import ServerProcess

TOPIC = "AclTopic"
GROUP = "AclGroup"
# (access key, secret key) of each account in PLAIN_ACL.
ADMIN = ("AclAdmin01", "admin-secret-1")
PRODUCER = ("AclProducer", "producer-secret")
CONSUMER = ("AclConsumer", "consumer-secret")
WRONG_SECRET = ("AclProducer", "not-the-secret")
UNKNOWN = ("NoSuchKey01", "whatever-secret")

PLAIN_ACL = f"""
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {PRODUCER[0]}
    secretKey: {PRODUCER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {TOPIC}=PUB
  - accessKey: {CONSUMER[0]}
    secretKey: {CONSUMER[1]}
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=SUB
    groupPerms:
      - {GROUP}=SUB
"""
# What the producer account may do after the reload test's edit: read the topic as well.
PLAIN_ACL_PRODUCER_READS = PLAIN_ACL.replace(f"{TOPIC}=PUB", f"{TOPIC}=PUB|SUB")
ACL_REMARK = "org.apache.rocketmq.acl.common.AclException: "


@contextmanager
def acl_serve(tmp_path: Path, plain_acl: str = PLAIN_ACL) -> Iterator[tuple[ServerProcess, Path]]:
    """``pocketmq serve`` with aclEnable and a fast look at the file; yields it and the file."""
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir()
    acl_file.write_text(plain_acl)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\naclPlainFile={acl_file}\naclFileWatchIntervalMs=100\n")
    proc = ServerProcess(
        "serve", tmp_path, "-c", str(conf), "--namesrv-port", "0", "--broker-port", "0",
        listen=False,
    )  # fmt: skip
    try:
        yield proc, acl_file
    finally:
        assert proc.stop() == 0, proc.log_path.read_text()
