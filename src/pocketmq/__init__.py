"""pocketmq: a RocketMQ-compatible message broker written in Python."""

__version__ = "0.1.0"
