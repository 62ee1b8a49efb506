"""PrefaultService: keep the pages just ahead of each log's write position mapped.

The first write to a page of a reserved file costs a page fault that allocates and zeroes
a page-cache page (measured here: about 17 us per 4 KiB page, 4.5 us per 1 KiB record). On the
event loop that fault happens with the GIL held. This thread asks the kernel to take those
faults in advance with madvise(MADV_POPULATE_READ/WRITE) (Linux 5.14+), through ctypes, which
releases the GIL, so appends find their pages ready: RocketMQ's warmMappedFile, without writing
zeros through the whole file. It also creates the next CommitLog segment before it is needed
and reserves the CommitLog's next chunk of blocks ahead of the appends (store/reserve.py); the
ranges it is given end at each file's reservation mark, since faulting in an unreserved page
would allocate it behind the reservation's back.

The CommitLog is faulted in for reading (MADV_POPULATE_READ), the index for writing: a page
faulted in for writing is dirty, and a flush writes back every dirty page of the file. Under
SYNC_FLUSH each back-to-back group-commit sync would write the zeros ahead of the appends,
leave those pages write-protected again, and the appends would then fault on them anyway and
have them written a second time (BENCHMARKS.md, "Prefault advice under SYNC_FLUSH"). Under
ASYNC_FLUSH each periodic flush wrote the window's zeros too: 1.85 GB written for 1.19 GB of
records (BENCHMARKS.md, "Huge folios for a fast CommitLog"), and a window faulted in again
after a fast period (``fault_in_as``) was written once more. Faulted in for reading, a page is
in the page cache and mapped but clean: the append's first write costs a write-protect fault
(one a huge folio while the log is written fast) and the page goes to disk once.

While the CommitLog's appends are large puts, written with pwrite (see mapped_file.py), the
thread leaves the CommitLog's pages alone: a pwrite of whole pages needs none faulted in, and
faulting them in would zero them first. The appends then wake it every half window, for the
index, and a small put after them wakes it at once (CommitLog._pwrites).

Under ASYNC_FLUSH the CommitLog's pages are faulted in as huge folios while it is written fast
(``fault_in_as``; folios.py says why and when).

Where the kernel refuses the advice, the service stops and appends take the faults themselves.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import threading
from collections.abc import Callable

from pocketmq.store.folios import HUGE_FOLIO
from pocketmq.store.mapped_file import MappedFile
from pocketmq.store.reserve import align_down, align_up

log = logging.getLogger(__name__)

MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
_PAGE = mmap.PAGESIZE

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _libc.madvise.restype = ctypes.c_int
except (OSError, AttributeError):  # not Linux / no libc: nothing to prefault with
    _libc = None


def populate(mf: MappedFile, start: int, end: int, advice: int) -> bool:
    """Fault in mf's pages covering [start, end) with ``advice`` (MADV_POPULATE_WRITE or
    MADV_POPULATE_READ); False if the kernel refuses."""
    if _libc is None:
        return False
    start -= start % _PAGE
    end = min(end, mf.file_size)
    if end <= start or mf.address == 0:
        return True
    if _libc.madvise(mf.address + start, end - start, advice) != 0:
        err = ctypes.get_errno()
        if err == errno.ENOMEM:  # the file was unmapped meanwhile: nothing left to do
            return True
        log.info(
            "madvise(MADV_POPULATE_%s) unavailable (%s): no prefaulting",
            "READ" if advice == MADV_POPULATE_READ else "WRITE",
            errno.errorcode.get(err, err),
        )
        return False
    return True


def fault_in_as(mf: MappedFile, huge: bool) -> None:
    """Have mf's pages faulted in as huge folios from now on, or as pages again (folios.py).
    Going back, the folios from the one that holds the write position to the one that holds
    the prefault mark are written back and dropped: the written part is faulted in again at
    once (for reading: a consumer of the newest records would otherwise fault them in from
    disk on the event loop), and the mark moves back so that the thread faults in the rest as
    pages. Advice: a kernel or a file that refuses it changes nothing else."""
    try:
        mf.mm.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
        if huge:
            return
        wrote = mf.wrote_position
        start = align_down(wrote, HUGE_FOLIO)
        ahead = mf.prefaulted
        if ahead <= start:
            return
        # To the end of the folio holding the mark: the kernel drops no folio that is only
        # partly in the range, and the thread would go on faulting that one in.
        mf.drop_cached(start, align_up(ahead, HUGE_FOLIO))
        mf.prefaulted = start
        if populate(mf, start, wrote, MADV_POPULATE_READ):
            mf.prefaulted = wrote
    except (OSError, ValueError) as exc:  # ValueError: closed meanwhile (retention, truncation)
        log.debug("folio advice for %s not taken: %s", mf.path, exc)
    finally:
        mf.huge = huge  # taken or refused, not asked again until the choice changes


# A target names the files to keep warm and the ranges they will be written next, with the
# madvise advice to fault them in with.
Target = tuple[Callable[[], list[tuple[MappedFile, int, int]]], int]


# With nothing to do, the thread sleeps this long unless woken: appends wake it when they
# come within half a window of the prefaulted mark, so an idle store costs no CPU.
IDLE_WAIT_S = 0.1


class PrefaultService:
    def __init__(self, targets: list[Target], housekeeping: list[Callable[[], None]]) -> None:
        self.targets = targets
        self.housekeeping = housekeeping
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pocketmq-prefault", daemon=True)
        self.enabled = _libc is not None

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            for task in self.housekeeping:
                try:
                    task()
                except Exception:  # a task boundary: keep prefaulting the other logs
                    log.exception("prefault housekeeping failed")
            if self.enabled:
                for ranges, advice in self.targets:
                    for mf, start, end in ranges():
                        lo = max(start, mf.prefaulted)
                        if lo >= end:
                            continue
                        # The whole range in one call: each return to Python waits for the
                        # GIL, which an event loop busy appending hands over only after a
                        # switch interval (5 ms), so 1 MiB calls fell behind the appends
                        # (BENCHMARKS.md, "The prefault thread kept ahead"). stop() waits
                        # for the call in progress: 13-24 ms for a 32 MiB window here.
                        if not populate(mf, lo, end, advice):
                            self.enabled = False
                            break
                        mf.prefaulted = end
                        busy = True
            if not busy:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()

    def wake(self) -> None:
        # Appends call this until the thread has run and moved their mark, which may take a
        # switch interval (5 ms) when it waits for the GIL: hundreds of calls, of which only
        # the first needs Event.set's lock and notify.
        if not self._wake.is_set():
            self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
