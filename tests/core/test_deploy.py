"""Scheduler recipes, tried as a new user would: generated from the config, and the generated commands really poll."""

from __future__ import annotations

import configparser
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memex import config
from memex.cli import recipes as deploy
from pollers.imessage import samples as imessage_samples
from tests.conftest import ROOT, file_objects, run_cli, write_config

EXAMPLE_CONFIG = """\
state_dir = "/home/me/.local/state/memex"
[sources.imessage]
type = "imessage"
db = "/home/me/Library/Messages/chat.db"
[sources.work-mail]
type = "imap"
host = "imap.example.com"
user = "me@example.com"
password_command = "pass show mail"
[sources.teams]
type = "teams"
[sources.old-archive]
type = "maildir"
path = "/home/me/Maildir"
enabled = false
"""


def test_crontab_example_is_what_memex_cron_prints(tmp_path: Path) -> None:
    """crontab.example is exactly `memex cron` for an example config (docs/deploy.md shows it): it cannot drift from the code."""
    path = tmp_path / "config.toml"
    path.write_text(EXAMPLE_CONFIG)
    cfg = config.load(path)
    text = deploy.crontab(cfg, Path("/home/me/.config/memex/config.toml"), deploy.Program(("/opt/memex/.venv/bin/memex",)), mailto="me")
    assert (ROOT / "crontab.example").read_text() == text


def test_cron_lines_follow_each_source_interval_and_skip_disabled(tmp_path: Path) -> None:
    """Each enabled source gets one line at its own interval (Teams every 5 minutes), with a budget that ends before the next start."""
    path = tmp_path / "config.toml"
    path.write_text(EXAMPLE_CONFIG.replace('host = "imap', 'interval = 120\nhost = "imap'))
    out = run_cli("cron", "--mailto", "ops@example.com", config=path)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln and not ln.startswith("#")]
    env = [ln for ln in lines if "=" in ln.split()[0]]
    jobs = [ln for ln in lines if ln not in env]
    assert env[0].startswith("PATH=" + str(Path(sys.executable).parent) + ":") and env[1] == "MAILTO=ops@example.com"
    assert [ln.split(" poll ")[1] for ln in jobs] == ["imessage --max-seconds 50", "teams --max-seconds 290", "work-mail --max-seconds 110"]
    assert [ln.split()[:5] for ln in jobs] == [["*"] * 5, ["*/5", "*", "*", "*", "*"], ["*/2", "*", "*", "*", "*"]]
    assert "old-archive" not in out.stdout and "flock" in out.stdout  # says why no flock wrapper is needed


@pytest.mark.parametrize(
    ("interval", "schedule", "nearest"),
    [(3600, "0 * * * *", None), (7200, "0 */2 * * *", None), (86400, "0 0 * * *", None), (300, "*/5 * * * *", None),
     (90, None, "interval = 60 or interval = 120"), (420, None, "interval = 360 or interval = 600"),
     (5400, None, "interval = 3600 or interval = 7200")],
    ids=["3600", "7200", "86400", "300", "90", "420", "5400"],
)  # fmt: skip
def test_cron_keeps_an_interval_exactly_or_refuses_it_naming_the_nearest(tmp_path: Path, interval: int, schedule: str | None,
                                                                         nearest: str | None) -> None:  # fmt: skip
    """An interval cron keeps exactly gets its schedule (86400: once a day at midnight, not `*/24`); any other is exit 2,
    one line naming the source's key and the nearest intervals cron keeps, never a silent rounding (`*/7` for 420 leaves a
    4-minute gap each hour).
    """
    cfg = write_config(tmp_path, {"mail": {"type": "maildir", "path": str(tmp_path / "Maildir"), "interval": interval}})
    out = run_cli("cron", config=cfg)
    if schedule is not None:
        assert out.returncode == 0 and out.stderr == "", out.stderr
        (job,) = [ln for ln in out.stdout.splitlines() if " poll " in ln and not ln.startswith("#")]
        assert " ".join(job.split()[:5]) == schedule
        return
    assert (out.returncode, out.stdout) == (2, ""), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "key 'sources.mail.interval'" in out.stderr
    assert f"every {interval} s exactly" in out.stderr and nearest in out.stderr


