"""The key of Signal Desktop's database, from ``<desktop_dir>/config.json``.

Two schemes: the plain ``"key"`` (64 hex digits), or, since mid-2024, ``"encryptedKey"`` (hex) wrapped
with the OS's safe storage, as Chromium does: the hex starts with ``v10`` (macOS: keychain item
"Signal Safe Storage", PBKDF2-SHA1 with 1003 iterations) or ``v11`` (Linux: secret service or kwallet,
1 iteration); salt ``saltysalt``, a 16-byte AES-128-CBC key, an IV of 16 spaces, PKCS7 padding. memex
never reads the OS key store itself: the user's ``key_cmd`` prints the password. AES comes from
``cryptography``, imported only here, only when a key is wrapped.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from memex.plugin import SourceMissing

SCHEMES = {b"v10": 1003, b"v11": 1}  # prefix -> PBKDF2 iterations
KEY_CMD_TIMEOUT = 60.0
HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")
KEY_CMD_HINT = (
    "set key_cmd to a command printing Signal's safe-storage password, e.g. "
    '["security", "find-generic-password", "-ws", "Signal Safe Storage"] on macOS or '
    '["secret-tool", "lookup", "application", "Signal"] on Linux'
)


def database_key(desktop_dir: Path, key_cmd: Sequence[str] | None) -> str:
    """The database key (64 hex digits) from ``config.json``, unwrapping ``encryptedKey`` with ``key_cmd``'s password."""
    path = desktop_dir / "config.json"
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise SourceMissing(f"{path}: not found; set desktop_dir to Signal Desktop's folder (the one holding sql/db.sqlite)") from None
    except OSError as exc:
        raise SourceMissing(f"{path}: cannot read it ({exc.strerror})") from None
    except ValueError:
        raise SourceMissing(f"{path}: not JSON; is desktop_dir Signal Desktop's folder?") from None
    if not isinstance(doc, dict):
        raise SourceMissing(f"{path}: not Signal Desktop's config (no key in it)")
    if isinstance(doc.get("key"), str):
        if not HEX_KEY.fullmatch(doc["key"]):
            raise SourceMissing(f'{path}: its "key" is not 64 hex digits; is this Signal Desktop\'s config.json?')
        return str(doc["key"])
    wrapped = doc.get("encryptedKey")
    if not isinstance(wrapped, str):
        raise SourceMissing(f'{path}: has neither "key" nor "encryptedKey"; is this Signal Desktop\'s config.json?')
    if not key_cmd:
        raise SourceMissing(f'{path}: the database key is wrapped by the OS key store ("encryptedKey"); {KEY_CMD_HINT}')
    return unwrap(wrapped, password(key_cmd), where=str(path))


def password(key_cmd: Sequence[str]) -> bytes:
    """What ``key_cmd`` prints (its last newline stripped); its output is never logged."""
    name = key_cmd[0]
    try:
        done = subprocess.run(list(key_cmd), stdin=subprocess.DEVNULL, capture_output=True, timeout=KEY_CMD_TIMEOUT, check=False)
    except FileNotFoundError:
        raise SourceMissing(f"key_cmd {name!r}: not found; {KEY_CMD_HINT}") from None
    except OSError as exc:
        raise SourceMissing(f"key_cmd {name!r}: cannot run it ({exc.strerror})") from None
    except subprocess.TimeoutExpired:
        raise SourceMissing(
            f"key_cmd {name!r}: still running after {KEY_CMD_TIMEOUT:g}s (waiting for an unlock?); run it by hand"
        ) from None
    if done.returncode != 0:
        raise SourceMissing(f"key_cmd {name!r} exited {done.returncode}; run it by hand to see why (is the key store unlocked?)")
    out = done.stdout.rstrip(b"\r\n")
    if not out:
        raise SourceMissing(f"key_cmd {name!r} printed nothing; {KEY_CMD_HINT}")
    return out


def unwrap(wrapped_hex: str, secret: bytes, *, where: str) -> str:
    """Unwrap ``encryptedKey`` (hex, ``v10``/``v11`` prefix) with the safe-storage password ``secret``."""
    try:
        blob = bytes.fromhex(wrapped_hex)
    except ValueError:
        raise SourceMissing(f'{where}: its "encryptedKey" is not hex') from None
    iterations = SCHEMES.get(blob[:3])
    if iterations is None:
        raise SourceMissing(f'{where}: its "encryptedKey" uses a scheme memex cannot unwrap ({blob[:3]!r}; known: v10 macOS, v11 Linux)')
    from cryptography.hazmat.primitives import hashes, padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    aes_key = PBKDF2HMAC(algorithm=hashes.SHA1(), length=16, salt=b"saltysalt", iterations=iterations).derive(secret)
    body = blob[3:]
    wrong = SourceMissing(f'{where}: the password key_cmd printed did not unwrap "encryptedKey"; check key_cmd')
    if not body or len(body) % 16:
        raise wrong
    decryptor = Cipher(algorithms.AES(aes_key), modes.CBC(b" " * 16)).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        plain = unpadder.update(decryptor.update(body) + decryptor.finalize()) + unpadder.finalize()
        key = plain.decode("ascii")
    except ValueError:  # bad padding or not ASCII: a wrong password
        raise wrong from None
    if not HEX_KEY.fullmatch(key):
        raise wrong
    return key
