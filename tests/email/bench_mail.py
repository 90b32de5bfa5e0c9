"""The benchmark's mails (``bench/imap_vs_mbsync.py``), deterministic: about 28 KiB on average, half plain text, half
text + HTML alternatives, every tenth with a 50-100 KB base64 attachment; also among the renderer's equivalence cases."""

from __future__ import annotations

import base64
import random

_WORDS = (
    "the of and to in is that it was for on are as with his they at be this from have or by one had not but what all "
    "were when we there can an your which their said if do will each about how up out them then she many some so these "
    "would other into has more her two like him see time could no make than first been its who now people my made over "
    "did down only way find use may water long little very after words called just where most know get through back much "
    "before go good new write our used me man too any day same right look think also around another came come work three"
)
WORDS = _WORDS.split()
SEED = 25


def _text(rng: random.Random, size: int) -> str:
    """About ``size`` bytes of lines of words (72 columns)."""
    lines, line, total = [], [], 0
    while total < size:
        word = rng.choice(WORDS)
        line.append(word)
        total += len(word) + 1
        if sum(len(w) + 1 for w in line) > 70:
            lines.append(" ".join(line))
            line = []
    lines.append(" ".join(line))
    return "\r\n".join(lines)


def sample(i: int) -> bytes:
    """Mail ``i`` (deterministic): text ~4-32 KiB, every other one also as HTML, every tenth with a ~75 KiB attachment."""
    rng = random.Random(SEED * 1_000_003 + i)
    body = _text(rng, rng.randint(4096, 32768) // (2 if i % 2 else 1))
    head = (
        f"From: Sender {i % 211} <sender{i % 211}@example.com>\r\nTo: Me <me@example.com>\r\n"
        f"Cc: =?utf-8?q?J=C3=BCrgen?= <j{i % 13}@example.org>\r\nSubject: =?utf-8?q?bench_mail_{i}_=E2=80=94_r=C3=A9sum=C3=A9?=\r\n"
        f"Date: Tue, {1 + i % 28:02d} Nov 2022 10:{i % 60:02d}:{i % 59:02d} +0100\r\nMessage-ID: <bench-{i}.{SEED}@example.com>\r\n"
        f"References: <bench-{max(0, i - 1)}.{SEED}@example.com>\r\nMIME-Version: 1.0\r\n"
    )
    if i % 2:
        html = "<html><body>" + "".join(f"<p>{p}</p>" for p in body.split("\r\n")) + "</body></html>"
        text_part = (
            'Content-Type: multipart/alternative; boundary="alt"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n'
            f"{body}\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n{html}\r\n--alt--\r\n"
        )
    else:
        text_part = f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    if i % 10 == 5:
        blob = base64.encodebytes(rng.randbytes(rng.randint(50_000, 100_000))).replace(b"\n", b"\r\n").decode()
        mail = (
            f'{head}Content-Type: multipart/mixed; boundary="mix"\r\n\r\n--mix\r\n{text_part}--mix\r\n'
            f'Content-Type: application/octet-stream; name="data-{i}.bin"\r\nContent-Disposition: attachment; filename="data-{i}.bin"\r\n'
            f"Content-Transfer-Encoding: base64\r\n\r\n{blob}--mix--\r\n"
        )
    else:
        mail = head + text_part
    return mail.encode()