def test_a_generated_cron_line_polls_under_crons_bare_environment(tmp_path: Path) -> None:
    """The line runs as cron runs it (sh -c, empty environment but the crontab's PATH) from any folder, with a relative --config given to `memex cron`."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 7, seed=3)
    cfg_path = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db)}})
    out = subprocess.run([sys.executable, "-m", "memex", "--config", "config.toml", "cron"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.returncode == 0, out.stderr
    env = dict(ln.split("=", 1) for ln in out.stdout.splitlines() if ln[:1].isupper())
    (job,) = [ln for ln in out.stdout.splitlines() if ln.startswith("* * * * * ")]
    command = job.split(" ", 5)[5]
    assert str(cfg_path) in command  # the config path was made absolute
    run = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60, cwd="/",
                         env={"PATH": env["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert run.returncode == 0 and run.stdout == "" and run.stderr == ""  # quiet: cron mails nothing on success
    assert len(file_objects(tmp_path / "state" / "store")) == 7


def test_launchd_agent_is_a_valid_plist_that_polls(tmp_path: Path) -> None:
    """`memex launchd SOURCE` prints a property list whose ProgramArguments poll that source every `interval` seconds."""
    db = tmp_path / "chat.db"
    imessage_samples.build(db, 3, seed=5)
    cfg_path = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(db), "interval": 90}})
    out = run_cli("launchd", "imessage", "--log-dir", str(tmp_path / "logs"), config=cfg_path)
    assert out.returncode == 0, out.stderr
    agent = plistlib.loads(out.stdout.encode())
    assert agent["Label"] == "com.memex.poll.imessage" and agent["StartInterval"] == 90
    assert agent["StandardErrorPath"] == str(tmp_path / "logs" / "imessage.err.log")
    run = subprocess.run(agent["ProgramArguments"], capture_output=True, text=True, timeout=60, cwd="/",
                         env={**agent["EnvironmentVariables"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert len(file_objects(tmp_path / "state" / "store")) == 3


def test_launchd_write_names_the_binary_that_needs_full_disk_access(tmp_path: Path) -> None:
    """--write makes one agent per enabled source and, for chat.db, names the real interpreter to grant Full Disk Access."""
    cfg_path = write_config(tmp_path, {"imessage": {"type": "imessage", "db": str(tmp_path / "chat.db")},
                                       "mail": {"type": "maildir", "path": str(tmp_path / "Maildir")}})  # fmt: skip
    out = run_cli("launchd", "--write", str(tmp_path / "agents"), config=cfg_path)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "agents").iterdir()) == ["com.memex.poll.imessage.plist", "com.memex.poll.mail.plist"]
    assert f"grant it to {os.path.realpath(sys.executable)} " in out.stdout
    assert run_cli("launchd", config=cfg_path).returncode == 2  # printing several agents at once is a usage error


def test_launchd_example_matches_the_generator() -> None:
    """deploy/launchd's example agent has the keys the generator writes, so the documented file is one memex makes."""
    example = plistlib.loads((ROOT / "deploy" / "launchd" / "com.memex.poll.imessage.plist").read_bytes())
    cfg = config.parse({"sources": {"imessage": {"type": "imessage", "db": "/x"}}}, Path("/Users/me/.config/memex/config.toml"))
    made = plistlib.loads(deploy.launchd_plist(cfg, Path("/c"), deploy.Program(("/p",)), cfg.sources["imessage"], log_dir=Path("/l")))
    assert (
        sorted(example) == sorted(made)
        and example["Label"] == made["Label"]
        and example["ProgramArguments"][-4:] == made["ProgramArguments"][-4:]
    )


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(ROOT / "deploy" / "systemd" / name)
    return parser


