"""The ``pocketmq`` command line."""
