"""One writer per target: a lease recorded in the target, ``<target>/_lakecdc/lease/``.

Two runs on one target at once would both plan the same new files (every SCD2 version and
quarantined record written twice), lose each other's new columns, and take the same run id.
So ``apply`` (and ``stream``, batch by batch), ``maintain`` and ``check`` first take the target's
lease and give it back when they are done; a second writer is told who holds it
(:class:`TargetBusy`), or waits for it (``wait=`` seconds, ``--wait`` on the command line).

How it works, with nothing but atomic file operations (a local disk, NFS, a FUSE mount):

* the lease is a sequence of generations, ``lease-<n>.json``; the newest one says who holds the
  target (``holder``: host, pid, what it runs, its run id, when it started) until when
  (``expires``), or that it was released;
* taking the lease creates generation ``n + 1`` with ``os.link`` of a complete file (an exclusive
  create where the filesystem has no hard links): it fails when another writer created that
  generation first, so exactly one of writers that start at once wins;
* a free target is one whose newest generation was released, has expired, or was taken by a
  process of this host (and pid namespace) that is gone (killed, crashed): such a lease is taken
  over the same way, by creating the next generation, so a crashed holder never keeps a target;
* the holder renews ``expires`` every :data:`RENEW_EVERY` of the ``ttl`` from a background thread
  while it works. A holder that finds a newer generation than its own lost the lease (it was
  stopped longer than the ``ttl``): :meth:`Lease.check` raises :class:`LeaseLost`, and ``apply``
  checks before it writes a run manifest.

Inside one process the lease is re-entrant: a job's ``apply`` and ``maintain`` and a stream's
batches take it in turn, and a nested call by the same thread shares the one it holds. Threads
of one process that write the same target take turns.

Run ids are taken under the lease, and a manifest is created only if its file does not exist yet
(:meth:`lakecdc.lake.ledger.Ledger.write`), so two runs never share an id.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lakecdc.errors import ConfigError, LakecdcError

#: How long a lease lasts without renewal (seconds); a holder renews it every third of that.
DEFAULT_TTL = 60.0
RENEW_EVERY = 1 / 3
#: Seconds between two looks at a busy lease while waiting.
POLL = 0.2
#: Generations kept behind the newest (older ones are deleted by the holder).
KEEP = 8

_GEN = re.compile(r"^lease-(\d{12})\.json$")


class TargetBusy(LakecdcError):
    """Another writer holds the target's lease."""

    def __init__(self, target: str, holder: Holder, waited: float) -> None:
        self.target = target
        self.holder = holder
        since = _iso(holder.started)
        who = (f"run {holder.run_id} ({holder.command}, " if holder.run_id is not None
               else f"lakecdc {holder.command} (")
        after = f" after waiting {waited:g}s" if waited else ""
        super().__init__(
            f"target {target} is busy{after}: held by {who}host {holder.host}, "
            f"pid {holder.pid}) since {since}. One writer per target at a time: wait for it with "
            f"--wait SECONDS (wait= in the API); a holder that crashed is taken over once its "
            f"process is gone (same host) or its lease expires (at {_iso(holder.expires)})"
        )


class LeaseLost(LakecdcError):
    """The lease expired while its holder was stopped, and another writer took the target."""


@dataclass(frozen=True)
class Holder:
    """Who holds a target's lease (the content of one generation)."""

    token: str
    host: str
    pid: int
    command: str
    started: float
    expires: float
    run_id: int | None = None
    released: bool = False
    proc_start: str | None = None
    pid_ns: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Holder:
        raw = json.loads(text)
        return cls(**{k: raw.get(k) for k in cls.__dataclass_fields__ if k in raw})

    def stale(self, now: float) -> str | None:
        """Why this lease no longer holds the target (None: it does)."""
        if self.released:
            return "released"
        if now > self.expires:
            return f"expired at {_iso(self.expires)}"
        if self.host == socket.gethostname() and self.pid_ns == _pid_ns() and not _alive(self.pid, self.proc_start):
            return f"its process {self.pid} is gone"
        return None


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _proc_start(pid: int) -> str | None:
    """When process ``pid`` started (Linux: ``/proc``), to tell a reused pid from the holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_ns() -> str | None:
    """This process's pid namespace (containers sharing a host name see each other's pids as gone)."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    if started is not None:
        now = _proc_start(pid)
        if now is not None and now != started:
            return False  # the pid was reused by another process
    return True


