"""The push spool: pushes a process could not deliver before it exited, kept on disk
for the next process to deliver (issue 43 item 2).

A push made while Redis is unreachable returns its jid and waits in the in-memory
buffer of :mod:`wurk_django.client.reliable_push`. When the process exits before Redis
answers, what is still buffered is written here, one file per exiting process
and Redis, in ``WURK["RELIABLE_PUSH_SPOOL"]`` (a folder of the system's temporary
directory by default). The next process that pushes to the same Redis (checked
at its first push, then at most once a minute) and every worker (at boot, then
once a minute) re-push those files, oldest first.

Each file is pushed once: a process claims it by locking it (``flock``) and
renaming it to a name of its own; only one rename of a name can succeed, so two
processes booting together never both push it. A claimer records each push it
delivered in the file, so if it dies half-way (its lock goes with it) the next
one pushes only the rest. A file records the Redis it was meant for (without
the password) and is only pushed there. A file that cannot be read is moved
aside (``corrupt-<name>``) with an ERROR; it never stops a worker.

Not covered, on purpose: a process killed by ``SIGKILL`` (or the OOM killer)
runs no code at exit, so what its buffer held is lost; see docs/reliability.md.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import redis as redis_lib

from .. import payload

if TYPE_CHECKING:
    from ..conf import Config
    from .operations import Command

logger = logging.getLogger("wurk_django.client.push")

FORMAT = 1
#: Seconds between two looks at the spool folder, per process and Redis.
SCAN_INTERVAL = 60.0
#: A half-written file (``.tmp-*``: its writer died while saving) older than this is removed.
STALE_TMP = 3600.0
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)
_PREFIXES = ("push-", "claimed-")

Group = tuple[list[dict], list["Command"], bool]


class SpoolUnusable(OSError):
    """The spool folder cannot be used safely (not a folder, writable by anyone...)."""


class SpoolCorrupt(ValueError):
    """A spool file's content is not what this module writes."""


# -- where ------------------------------------------------------------------------------------


def default_dir() -> Path:
    """The folder used when ``RELIABLE_PUSH_SPOOL`` is ``True``: one per user in the
    system's temporary directory (``$TMPDIR``, else ``/tmp``)."""
    return Path(tempfile.gettempdir()) / f"wurk_django-push-spool-{os.geteuid()}"


def directory(config: Config) -> Path | None:
    """The spool folder ``config`` names; ``None`` when spooling is off."""
    value = getattr(config, "reliable_push_spool", True)
    if value is False or value is None:
        return None
    return default_dir() if value is True else Path(os.fspath(value))


def _checked(folder: Path, *, create: bool) -> Path | None:
    """``folder`` if it is safe to read and write: a real folder (not a link) that no
    other user can write to (a file planted there would be pushed as a job). The
    default folder, in a temporary directory every user shares, must be ours and
    private. ``None`` when it does not exist and ``create`` is false."""
    default = folder == default_dir()
    if create:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        if create:
            raise
        return None
    if not stat.S_ISDIR(info.st_mode):
        raise SpoolUnusable(errno.ENOTDIR, "not a folder (or a symbolic link)", str(folder))
    if info.st_mode & stat.S_IWOTH:
        raise SpoolUnusable(errno.EPERM, "writable by every user", str(folder))
    if default and (info.st_uid != os.geteuid() or info.st_mode & 0o077):
        raise SpoolUnusable(errno.EPERM, "not private to this user (owner or mode)", str(folder))
    return folder


_warned_unusable: set[str] = set()


def _usable(folder: Path, *, create: bool) -> Path | None:
    try:
        return _checked(folder, create=create)
    except OSError as exc:
        if str(folder) not in _warned_unusable:
            _warned_unusable.add(str(folder))
            logger.error("the push spool folder %s cannot be used (%s): WURK['RELIABLE_PUSH_SPOOL']", folder, exc)
        if create:
            raise
        return None


