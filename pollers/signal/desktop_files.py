"""Signal Desktop's attachment files, as the bytes signal-cli would have saved (so both hash alike).

Files live under ``<desktop_dir>/attachments.noindex/<path>``. Before 2024 they were the plain bytes;
since then (attachment ``version`` 2) each is encrypted at rest with its own ``localKey`` (base64 of a
32-byte AES-256 key and a 32-byte HMAC-SHA256 key): ``IV (16) | AES-256-CBC ciphertext | HMAC (32)``
over IV and ciphertext, the plaintext followed by padding, cut to the attachment's ``size``. The MAC is
checked in a first streamed pass, then the bytes are decrypted as they are read: nothing is held whole
in memory and nothing is written to disk.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20
IV, MAC = 16, 32


class Undecryptable(FileNotFoundError):
    """The file is there but does not decrypt with its key (truncated, corrupt): its bytes are not to be had."""


def opener(root: Path, att: dict[str, Any]) -> Callable[[], IO[bytes]] | None:
    """A function opening an attachment's plaintext, or None when Signal Desktop has no file for it."""
    rel = att.get("path")
    if not isinstance(rel, str) or not rel:
        return None
    path = root / rel.replace("\\", "/")
    local_key, version = att.get("localKey"), int(att.get("version") or 0)
    if version < 2 or not local_key:

        def plain() -> IO[bytes]:
            return open(path, "rb")

        return plain
    size = int(att.get("size") or 0)

    def decrypted() -> IO[bytes]:
        try:
            keys = base64.b64decode(str(local_key), validate=True)
        except ValueError:
            raise Undecryptable(f"{path}: its localKey is not base64") from None
        if len(keys) != 64:
            raise Undecryptable(f"{path}: its localKey is not 64 bytes")
        return io.BufferedReader(_Decrypting(path, keys[:32], keys[32:], size), CHUNK)

    return decrypted


class _Decrypting(io.RawIOBase):
    """The plaintext of an encrypted-at-rest attachment file, decrypted while read (MAC checked on open)."""

    def __init__(self, path: Path, aes_key: bytes, mac_key: bytes, size: int) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self._f = open(path, "rb")  # noqa: SIM115 (closed by close(), or below if opening fails)
        try:
            total = self._f.seek(0, io.SEEK_END)
            if total < IV + MAC or (total - IV - MAC) % 16:
                raise Undecryptable(f"{path}: too short or not whole blocks for an encrypted attachment")
            self._end = total - MAC
            self._f.seek(0)
            mac = hmac.new(mac_key, digestmod=hashlib.sha256)
            left = self._end
            while left:
                chunk = self._f.read(min(CHUNK, left))
                if not chunk:
                    raise Undecryptable(f"{path}: shrank while read")
                mac.update(chunk)
                left -= len(chunk)
            if not hmac.compare_digest(mac.digest(), self._f.read(MAC)):
                raise Undecryptable(f"{path}: its MAC does not match its localKey (corrupt or another file)")
            self._f.seek(0)
            iv = self._f.read(IV)
            self._dec = Cipher(algorithms.AES(aes_key), modes.CBC(iv)).decryptor()
            self._pos = IV
            self._left = size  # plaintext bytes still to hand out
            self._buf = b""
        except BaseException:
            self._f.close()
            raise

    def readable(self) -> bool:
        """It is."""
        return True

    def readinto(self, b: Any) -> int:
        """Fill ``b`` with the next plaintext bytes (0 at the end)."""
        while not self._buf and self._left > 0 and self._pos < self._end:
            chunk = self._f.read(min(CHUNK, self._end - self._pos))
            if not chunk:
                break
            self._pos += len(chunk)
            self._buf = self._dec.update(chunk)
        n = min(len(b), len(self._buf), self._left)
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._left -= n
        return n

    def close(self) -> None:
        """Close the file."""
        self._f.close()
        super().close()
