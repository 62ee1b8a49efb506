"""Summarize a py-spy ``--format raw`` profile: the functions that take the most samples.

Each line of a raw profile is ``frame;frame;...;leaf count``, outermost frame first, a frame
being ``function (file:line)``. Own time is the samples where a function is the leaf; total time
is the samples where it is anywhere on the stack (counted once per sample), listed for pocketmq's
own functions below the command line, since the frames above them are on every stack. Line
numbers are dropped so that a function is one row. Reads a file; no profiling here.

    python bench/profile_summary.py PROFILE.txt [--top 8]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

_LINE_NUMBER = re.compile(r":\d+\)$")
_SITE_PACKAGES = re.compile(r"\(.*?/(?:site-packages|src)/")


@dataclass(frozen=True, slots=True)
class Profile:
    samples: int
    own: Counter[str]
    total: Counter[str]


def _is_own_code(function: str) -> bool:
    return "(pocketmq/" in function and "(pocketmq/cli/" not in function


def _function(frame: str) -> str:
    """``put (/x/src/pocketmq/store/commitlog.py:120)`` -> ``put (pocketmq/store/commitlog.py)``."""
    return _SITE_PACKAGES.sub("(", _LINE_NUMBER.sub(")", frame.strip()))


def parse(path: Path) -> Profile:
    """Read a raw profile.

    Raises:
        ValueError: a line does not end with a sample count.
    """
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";") if f]
        # py-spy starts each stack with the process and thread; they are not functions.
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        samples += count
        own[frames[-1]] += count
        for name in set(frames):
            if _is_own_code(name):
                total[name] += count
    return Profile(samples, own, total)


def report(profile: Profile, top: int) -> str:
    """The ``top`` functions by own time, then by total time, with their share of samples."""
    if profile.samples == 0:
        return "no samples"
    lines = [f"{profile.samples} samples", "own time:"]
    lines += [
        f"  {100 * n / profile.samples:5.1f}%  {name}" for name, n in profile.own.most_common(top)
    ]
    lines.append("total time (on the stack), pocketmq functions:")
    lines += [
        f"  {100 * n / profile.samples:5.1f}%  {name}" for name, n in profile.total.most_common(top)
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    print(report(parse(args.profile), args.top))


if __name__ == "__main__":
    main()
