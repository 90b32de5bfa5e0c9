"""Push latency and cost at rest of ``memex watch``: IMAP on a real Dovecot, Signal through a daemon stand-in (issue 43).

Latency: a ``memex watch`` process watches one imap source (``interval`` an hour, so only push stores in time) while
this script APPENDs ``--messages`` mails to INBOX one by one, ``--gap`` seconds apart. Each mail's latency is from
the moment its APPEND was sent to the modification time of its record in the file store (written once, when the
poll stored it): arrival to stored object, nothing polled by the benchmark meanwhile. Run for NOTIFY (Dovecot
offers it) and for IDLE (``push = "idle"``). Beside them, the interval poll: a mail waits for the next poll, on
average half the interval (cron every minute: 30 s, at worst 60 s) plus the poll.

Signal: the same with a signal source receiving through the signal-cli daemon stand-in
(``tests/signal/daemon_standin.py``, ``--receive-mode=manual``) over its UNIX socket and over HTTP: each message is
queued for the stand-in to hand over (as Signal's server would), and its latency runs to its record's mtime.

Cost at rest: one watcher over ``--sources`` imap sources (each its own user, each with push on and its own
connection) with nothing arriving, for ``--rest`` seconds, with the re-IDLE every ``--renew`` seconds and each
source's interval poll every ``--interval`` seconds (both shortened from 300 and 60-3600, so that the minutes
measured hold many of each): CPU seconds (user + system, from /proc) over wall seconds, RSS at the start and the
end, and the connections the watcher holds to the server. The cost per re-IDLE and per interval poll follows, and
from it the cost at the default settings.

Run: .venv/bin/python bench/push_latency.py [--messages 200] [--gap 0.25] [--rest 180]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ROOT, write_config
from tests.servers import dovecot as dv

PASSWORD_ENV = "MEMEX_BENCH_IMAP_PASSWORD"


def mail(tag: str, n: int) -> bytes:
    """A small mail with a Message-ID the benchmark can find again."""
    return (f"From: a@example.com\r\nTo: b@example.com\r\nSubject: push {n}\r\nMessage-ID: <{tag}-{n}@bench>\r\n"
            f"Date: Tue, 01 Nov 2022 10:00:00 +0000\r\n\r\nbody {n}\r\n").encode()  # fmt: skip


def table(server: dv.Dovecot, user: str, **more: Any) -> dict[str, Any]:
    """An imap source section for ``user``."""
    return {"type": "imap", "host": "127.0.0.1", "port": server.port, "security": "none", "user": user,
            "password_env": PASSWORD_ENV, **more}  # fmt: skip


def watcher(config: Path, names: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``memex watch NAMES`` as a child process."""
    env = {**{k: v for k, v in os.environ.items() if k != "MEMEX_CONFIG"}, PASSWORD_ENV: dv.PASSWORD}
    with log.open("wb") as err:
        return subprocess.Popen([sys.executable, "-m", "memex", "--config", str(config), "watch", *names], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip


def log_lines(state: Path, source: str) -> list[dict[str, Any]]:
    """The source's JSON log lines."""
    path = state / "logs" / f"{source}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(what: str, check: Any, timeout: float = 60.0) -> None:
    """Wait until ``check()`` is true, or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def stored_times(store: Path) -> dict[str, float]:
    """native id -> modification time of its record object."""
    out: dict[str, float] = {}
    for path in store.rglob("*.json"):
        try:
            out[json.loads(path.read_bytes())["native_id"]] = path.stat().st_mtime
        except (ValueError, KeyError):
            continue
    return out


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def latency(server: dv.Dovecot, folder: Path, how: str, messages: int, gap: float) -> dict[str, float]:
    """Arrival-to-stored latency of ``messages`` mails pushed by ``how`` (notify or idle)."""
    user = server.new_user()
    work = folder / how
    work.mkdir()
    config = write_config(work, {"mail": table(server, user, interval=3600, push="auto" if how == "notify" else "idle")})
    state = work / "state"
    proc = watcher(config, ["mail"], work / "watch.stderr")
    try:
        wait_for("the push connection", lambda: any(e["event"] == "watch.push" and e.get("state") == "up"
                                                    for e in log_lines(state, "mail")))  # fmt: skip
        plan = next(e for e in log_lines(state, "mail") if e["event"] == "watch.push_plan")
        assert plan["how"] == how, plan
        sent: dict[str, float] = {}
        with server.session(user) as conn:
            for n in range(messages):
                sent[f"{how}-{n}@bench"] = time.time()
                dv.append(conn, "INBOX", mail(how, n))
                time.sleep(gap)  # the mails' pace, not a wait for an outcome
        wait_for("every mail stored", lambda: len(stored_times(state / "store")) >= messages, 120)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    got = stored_times(state / "store")
    delays = [got[k] - t for k, t in sent.items()]
    pushes = [e for e in log_lines(state, "mail") if e["event"] == "poll" and e.get("trigger") == "push"]
    return {"p50": statistics.median(delays), "p99": pct(delays, 0.99), "max": max(delays), "polls": len(pushes),
            "mean_waited": statistics.mean(e["waited_s"] for e in pushes) if pushes else 0.0}  # fmt: skip


def signal_latency(folder: Path, via: str, messages: int, gap: float) -> dict[str, float]:
    """Arrival-to-stored latency of ``messages`` Signal messages through the daemon stand-in over ``via``."""
    from tests.signal import signal_standin as sc
    from tests.signal.daemon_standin import free_port

    work = folder / f"signal-{via}"
    standin = work / "sc"
    standin.mkdir(parents=True)
    port = free_port()
    daemon = subprocess.Popen([sys.executable, "-m", "tests.signal.daemon_standin", str(standin), "--socket", str(standin / "socket"),
                               "--http", str(port)], cwd=ROOT)  # fmt: skip
    wait_for("the daemon stand-in", lambda: (standin / "daemon.ready").exists())
    address = f"unix:{standin / 'socket'}" if via == "unix" else f"http://127.0.0.1:{port}"
    table = {"type": "signal", "account": sc.ACCOUNT, "executable": "no-signal-cli", "daemon": address, "interval": 3600}
    config = write_config(work, {"sig": table})
    state = work / "state"
    proc = watcher(config, ["sig"], work / "watch.stderr")
    sent: dict[str, float] = {}
    try:
        wait_for("the listener", lambda: any(e["event"] == "watch.push" and e.get("state") == "up" for e in log_lines(state, "sig")))
        base = 1_744_235_749_734
        for n in range(messages):
            sent[f"{sc.ALICE}:{base + n}"] = time.time()
            sc.queue(standin, sc.message(sc.ALICE, base + n, f"message {n}"))
            time.sleep(gap)  # the messages' pace, not a wait for an outcome
        wait_for("every message stored", lambda: len(stored_times(state / "store")) >= messages, 120)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        daemon.kill()
        daemon.wait(10)
    got = stored_times(state / "store")
    delays = [got[k] - t for k, t in sent.items()]
    pushes = [e for e in log_lines(state, "sig") if e["event"] == "poll" and e.get("trigger") == "push"]
    return {"p50": statistics.median(delays), "p99": pct(delays, 0.99), "max": max(delays), "polls": len(pushes),
            "mean_waited": statistics.mean(e["waited_s"] for e in pushes) if pushes else 0.0}  # fmt: skip


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss(pid: int) -> float:
    """Resident memory of ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def connections(pid: int, port: int) -> int:
    """Established TCP connections of ``pid`` to ``port`` on loopback."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"dport = :{port}"], capture_output=True, text=True, check=False)
    return sum(1 for line in out.stdout.splitlines() if f"pid={pid}," in line)


def at_rest(server: dv.Dovecot, folder: Path, sources: int, seconds: float, renew: int, interval: int) -> dict[str, float]:
    """The watcher's CPU, memory and connections over ``sources`` push sources with nothing arriving."""
    work = folder / "rest"
    work.mkdir()
    names = [f"mail{i}" for i in range(sources)]
    config = write_config(work, {n: table(server, server.new_user(), interval=interval, push_renew=renew) for n in names})
    state = work / "state"
    proc = watcher(config, names, work / "watch.stderr")
    try:
        wait_for("every push connection", lambda: all(any(e["event"] == "watch.push" and e.get("state") == "up"
                                                          for e in log_lines(state, n)) for n in names))  # fmt: skip
        time.sleep(5)  # past the start polls
        cpu0, rss0, t0 = proc_cpu(proc.pid), proc_rss(proc.pid), time.monotonic()
        held = connections(proc.pid, server.port)
        samples = [rss0]
        while time.monotonic() - t0 < seconds:
            time.sleep(min(10.0, seconds / 6))  # sampling memory, not waiting for an outcome
            samples.append(proc_rss(proc.pid))
            held = max(held, connections(proc.pid, server.port))
        cpu1, wall = proc_cpu(proc.pid), time.monotonic() - t0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    polls = sum(1 for n in names for e in log_lines(state, n) if e["event"] == "poll" and e.get("trigger") == "interval")
    downs = sum(1 for n in names for e in log_lines(state, n) if e["event"] == "watch.push" and e.get("state") == "down")
    return {"cpu_s": cpu1 - cpu0, "wall_s": wall, "core_pct": 100 * (cpu1 - cpu0) / wall, "rss_start": rss0,
            "rss_end": samples[-1], "rss_max": max(samples), "connections": held, "interval_polls": polls,
            "renews": sources * wall / renew, "downs": downs}  # fmt: skip


def main() -> None:
    """Run both latency rounds and the rest round; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.25)
    parser.add_argument("--sources", type=int, default=5)
    parser.add_argument("--rest", type=float, default=180.0)
    parser.add_argument("--renew", type=int, default=10)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--only", nargs="*", choices=("notify", "idle", "signal-unix", "signal-http"), help="only these rounds")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    server = dv.start()
    try:
        with tempfile.TemporaryDirectory(prefix="memex-push-bench-") as tmp:
            folder = Path(os.environ.get("MEMEX_BENCH_KEEP") or tmp)
            for how in args.only or ("notify", "idle", "signal-unix", "signal-http"):
                if how.startswith("signal"):
                    r = signal_latency(folder, how.split("-")[1], args.messages, args.gap)
                else:
                    r = latency(server, folder, how, args.messages, args.gap)
                print(f"{how:11}: {args.messages} messages {args.gap:g} s apart: p50 {r['p50']:.3f} s, p99 {r['p99']:.3f} s, "
                      f"max {r['max']:.3f} s; {r['polls']:.0f} push polls, mean wait before a poll {r['mean_waited']:.3f} s")  # fmt: skip
            if args.rest > 0:
                r = at_rest(server, folder, args.sources, args.rest, args.renew, args.interval)
                print(f"at rest: {args.sources} push sources, re-IDLE every {args.renew} s, interval {args.interval} s, "
                      f"{r['wall_s']:.0f} s: {r['cpu_s']:.2f} CPU s = {r['core_pct']:.3f}% of a core; RSS {r['rss_start']:.1f} -> "
                      f"{r['rss_end']:.1f} MiB (max {r['rss_max']:.1f}); {r['connections']:.0f} connections held; "
                      f"{r['interval_polls']:.0f} interval polls, ~{r['renews']:.0f} re-IDLEs, {r['downs']:.0f} connections lost")  # fmt: skip
    finally:
        dv.stop(server)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