def lease_dir(target: str | os.PathLike[str]) -> Path:
    return Path(target) / "_lakecdc" / "lease"


def _generations(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in os.listdir(folder) if (m := _GEN.match(p)))


def _gen_path(folder: Path, gen: int) -> Path:
    return folder / f"lease-{gen:012d}.json"


def current_holder(target: str | os.PathLike[str]) -> Holder | None:
    """The newest generation of ``target``'s lease, whoever holds it (None: never taken)."""
    folder = lease_dir(target)
    for gen in reversed(_generations(folder)):
        try:
            return Holder.from_json(_gen_path(folder, gen).read_text())
        except FileNotFoundError:
            continue  # deleted as an old generation between the listing and the read
    return None


class _TurnLock:
    """A re-entrant lock that waiting threads get in the order they asked for it (a thread that
    releases it and asks again at once goes behind those already waiting)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: int | None = None
        self._count = 0
        self._queue: collections.deque[int] = collections.deque()

    def acquire(self, timeout: float) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._count += 1
                return True
            if self._owner is None and not self._queue:
                self._owner, self._count = me, 1
                return True
            if timeout <= 0:
                return False
            self._queue.append(me)
            if not self._cond.wait_for(lambda: self._owner is None and self._queue[0] == me, timeout):
                self._queue.remove(me)
                self._cond.notify_all()
                return False
            self._queue.popleft()
            self._owner, self._count = me, 1
            return True

    def release(self) -> None:
        with self._cond:
            self._count -= 1
            if self._count == 0:
                self._owner = None
                self._cond.notify_all()


# One lease per target and process: the threads of a process take turns, and a thread that holds
# the lease shares it with the calls it makes.
_LOCAL: dict[str, tuple[_TurnLock, list[Lease]]] = {}
_LOCAL_GUARD = threading.Lock()


def _local(target: str) -> tuple[_TurnLock, list[Lease]]:
    with _LOCAL_GUARD:
        return _LOCAL.setdefault(target, (_TurnLock(), []))


class Lease:
    """The lease of one target held by this process (see the module docstring)."""

    def __init__(self, target: str, gen: int, holder: Holder, ttl: float) -> None:
        self.target = target
        self.gen = gen
        self.holder = holder
        self.ttl = ttl
        self._folder = lease_dir(target)
        self._lost: str | None = None
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lakecdc-lease {target}", daemon=True)
        self._thread.start()

    # -- while held --------------------------------------------------------------------------------
    def note(self, *, run_id: int) -> None:
        """Record the run id the holder works on (busy messages name it)."""
        self._rewrite(run_id=run_id)

    def check(self) -> None:
        """Raise :class:`LeaseLost` when another writer took the target from this holder."""
        if self._lost is None:
            newer = [g for g in _generations(self._folder) if g > self.gen]
            if newer:
                self._lost = f"generation {newer[-1]} was taken by another writer"
        if self._lost is not None:
            raise LeaseLost(
                f"the lease of target {self.target} was lost ({self._lost}): this process was stopped "
                f"longer than the lease lasts ({self.ttl:g}s), and another writer took the target; nothing "
                f"more is written by this run (an unfinished run is resumed by the next one)"
            )

    def _rewrite(self, **changes: Any) -> None:
        with self._write_lock:
            if self._lost is not None:
                return
            holder = Holder(**{**asdict(self.holder), **changes})
            path = _gen_path(self._folder, self.gen)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_text(holder.to_json())
            os.replace(tmp, path)
            self.holder = holder

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl * RENEW_EVERY):
            try:
                if any(g > self.gen for g in _generations(self._folder)):
                    self._lost = "a newer generation exists"
                    return
                self._rewrite(expires=time.time() + self.ttl)
            except OSError:
                continue  # a passing filesystem hiccup: the next renewal tries again

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        try:
            if self._lost is None and not any(g > self.gen for g in _generations(self._folder)):
                self._rewrite(released=True, expires=time.time())
        except OSError:
            pass  # the lease expires by itself
        for old in _generations(self._folder)[:-KEEP]:
            with contextlib.suppress(OSError):
                _gen_path(self._folder, old).unlink()


def _try_take(target: str, command: str, ttl: float) -> Lease | Holder:
    """The lease, or the holder that keeps it."""
    folder = lease_dir(target)
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        gens = _generations(folder)
        newest = gens[-1] if gens else 0
        if gens:
            path = _gen_path(folder, newest)
            try:
                holder = Holder.from_json(path.read_text())
            except FileNotFoundError:
                continue
            except (ValueError, TypeError):
                # being written (a filesystem without hard links), or broken: taken over once old
                try:
                    if time.time() - path.stat().st_mtime < ttl:
                        time.sleep(POLL / 4)
                        continue
                except FileNotFoundError:
                    continue
                holder = None
            if holder is not None and holder.stale(time.time()) is None:
                return holder
        now = time.time()
        mine = Holder(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), command=command,
                      started=now, expires=now + ttl, proc_start=_proc_start(os.getpid()), pid_ns=_pid_ns())
        if not create_exclusive(_gen_path(folder, newest + 1), mine.to_json()):
            continue  # another writer took this generation first
        if any(g > newest + 1 for g in _generations(folder)):
            # (our listing was older than a generation another writer made meanwhile)
            continue
        return Lease(target, newest + 1, mine, ttl)


def create_exclusive(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` unless it exists (False then): a hard link of a complete
    file, so no reader sees it half-written; where the filesystem has no hard links, an exclusive
    create (a reader that meets it empty waits a moment)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        pass  # no hard links here
    finally:
        tmp.unlink()
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return True


@contextlib.contextmanager
def hold(
    target: str | os.PathLike[str], *, command: str, wait: float | None = None, ttl: float = DEFAULT_TTL,
) -> Iterator[Lease]:
    """Hold ``target``'s lease for the block: raise :class:`TargetBusy` when another writer holds it
    (after waiting up to ``wait`` seconds for it to finish).

    Example:
        >>> with hold("lake/", command="apply", wait=30) as lease:        # doctest: +SKIP
        ...     lease.note(run_id=7)
    """
    if wait is not None and (isinstance(wait, bool) or wait < 0):
        raise ConfigError(f"wait {wait!r}: expected seconds, 0 or more")
    key = str(Path(target).resolve())
    lock, held = _local(key)
    deadline = time.monotonic() + (wait or 0.0)
    if not lock.acquire(timeout=wait or 0.0):
        holder = current_holder(key)
        if holder is None:  # another thread of this process, between two steps
            holder = Holder("", socket.gethostname(), os.getpid(), command, time.time(), time.time())
        raise TargetBusy(key, holder, wait or 0.0)
    try:
        if held:  # this thread holds it already (a nested call)
            yield held[-1]
            return
        while True:
            got = _try_take(key, command, ttl)
            if isinstance(got, Lease):
                break
            if time.monotonic() >= deadline:
                raise TargetBusy(key, got, wait or 0.0)
            time.sleep(min(POLL, max(0.0, deadline - time.monotonic())) or POLL)
        held.append(got)
        try:
            yield got
        finally:
            held.pop()
            got.release()
    finally:
        lock.release()
