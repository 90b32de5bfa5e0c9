"""The durable spool (memex.state.spool): written before anything else, claimed once, removed only after storing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from memex.state.spool import Spool, iter_entries
from tests.conftest import Gate, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = ROOT / "tests" / "core" / "spool_worker.py"


def env() -> dict[str, str]:
    """The environment a worker process needs to import memex from this tree."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def drain(spool: Spool) -> list[bytes]:
    """Every record in the spool, claimed and removed, oldest first."""
    out: list[bytes] = []
    claim = spool.claim()
    while (entry := claim.next()) is not None:
        out += entry.records()
        claim.remove([entry])
    claim.release()
    return out


def test_entries_are_private_ordered_and_gone_only_when_removed(tmp_path: Path) -> None:
    """Folders 0700, entries 0600; claimed entries keep their order and stay until removed; stats count them."""
    spool = Spool(tmp_path / "spool")
    for i in range(3):
        spool.add(b"r%d\n" % i)
    assert {oct(p.stat().st_mode & 0o777) for p in (spool.tmp, spool.new, spool.cur)} == {"0o700"}
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in spool.new.iterdir())
    stats = spool.stats()
    assert stats.count == 3 and stats.oldest_age_s is not None and stats.oldest_age_s >= 0
    claim = spool.claim()
    first = claim.next()
    assert first is not None and first.records() == [b"r0"]
    assert spool.stats().count == 3  # claimed, not removed: still waiting
    claim.remove([first])
    assert spool.stats().count == 2
    claim.release()  # the claim's folder is gone, its entries back in new/
    assert drain(spool) == [b"r1", b"r2"]
    assert spool.stats() == type(stats)(0, None)


def test_a_long_delivery_is_cut_into_bounded_entries_in_order(tmp_path: Path) -> None:
    """A tmp file of 1,001 records (the last one cut short) becomes entries of at most ``chunk`` records, in order."""
    spool = Spool(tmp_path / "spool", chunk=100)
    w = spool.writer()
    w.write(b"".join(b"%d\n" % i for i in range(1000)) + b"partial")
    assert spool.deliver(w) == 11
    sizes = [len(e.records()) for e in iter_entries(spool)]
    assert sizes == [100] * 10 + [1]
    assert drain(spool) == [b"%d" % i for i in range(1000)] + [b"partial"]
    assert not [n for n in os.listdir(spool.tmp)]  # no pieces left behind


def test_a_writer_outliving_memex_keeps_its_file_until_it_ends(tmp_path: Path) -> None:
    """A child writing into a spool file after its parent was killed (-9): recover leaves the file while the child
    writes (it holds the inherited lock) and delivers every line once the child is gone."""
    spool = tmp_path / "spool"
    parent = subprocess.Popen(
        [sys.executable, "-c", (
            "import subprocess, sys, time\n"
            "from pathlib import Path\n"
            "from memex.state.spool import Spool\n"
            f"w = Spool(Path({str(spool)!r})).writer()\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time\\nfor i in range(100000):\\n"
            "    print(i, flush=True); time.sleep(0.002)'], stdout=w.fd, start_new_session=True)\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n"
        )],
        stdout=subprocess.PIPE, env=env(), text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        tmp = spool / "tmp"
        wait_until(lambda: any(p.stat().st_size > 100 for p in tmp.iterdir()), 30, "the child to write")
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert Spool(spool).recover() == (0, 0)  # the child still writes: not delivered yet
        assert not os.listdir(spool / "new")
    finally:
        os.kill(child, signal.SIGKILL)
    wait_until(lambda: Spool(spool).recover()[0] > 0, 30, "the file to be delivered once the child is gone")
    records = drain(Spool(spool))
    whole = [r for r in records if r.isdigit()]
    assert whole == [b"%d" % i for i in range(len(whole))] and len(whole) > 10


def test_two_claimants_never_get_the_same_entry(tmp_path: Path) -> None:
    """Two processes draining one spool at once: every record is taken by exactly one of them."""
    spool = Spool(tmp_path / "spool", chunk=5)
    for i in range(400):
        spool.add(b"%d\n" % i)
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        out.mkdir()
    code = (
        "import sys\nfrom pathlib import Path\nfrom memex.state.spool import Spool\n"
        "claim = Spool(Path(sys.argv[1])).claim()\n"
        "while (e := claim.next()) is not None:\n"
        "    for r in e.records():\n"
        "        (Path(sys.argv[2]) / r.decode()).write_bytes(r)\n"
        "    claim.remove([e])\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(spool.root), str(out)], env=env()) for out in outs]
    for p in procs:
        assert p.wait(60) == 0
    a, b = (set(os.listdir(out)) for out in outs)
    assert not a & b and a | b == {str(i) for i in range(400)}
    assert a and b  # both really took part


def test_a_dead_claimants_entries_are_taken_back(tmp_path: Path) -> None:
    """Entries claimed by a process killed with SIGKILL go back to new/ on the next recover, and nowhere before."""
    spool = Spool(tmp_path / "spool")
    for i in range(3):
        spool.add(b"%d\n" % i)
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\nfrom pathlib import Path\nfrom memex.state.spool import Spool\n"
            f"c = Spool(Path({str(spool.root)!r})).claim()\n"
            "c.next(); c.next(); print('held', flush=True); time.sleep(60)\n"
        )],
        stdout=subprocess.PIPE, env=env(), text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    assert spool.recover() == (0, 0)  # alive: its claims are its own
    assert drain(spool) == [b"2"]
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    assert spool.recover() == (0, 2)
    assert drain(spool) == [b"0", b"1"]
    assert os.listdir(spool.cur) == []


def test_kill_9_at_random_moments_loses_no_record(tmp_path: Path) -> None:
    """A drainer killed with SIGKILL at random moments while records keep arriving: after a clean run every record
    is stored, the spool is empty, and the store's create-only writes absorbed every replay.

    Eight drainers are held (a test hold) at a random record of their round's 300 and killed there, so each kill
    provably lands mid-drain; four more are let go and killed a random moment later, so kills land elsewhere too."""
    spool = Spool(tmp_path / "spool", chunk=5)
    out = tmp_path / "out"
    out.mkdir()
    rng = random.Random(7)
    sent = 0
    kills = 0
    for round_ in range(12):
        w = spool.writer()
        w.write(b"".join(b"%d\n" % i for i in range(sent, sent + 300)))
        spool.deliver(w)
        sent += 300
        gate = Gate(tmp_path, rng.randint(1, 300), name=f"gate{round_}")
        proc = subprocess.Popen([sys.executable, str(WORKER), str(spool.root), str(out)], stdout=subprocess.PIPE, env=gate.env(env()))
        gate.wait_held(proc)
        if round_ >= 8:
            gate.open()
            try:
                proc.wait(timeout=rng.uniform(0.0, 0.05))
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(30)
    assert kills >= 8
    clean = subprocess.run([sys.executable, str(WORKER), str(spool.root), str(out)], capture_output=True, env=env(), timeout=120)
    assert clean.stdout.strip() == b"done", clean.stderr
    assert sorted(os.listdir(out), key=int) == [str(i) for i in range(sent)]
    assert spool.stats().count == 0 and os.listdir(spool.cur) == []
