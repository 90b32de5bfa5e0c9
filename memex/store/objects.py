"""Object stores: a local folder and S3, both create-only by default.

Keys are store-relative (``messages/<source>/<id>.json``); a store adds its
own prefix. :meth:`put_new` writes only if the key is absent and reports
whether it did, so a replayed upload is a counted duplicate, never an error
and never an overwrite. Neither store imports boto3 or touches the network
until the first request, so an idle poll pays for neither.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from memex.deadline import NEVER, Deadline
from memex.errors import ConfigError, StoreError
from memex.state.files import ensure_private_dir, fsync_dir, full_fsync, make_dirs, stream_temp, sync_files, write_new, write_temp

if TYPE_CHECKING:
    from memex.config import StoreConfig
    from memex.store.s3lean import LeanS3

TMP_DIR = ".memex-tmp"
CLIENTS = ("lean", "boto3")  # the S3 request paths [store] client may name
STALE_TMP_SECONDS = 3600.0


class ObjectStore(Protocol):
    """What the runner needs of a place to keep objects."""

    url: str

    def put_new(self, key: str, body: bytes) -> bool:
        """Create ``key`` with ``body`` unless it exists; True if created, False if it was there."""
        ...

    def put(self, key: str, body: bytes) -> None:
        """Create or replace ``key`` (used only by an explicit rewrite)."""
        ...

    def get(self, key: str) -> bytes | None:
        """Return the object's bytes, or None if it does not exist."""
        ...

    def sync(self) -> None:
        """Make every write so far durable; the runner calls it before saving a cursor."""
        ...

    def exists(self, key: str) -> bool:
        """Whether ``key`` is stored."""
        ...

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` from a stream of ``size`` bytes unless it exists; True if created (content-addressed attachments)."""
        ...


def content_type(key: str) -> str:
    """The MIME type an object gets from its key's suffix."""
    if key.endswith(".json"):
        return "application/json"
    if key.endswith(".eml"):
        return "message/rfc822"
    return "application/octet-stream"


class FileStore:
    """A folder that mirrors the S3 layout (``aws s3 sync`` of it reproduces the bucket).

    Create-only writes are atomic: the body goes to a temp file in ``.memex-tmp/``
    and is hard-linked to its final name, which fails if the name exists.
    :meth:`put_new` is a group commit: it only writes the temp file, and
    :meth:`sync` (called before a cursor moves) makes every pending temp file's
    data durable at once, links each to its name, then fsyncs each folder touched
    once. A name therefore never appears before its bytes are durable, and a
    crash before :meth:`sync` leaves no name at all (the cursor did not move, so
    the next poll writes it again). Paths are kept as strings inside: a poll
    writes hundreds of thousands of objects and ``pathlib`` cost more CPU than the writes.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = root.as_uri()
        self._tmp: str | None = None
        self._dirty: set[str] = set()  # folders whose entries must be made durable
        self._dirty_files: set[str] = set()  # objects found already there (another process wrote them)
        self._pending: dict[str, str] = {}  # final name -> its written, not yet durable, temp file (put_new)
        self._checked: set[Path] = set()  # folders known to exist, private, and durable in their parent
        self._folders: dict[str, str] = {}  # key prefix ("messages/s") -> its checked folder
        self._dirty_lock = threading.Lock()  # backfill writes from several threads while sync() runs
        self._temp_names = itertools.count()  # temp file names: <pid>.<this store's token>.<n>
        self._token = secrets.token_hex(4)

    def _tmp_dir(self) -> str:
        if self._tmp is None:
            self._folder(self.root)
            tmp = ensure_private_dir(self.root / TMP_DIR)
            _sweep_stale(tmp)
            self._tmp = str(tmp)
        return self._tmp

    def _temp_file(self, body: bytes) -> str:
        """Write ``body`` to a new temp file (not fsynced: :meth:`sync` flushes them together); its path."""
        tmp = f"{self._tmp_dir()}/.obj.{os.getpid()}.{self._token}.{next(self._temp_names)}.tmp"
        write_new(tmp, body)
        return tmp

    def _folder(self, folder: Path) -> None:
        """Make ``folder`` exist (new folders 0700, their parents' entries made durable at the next sync).

        An existing folder inside the store that another user could write to is refused: they could plant
        an object for a future message, which memex would then count as already stored.
        """
        if folder in self._checked:
            return
        chain = [folder]
        while chain[-1] != self.root and chain[-1].parent != chain[-1]:
            chain.append(chain[-1].parent)
        for probe in reversed(chain):  # the root first; nothing is created inside a folder others can write to
            if probe in self._checked or not probe.exists():
                continue
            mode = probe.stat().st_mode
            if mode & 0o022:
                raise ConfigError(
                    f"store folder is writable by other users (mode {mode & 0o777:04o}): another user could plant objects "
                    f"memex would take for stored messages; run chmod 700 {probe}",
                    path=probe,
                )
        made = make_dirs(folder)
        with self._dirty_lock:
            self._dirty.update(str(m.parent) for m in made)
        self._checked.update(chain)

    def _path(self, key: str, *, make: bool = True) -> str:
        """The file of ``key``; an unsafe key is refused. ``make``: its folder is made and checked (once per folder)."""
        prefix, _, name = key.rpartition("/")
        folder = self._folders.get(prefix)
        if folder is None or name in ("", ".", ".."):
            parts = key.split("/")
            if any(p in ("", ".", "..") for p in parts):
                raise StoreError(f"{self.url}: refusing unsafe key {key!r}")
            where = self.root.joinpath(*parts[:-1])
            if not make:
                return str(where / name)
            self._tmp_dir()  # the root is checked before anything is made inside it
            self._folder(where)
            folder = self._folders[prefix] = str(where)
        return f"{folder}/{name}"

    def put_new(self, key: str, body: bytes) -> bool:
        """Create ``key`` unless present: write its temp file now, make it durable and link it at the next :meth:`sync`.

        True if it was absent (a name another process links before that sync counts as already there, then).
        """
        path = self._path(key)
        with self._dirty_lock:
            if path in self._pending:
                return False
        if os.path.lexists(path):
            self._written_elsewhere(path)
            return False
        tmp = self._temp_file(body)
        with self._dirty_lock:
            if path in self._pending:  # another thread of a backfill got there first
                os.unlink(tmp)
                return False
            self._pending[path] = tmp
        return True

    def _link_new(self, key: str, make_temp: Callable[[Path], Path]) -> bool:
        """Write a fsynced temp file with ``make_temp`` and link it to ``key``'s name; False if the name exists."""
        path = self._path(key)
        if os.path.lexists(path):
            self._written_elsewhere(path)
            return False
        tmp = make_temp(Path(self._tmp_dir()))
        try:
            os.link(tmp, path)
        except FileExistsError:
            self._written_elsewhere(path)
            return False
        except OSError as exc:
            raise StoreError(f"{path}: cannot write ({exc.strerror})") from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._dirty_lock:
            self._dirty.add(os.path.dirname(path))
        return True

    def _written_elsewhere(self, path: str) -> None:
        """``path`` was already there: whoever wrote it (a killed poll, a backfill), make it durable before the cursor passes it."""
        with self._dirty_lock:
            self._dirty_files.add(path)
            self._dirty.add(os.path.dirname(path))

    def put(self, key: str, body: bytes) -> None:
        """Atomically create or replace ``key``."""
        path = self._path(key)
        with self._dirty_lock:
            superseded = self._pending.pop(path, None)  # a put_new of this key not yet linked: the put replaces it
        if superseded is not None:
            os.unlink(superseded)
        tmp = write_temp(Path(self._tmp_dir()), "obj", body)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"{path}: cannot write ({exc.strerror})") from None
        with self._dirty_lock:
            self._dirty.add(os.path.dirname(path))

    def get(self, key: str) -> bytes | None:
        """Read ``key``'s bytes (one written since the last sync included), or None."""
        path = self._path(key, make=False)
        with self._dirty_lock:
            pending = self._pending.get(path)
        try:
            with open(pending or path, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def exists(self, key: str) -> bool:
        """Whether ``key`` is there (its folder is then synced with the next :meth:`sync`, whoever wrote it)."""
        path = self._path(key, make=False)
        with self._dirty_lock:
            if path in self._pending:
                return True
        if not os.path.lexists(path):
            return False
        self._written_elsewhere(path)
        return True

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` by copying a stream into a fsynced temp file and linking it (never whole in memory)."""
        return self._link_new(key, lambda tmp_dir: stream_temp(tmp_dir, "obj", open_body))

    def sync(self) -> None:
        """Make durable what the cursor is about to pass: the pending objects' data, then their names, objects found already there, every folder entry.

        Pending temp files are flushed together (:func:`~memex.state.files.sync_files`), then linked to their names;
        folders are synced deepest first, so a new folder's own entries are durable before its entry in its parent.
        """
        with self._dirty_lock:
            pending, self._pending = self._pending, {}
        linked: set[str] = set()
        try:
            sync_files(list(pending.values()))
            for path, tmp in pending.items():  # only now, with their bytes durable, do the names appear
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    self._written_elsewhere(path)
                except OSError as exc:
                    raise StoreError(f"{path}: cannot write ({exc.strerror})") from None
                linked.add(path.rpartition("/")[0])
        finally:
            for tmp in pending.values():
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
            with self._dirty_lock:
                self._dirty.update(linked)
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
            files, self._dirty_files = self._dirty_files, set()
        for f in sorted(files):
            fd = os.open(f, os.O_RDONLY)
            try:
                full_fsync(fd)
            finally:
                os.close(fd)
        for d in sorted(dirty, key=lambda p: p.count(os.sep), reverse=True):
            fsync_dir(d)


def _sweep_stale(tmp: Path) -> None:
    """Remove temp files a killed writer left behind (only old ones: a live writer may own new ones)."""
    cutoff = time.time() - STALE_TMP_SECONDS
    try:
        with os.scandir(tmp) as it:
            for entry in it:
                try:
                    if entry.name.endswith(".tmp") and entry.stat().st_mtime < cutoff:
                        os.unlink(entry.path)
                except OSError:
                    pass
    except OSError:
        pass


class S3Store:
    """An S3 (or S3-compatible) bucket and prefix, written with ``If-None-Match: *``.

    A 412 answer means the key exists: a duplicate. A 409 (a concurrent
    conditional write) is retried. Throttling, 5xx and connection errors are
    retried with exponential backoff (5 attempts). ``client="lean"`` (the
    default) sends hand-signed requests over one keep-alive connection per
    thread (:mod:`memex.store.s3lean`) and uses boto3 only to find credentials and
    region; ``client="boto3"`` uses a boto3 client (botocore's standard retry
    mode). boto3 is imported on the first request only.
    """

    CONFLICT_RETRIES = 5

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        max_pool_connections: int = 10,
        max_attempts: int = 5,
        client: str = "lean",
        retry_base_delay: float = 1.0,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self.endpoint_url = endpoint_url
        self.region = region
        self.profile = profile
        self.max_pool_connections = max_pool_connections
        self.max_attempts = max_attempts
        if client not in CLIENTS:
            raise ConfigError(f"unknown S3 client {client!r}; use one of {', '.join(CLIENTS)}", key="store.client")
        self.kind = client
        self.retry_base_delay = retry_base_delay
        self._client: Any = None
        self._lean: LeanS3 | None = None
        self._lean_lock = threading.Lock()
        self.deadline: Deadline = NEVER

    def use_deadline(self, deadline: Deadline) -> None:
        """Bound every request by a poll's time limit and stop request (:mod:`memex.deadline`), on either client.

        The lean client caps its socket timeouts and backoffs and shuts a request's socket down when the
        poll must end; the boto3 client's calls are waited for no longer than that (a ``before-send`` hook
        stops botocore from starting another attempt).
        """
        self.deadline = deadline
        if self._lean is not None:
            self._lean.use_deadline(deadline)

    @property
    def lean(self) -> LeanS3:
        """The lean client, created (credentials and region resolved through boto3) on first use."""
        if self._lean is None:
            with self._lean_lock:
                if self._lean is None:
                    from memex.store.s3lean import LeanS3, boto_credentials

                    credentials, region = boto_credentials(self.profile, self.region)
                    lean = LeanS3(self.bucket, credentials=credentials, region=region, endpoint_url=self.endpoint_url,
                                  max_attempts=self.max_attempts, retry_base_delay=self.retry_base_delay)  # fmt: skip
                    lean.use_deadline(self.deadline)
                    self._lean = lean
        return self._lean

    @property
    def client(self) -> Any:
        """The client requests go through, created on first use (boto3 imported then, never before).

        With ``client="boto3"`` it is the boto3 S3 client; with ``"lean"`` the :class:`~memex.store.s3lean.LeanS3`.
        """
        if self.kind == "lean":
            return self.lean
        return self.boto3_client

    @property
    def boto3_client(self) -> Any:
        """A boto3 S3 client (also with ``client="lean"``, for what the lean client does not do: multipart uploads)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
            self._client = session.client(
                "s3",
                endpoint_url=self.endpoint_url,
                config=Config(
                    retries={"mode": "standard", "max_attempts": self.max_attempts},
                    max_pool_connections=self.max_pool_connections,
                    connect_timeout=10,
                    read_timeout=60,
                ),
            )
            self._client.meta.events.register("before-send.s3", self._before_send)
        return self._client

    def _before_send(self, request: Any = None, **_kwargs: Any) -> None:
        """botocore hook: no attempt (first or retry) starts once the poll must end."""
        self.deadline.check(f"s3://{self.bucket}: request")

    def _boto(self, label: str, call: Callable[[], Any]) -> Any:
        """One boto3 call, waited for no longer than the poll's deadline or stop request allow."""
        return self.deadline.call(call, label)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_new(self, key: str, body: bytes) -> bool:
        """PUT with ``If-None-Match: *``; False on 412 (already there)."""
        return self._put(key, body, create_only=True)

    def put(self, key: str, body: bytes) -> None:
        """Unconditional PUT (an explicit rewrite)."""
        self._put(key, body, create_only=False)

    def _put(self, key: str, body: bytes, *, create_only: bool) -> bool:
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.put(full, body, content_type(key), create_only=create_only)
        from botocore.exceptions import BotoCoreError, ClientError

        extra = {"IfNoneMatch": "*"} if create_only else {}
        label = f"s3://{self.bucket}/{full}: upload"
        for attempt in range(self.CONFLICT_RETRIES + 1):
            try:
                self._boto(
                    label, lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=body, ContentType=content_type(key), **extra)
                )
                return True
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                code = exc.response.get("Error", {}).get("Code", "")
                if create_only and (status == 412 or code == "PreconditionFailed"):
                    return False
                if status == 409 and attempt < self.CONFLICT_RETRIES:
                    self.deadline.sleep(0.05 * 2**attempt, label)
                    continue
                raise StoreError(
                    f"s3://{self.bucket}/{full}: upload refused ({code or status}); check the bucket, credentials and endpoint"
                ) from None
            except BotoCoreError as exc:
                raise StoreError(
                    f"s3://{self.bucket}/{full}: upload failed ({exc.__class__.__name__}); check the endpoint and network"
                ) from None
        raise AssertionError("unreachable")

    def get(self, key: str) -> bytes | None:
        """GET the object's bytes, or None on 404."""
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.get(full)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return bytes(
                self._boto(f"s3://{self.bucket}/{full}: read", lambda: self.client.get_object(Bucket=self.bucket, Key=full)["Body"].read())
            )
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return None
            raise StoreError(f"s3://{self.bucket}/{full}: read refused ({exc.response.get('Error', {}).get('Code')})") from None
        except BotoCoreError as exc:
            raise StoreError(f"s3://{self.bucket}/{full}: read failed ({exc.__class__.__name__})") from None

    def exists(self, key: str) -> bool:
        """HEAD the object: True if it exists."""
        full = self._key(key)
        if self.kind == "lean":
            return self.lean.head(full)
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._boto(f"s3://{self.bucket}/{full}: check", lambda: self.client.head_object(Bucket=self.bucket, Key=full))
            return True
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return False
            raise StoreError(f"s3://{self.bucket}/{full}: check refused ({exc.response.get('Error', {}).get('Code')})") from None
        except BotoCoreError as exc:
            raise StoreError(f"s3://{self.bucket}/{full}: check failed ({exc.__class__.__name__})") from None

    def put_new_stream(self, key: str, open_body: Callable[[], IO[bytes]], size: int) -> bool:
        """Create ``key`` from a stream, create-only; False if it exists.

        Up to :data:`~memex.store.s3multipart.MULTIPART_THRESHOLD` bytes go as one PUT; anything larger as a
        multipart upload read part by part (memory stays one part, objects may exceed 5 GB), made create-only by
        ``If-None-Match: *`` on the completion.
        """
        from memex.store.s3multipart import MULTIPART_THRESHOLD, put_new_multipart

        if size > MULTIPART_THRESHOLD:
            return put_new_multipart(self, key, open_body)
        with open_body() as f:
            body = f.read()
        return self.put_new(key, body)

    def sync(self) -> None:
        """Nothing to do: a PUT that returned is durable."""


def open_store(cfg: StoreConfig, *, max_pool_connections: int = 10) -> ObjectStore:
    """Build the store a configuration names (no I/O, no boto3 import)."""
    parts = urlsplit(cfg.url)
    if parts.scheme == "file":
        return FileStore(Path(unquote(parts.path)))
    if parts.scheme == "s3":
        return S3Store(
            parts.netloc,
            parts.path,
            endpoint_url=cfg.endpoint_url,
            region=cfg.region,
            profile=cfg.profile,
            max_pool_connections=max_pool_connections,
            client=cfg.client,
        )
    raise ConfigError(f"unsupported store URL {cfg.url!r}; use file:///path or s3://bucket/prefix", key="store.url")