def test_systemd_units_catch_up_spread_and_harden() -> None:
    """The timer catches up missed runs (Persistent) with a small random delay; the service is hardened and private by umask."""
    timer, service = _unit("memex-poll@.timer"), _unit("memex-poll@.service")
    assert timer["Timer"]["Persistent"] == "true" and 0 < int(timer["Timer"]["RandomizedDelaySec"]) <= 10
    svc = service["Service"]
    assert (svc["NoNewPrivileges"], svc["PrivateTmp"], svc["ProtectSystem"], svc["UMask"]) == ("true", "true", "strict", "0077")
    assert shlex.split(svc["ExecStart"])[1:3] == ["poll", "%i"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """`systemd-analyze --user verify` accepts an instance of both units with no warning (a misspelt key would warn)."""
    home, runtime = tmp_path / "home", tmp_path / "run"
    exe = home / ".local" / "memex" / ".venv" / "bin" / "memex"
    exe.parent.mkdir(parents=True)
    exe.symlink_to(shutil.which("memex") or sys.executable)
    runtime.mkdir(mode=0o700)
    for kind in ("service", "timer"):
        shutil.copy(ROOT / "deploy" / "systemd" / f"memex-poll@.{kind}", tmp_path / f"memex-poll@mail.{kind}")
    out = subprocess.run(["systemd-analyze", "--user", "--man=no", "verify", "memex-poll@mail.service", "memex-poll@mail.timer"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)})  # fmt: skip
    assert (out.returncode, out.stderr) == (0, "")


def test_the_watch_unit_is_a_hardened_long_lived_service_restarted_on_failure(tmp_path: Path) -> None:
    """memex-watch@.service runs `memex watch %i` for good: restarted after a failure, not after a clean stop or a config
    error (exit 2), hardened like the poll unit; `systemd-analyze verify` accepts it."""
    svc = _unit("memex-watch@.service")["Service"]
    assert shlex.split(svc["ExecStart"])[1:3] == ["watch", "%i"]
    assert (svc["Type"], svc["Restart"], svc["RestartPreventExitStatus"]) == ("exec", "on-failure", "2")
    assert (svc["NoNewPrivileges"], svc["PrivateTmp"], svc["ProtectSystem"], svc["UMask"]) == ("true", "true", "strict", "0077")
    if shutil.which("systemd-analyze") is None:
        return
    home, runtime = tmp_path / "home", tmp_path / "run"
    exe = home / ".local" / "memex" / ".venv" / "bin" / "memex"
    exe.parent.mkdir(parents=True)
    exe.symlink_to(shutil.which("memex") or sys.executable)
    runtime.mkdir(mode=0o700)
    shutil.copy(ROOT / "deploy" / "systemd" / "memex-watch@.service", tmp_path / "memex-watch@mail.service")
    out = subprocess.run(["systemd-analyze", "--user", "--man=no", "verify", "memex-watch@mail.service"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)})  # fmt: skip
    assert (out.returncode, out.stderr) == (0, "")


def _manifests() -> list[dict[str, Any]]:
    import yaml

    return [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "memex.yaml").read_text()) if d]


def test_kubernetes_manifests_pass_the_cronjob_schema_and_reject_a_typo() -> None:
    """Every object validates against Kubernetes' own schema (strict: unknown keys fail); a misspelt key is caught."""
    import kubernetes_validate

    docs = _manifests()
    assert sorted({d["kind"] for d in docs}) == ["ConfigMap", "CronJob", "Secret"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
    job = next(d for d in docs if d["kind"] == "CronJob")
    job["spec"]["concurrencyPolice"] = job["spec"].pop("concurrencyPolicy")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.30.0", strict=True)


def test_kubernetes_cronjobs_match_the_config_they_mount() -> None:
    """The ConfigMap is a valid memex config with state on S3; each CronJob polls a configured source, once at a time, at its interval."""
    docs = _manifests()
    data = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["config.toml"]
    cfg = config.parse(tomllib.loads(data), Path("/etc/memex/config.toml"))
    assert cfg.state_url is not None and cfg.state_url.startswith("s3://") and cfg.store.url.startswith("s3://")
    jobs = [d for d in docs if d["kind"] == "CronJob"]
    assert jobs
    for job in jobs:
        spec = job["spec"]
        (container,) = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        args = container["args"]
        source = cfg.source(args[args.index("poll") + 1])
        assert spec["concurrencyPolicy"] == "Forbid"
        assert spec["schedule"] == deploy.cron_schedule(source.interval)
        assert args[-2:] == ["--max-seconds", str(deploy.max_seconds(source.interval))]
        secret_vars = {k for d in docs if d["kind"] == "Secret" for k in d["stringData"]}
        assert {source.options.get("password_env")} - {None} <= secret_vars