# -- which Redis ------------------------------------------------------------------------------


def target_key(config: Config) -> str:
    """The Redis a config writes to, as a spool file records it: scheme, host, port
    (or socket path) and database, the user name but never a password; for
    Sentinel the sorted sentinels, the service and the database. Two configs with
    the same key write to the same keyspace."""
    target = config.redis_target
    options = target.options
    if target.is_sentinel:
        sentinels = ",".join(f"{host.lower()}:{port}" for host, port in sorted(target.sentinels))
        return f"sentinel://{sentinels}/{target.service}/{options.get('db', 0)}"
    parts = urlsplit(target.url)
    query = parse_qs(parts.query)
    if parts.scheme == "unix":
        db = options.get("db", (query.get("db") or ["0"])[0])
        return f"unix://{parts.path}?db={db}"
    path_db = parts.path.strip("/") or "0"
    db = options.get("db", (query.get("db") or [path_db])[0])
    user = f"{parts.username}@" if parts.username else ""
    host = (parts.hostname or "localhost").lower()
    return f"{parts.scheme}://{user}{host}:{parts.port or 6379}/{db}"


def target_tag(key: str) -> str:
    """The part of a spool file's name that says its Redis (a hash of :func:`target_key`)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# -- writing ----------------------------------------------------------------------------------


def _encode_arg(arg: Any) -> Any:
    if isinstance(arg, bytes):
        return {"b": base64.b64encode(arg).decode()}
    if isinstance(arg, str) or (isinstance(arg, (int, float)) and not isinstance(arg, bool)):
        return arg
    raise TypeError(f"a command argument of type {type(arg).__name__} cannot be saved")


def _decode_arg(arg: Any) -> Any:
    if isinstance(arg, dict) and set(arg) == {"b"} and isinstance(arg["b"], str):
        return base64.b64decode(arg["b"], validate=True)
    if isinstance(arg, str) or (isinstance(arg, (int, float)) and not isinstance(arg, bool)):
        return arg
    raise SpoolCorrupt(f"a command argument {arg!r} is not one this module writes")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:64] or "host"


def save(config: Config, groups: list[Group]) -> Path:
    """Write ``groups`` (buffered pushes: jobs, extra commands, front) to a new file in
    the spool folder and return its path. The file appears whole or not at all
    (written under a temporary name, flushed to disk, then renamed). Raises
    ``OSError`` when it cannot (spooling off, a folder it may not use, a full disk)."""
    folder = directory(config)
    if folder is None:
        raise SpoolUnusable(errno.EPERM, "spooling is off (WURK['RELIABLE_PUSH_SPOOL'] = False)")
    folder = _usable(folder, create=True)
    assert folder is not None
    key = target_key(config)
    header = {"wurk_django_push_spool": FORMAT, "target": key, "host": socket.gethostname(), "pid": os.getpid(),
              "saved_at": time.time(), "jobs": sum(len(jobs) for jobs, _e, _f in groups)}
    lines = [payload.dumps(header)]
    for index, (jobs, extra, front) in enumerate(groups):
        commands = payload.dumps([[_encode_arg(arg) for arg in command] for command in extra])
        lines.append(b'{"group":%d,"front":%s,"extra":%s,"jobs":[%s]}' % (
            index, b"true" if front else b"false", commands, b",".join(payload.dumps(job) for job in jobs)))
    name = f"{target_tag(key)}-{time.time_ns() // 1_000_000}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    tmp, final = folder / f".tmp-{name}", folder / f"push-{name}.spool"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(b"\n".join(lines) + b"\n")
            out.flush()
            os.fsync(out.fileno())
        os.rename(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return final


# -- reading ----------------------------------------------------------------------------------


def parse(data: bytes) -> tuple[dict, list[Group], set[int]]:
    """A spool file's header, its pushes in order, and the indexes already delivered.
    A last line without its newline (a claimer killed while recording a delivery) is
    ignored; anything else that is not what :func:`save` writes raises :class:`SpoolCorrupt`."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn last line
    if not lines:
        raise SpoolCorrupt("the file is empty")
    try:
        records = [payload.loads(line) for line in lines]
    except ValueError as exc:
        raise SpoolCorrupt(f"a line is not JSON: {exc}") from None
    header = records[0]
    if not isinstance(header, dict) or not isinstance(header.get("wurk_django_push_spool"), int) \
            or not isinstance(header.get("target"), str):
        raise SpoolCorrupt("the first line is not a push spool header")
    groups: list[Group] = []
    done: set[int] = set()
    for record in records[1:]:
        if not isinstance(record, dict):
            raise SpoolCorrupt(f"a line holds {type(record).__name__}, not an object")
        if set(record) == {"done"} and isinstance(record["done"], int) and 0 <= record["done"] < len(groups):
            done.add(record["done"])
            continue
        jobs, extra, front = record.get("jobs"), record.get("extra"), record.get("front")
        if record.get("group") != len(groups) or not isinstance(jobs, list) or not isinstance(extra, list) \
                or not isinstance(front, bool) or not all(isinstance(job, dict) and job.get("jid") for job in jobs) \
                or not all(isinstance(command, list) and command for command in extra):
            raise SpoolCorrupt(f"line {len(groups) + len(done) + 2} is not a push this module writes")
        groups.append((jobs, [tuple(_decode_arg(arg) for arg in command) for command in extra], front))
    return header, groups, done


