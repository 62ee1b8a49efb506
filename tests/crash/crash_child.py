"""The crash tests' child: runs ``pocketmq`` with a fault armed.

    python crash_child.py [--fsize-limit BYTES [--limit-after-acked N]]
                          [--kill-before MODULE:QUALNAME --kill-call N] -- pocketmq-arguments...

--fsize-limit sets RLIMIT_FSIZE, a full disk without root: any write or fallocate that would
take a file past BYTES fails with EFBIG (SIGXFSZ is ignored so that the call fails instead of
killing the process). The limit is per file, not per disk, and every CommitLog segment has the
same size, so a limit set from the start fails the first segment or none. To let the first
segments in and fail a later one, --limit-after-acked sets it only once the bench's progress
line reports that many acknowledged messages (the hook wraps the CLI's progress printer).

--kill-before SIGKILLs the process at the N-th call of a function, before it runs: a kill
inside a chosen window (for example between writing an index entry and its header).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import resource
import signal
import sys
from typing import Any

from pocketmq.cli import main as cli_main
from pocketmq.cli import store_cmd


def set_fsize_limit(limit_bytes: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))


def limit_after_acked(limit_bytes: int, acked_threshold: int) -> None:
    print_progress = store_cmd.print_progress_line
    armed = False

    def progress_then_limit(acked: int) -> None:
        nonlocal armed
        print_progress(acked)
        if not armed and acked >= acked_threshold:
            armed = True
            set_fsize_limit(limit_bytes)

    store_cmd.print_progress_line = progress_then_limit


def kill_before_call(target: str, call_number: int) -> None:
    module_name, _, qualname = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    @functools.wraps(original)
    def dying(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call_number:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, dying)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fsize-limit", type=int)
    parser.add_argument("--limit-after-acked", type=int, default=0)
    parser.add_argument("--kill-before")
    parser.add_argument("--kill-call", type=int, default=1)
    parser.add_argument("pocketmq_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    if opts.fsize_limit is not None:
        if opts.limit_after_acked > 0:
            limit_after_acked(opts.fsize_limit, opts.limit_after_acked)
        else:
            set_fsize_limit(opts.fsize_limit)
    if opts.kill_before:
        kill_before_call(opts.kill_before, opts.kill_call)
    args = opts.pocketmq_args
    sys.argv = ["pocketmq", *(args[1:] if args[:1] == ["--"] else args)]
    cli_main.main()


if __name__ == "__main__":
    main()