def _candidates(folder: Path, tag: str) -> list[str]:
    """The files waiting for the Redis of ``tag`` (pending or claimed by a process that
    may have died), oldest first; half-written files of dead savers are removed."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if name.endswith(".spool") and name.startswith(_PREFIXES):
            fields = name.split("-")
            if len(fields) >= 3 and fields[1] == tag:
                found.append((int(fields[2]) if fields[2].isdigit() else 0, name))
        elif name.startswith(".tmp-"):
            try:
                if time.time() - os.lstat(folder / name).st_mtime > STALE_TMP:
                    os.unlink(folder / name)
            except OSError:
                pass
    return [name for _ms, name in sorted(found)]


_resume_lock = threading.Lock()
_next_scan: dict[str, float] = {}


def due(config: Config) -> bool:
    """True at most once per :data:`SCAN_INTERVAL` per Redis in this process (the first
    time at once): the push path's cheap question before it looks at the folder."""
    key = config.redis_target.identity
    now = time.monotonic()
    if now < _next_scan.get(key, 0.0):
        return False
    _next_scan[key] = now + SCAN_INTERVAL
    return directory(config) is not None


def waiting(config: Config) -> bool:
    """Whether any file waits for ``config``'s Redis (a listing of the folder)."""
    folder = directory(config)
    if folder is None or _usable(folder, create=False) is None:
        return False
    return bool(_candidates(folder, target_tag(target_key(config))))


def resume(config: Config) -> int:
    """Push every spool file waiting for ``config``'s Redis, oldest first; returns how
    many jobs were pushed. Never raises: a file is kept for a later try when Redis
    is unreachable, moved aside when it is corrupt, and errors are logged. One call
    at a time per process (a second one returns 0 at once)."""
    folder = directory(config)
    if folder is None or not _resume_lock.acquire(blocking=False):
        return 0
    try:
        if _usable(folder, create=False) is None:
            return 0
        key = target_key(config)
        pushed = 0
        for name in _candidates(folder, target_tag(key)):
            try:
                count = _resume_file(config, folder, name, key)
            except Exception:
                logger.exception("re-pushing the push spool file %s failed; it is kept for a later try", folder / name)
                continue
            if count is None:  # Redis unreachable: the later files would fail too
                break
            pushed += count
        return pushed
    finally:
        _resume_lock.release()


def _resume_file(config: Config, folder: Path, name: str, key: str) -> int | None:
    """Claim and push one file: the count of jobs pushed, or ``None`` when Redis was
    unreachable (the file stays, with what was delivered recorded in it)."""
    path = folder / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return 0  # another process claimed it since the listing
    except OSError as exc:
        _move_aside(folder, name, f"it cannot be opened ({exc})")
        return 0
    with os.fdopen(fd, "r+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another process is pushing it right now
        info = os.fstat(handle.fileno())
        try:
            if os.lstat(path).st_ino != info.st_ino:
                return 0  # renamed away (claimed) between our open and our lock
        except FileNotFoundError:
            return 0
        if not stat.S_ISREG(info.st_mode):
            _move_aside(folder, name, "it is not a regular file")
            return 0
        fields = name.split("-", 3)
        claimed = folder / f"claimed-{fields[1]}-{fields[2]}-{_host()}-{os.getpid()}-{secrets.token_hex(4)}.spool"
        try:
            os.rename(path, claimed)  # the claim: one rename of this name succeeds, across processes
        except FileNotFoundError:
            return 0
        try:
            header, groups, done = parse(handle.read())
        except SpoolCorrupt as exc:
            _move_aside(folder, claimed.name, str(exc), name)
            return 0
        if header["wurk_django_push_spool"] > FORMAT:
            logger.warning("the push spool file %s was written by a newer wurk_django (format %s); left alone",
                           claimed, header["wurk_django_push_spool"])
            return 0
        if header["target"] != key:
            _move_aside(folder, claimed.name, f"it says it is for Redis {header['target']}, its name for {key}", name)
            return 0
        return _push(config, handle, claimed, header, groups, done)


def _push(config: Config, handle, claimed: Path, header: dict, groups: list[Group], done: set[int]) -> int | None:
    from .writer import Writer

    writer = Writer(config)
    pushed = 0
    for index, (jobs, extra, front) in enumerate(groups):
        if index in done:
            continue
        try:
            writer.write(jobs, extra=extra, front=front, connect_attempts=1)
        except TRANSIENT as exc:
            left = sum(len(g[0]) for i, g in enumerate(groups) if i not in done and i >= index)
            logger.warning("Redis %s is still unreachable (%s): %d job(s) of the push spool file %s wait for a "
                           "later try", header["target"], exc, left, claimed)
            return None
        handle.seek(0, os.SEEK_END)
        handle.write(b'{"done":%d}\n' % index)
        handle.flush()
        pushed += len(jobs)
    os.unlink(claimed)
    logger.warning("re-pushed %d job(s) from the push spool file %s (saved by pid %s on %s at %s)", pushed,
                   claimed, header.get("pid"), header.get("host"),
                   time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(header.get("saved_at") or 0)))
    return pushed


def _move_aside(folder: Path, name: str, reason: str, original: str | None = None) -> None:
    """Rename the file ``name`` to ``corrupt-<original name>``: out of every later scan, kept for a person."""
    aside = folder / f"corrupt-{original or name}"
    try:
        os.rename(folder / name, aside)
    except OSError as exc:
        logger.error("the push spool file %s is corrupt (%s) and could not be moved aside (%s)", folder / name,
                     reason, exc)
        return
    logger.error("the push spool file %s is corrupt (%s): moved aside to %s; none of its jobs were pushed",
                 folder / name, reason, aside)


def resume_all(config: Config) -> int:
    """:func:`resume` for ``config``'s Redis and each of its ``SHARDS`` (a worker's tick)."""
    pushed = resume(config)
    for shard in (config.raw.get("SHARDS") or {}):
        try:
            pushed += resume(config.for_shard(shard))
        except ValueError:
            continue
    return pushed


def _reset_after_fork() -> None:
    # A child looks at the folder again at its first push; a lock another thread of the
    # parent held at the fork would stay held for ever in the child.
    global _resume_lock
    _resume_lock = threading.Lock()
    _next_scan.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
