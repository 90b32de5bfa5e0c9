"""The safety tests can fail: each one is run against a copy of memex with one safety mechanism undone.

For every mutant, a copy of ``memex/`` and ``pollers/`` gets one textual change that brings back a
naive version (cursor saved before the data, no lock, corrupt state read as empty, ...), and the test
that guards that property is run against the copy (first on PYTHONPATH, so the CLI subprocesses use it
too). The test must fail. If the text a mutation targets is no longer in the source, this test fails
too, so the list cannot silently rot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

MUTANTS = [
    pytest.param(
        "memex/runner.py",
        [("            _check_direction(poller, name, current, batch, log, result)\n",
          "            _check_direction(poller, name, current, batch, log, result)\n            current = batch.cursor\n            commit(current)\n"),
         ("current = batch.cursor if finished and handled == len(batch.items) else batch.after(handled, current)\n",
          "current = batch.cursor\n")],
        ["tests/core/test_poll.py::test_upload_failure_mid_batch_stops_the_cursor_before_it",
         "tests/core/test_poll.py::test_kill_9_at_random_moments_loses_nothing_and_duplicates_nothing"],
        id="cursor-saved-before-data",
    ),
    pytest.param(
        "memex/state/locks.py",
        [("    fd = lock_exclusive(path, timeout)\n    if fd is None:\n        raise LockTimeout(path, timeout)\n", "    fd = _open_lock_file(path)\n")],
        ["tests/core/test_cursors.py::test_five_processes_lose_no_update"],
        id="cursor-store-without-lock",
    ),
    pytest.param(
        "memex/state/cursors.py",
        [('        raise StateError(f"corrupt cursors file', '        return {}\n        raise StateError(f"corrupt cursors file')],
        ["tests/core/test_poll.py::test_corrupt_cursors_file_stops_the_poll_and_is_untouched"],
        id="corrupt-cursors-read-as-empty",
    ),
    pytest.param(
        "memex/runner.py",
        [("    if current is None:\n        return\n    before, after", "    return\n    before, after")],
        ["tests/core/test_poll.py::test_a_poller_moving_its_cursor_backward_is_refused"],
        id="backward-cursor-allowed",
    ),
    pytest.param(
        "memex/state/cursors.py",
        [("            if current != expected:\n", "            if False:\n")],
        ["tests/core/test_cursors.py::test_advance_is_compare_and_swap"],
        id="no-compare-and-swap",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [("                if cursor:\n                    reason = self._identity_changed(conn, cursor)",
          "                if False:\n                    reason = self._identity_changed(conn, cursor)")],
        ["tests/imessage/test_imessage.py::test_replaced_chat_db_with_lower_rowids_costs_no_message",
         "tests/imessage/test_imessage.py::test_rebuilt_chat_db_costs_no_message"],
        id="no-chat-db-rebuild-detection",
    ),
    pytest.param(
        "memex/s3/bucket.py",
        [('extra = {"IfNoneMatch": "*"} if create_only else {}', "extra: dict[str, str] = {}")],
        ["tests/core/test_s3lean.py::test_boto3_stays_selectable"],
        id="s3-put-without-if-none-match",
    ),
    pytest.param(
        "memex/s3/lean.py",
        [('            headers["if-none-match"] = "*"\n', "")],
        ["tests/core/test_objectstore.py::test_s3_store_create_only_over_http"],
        id="s3-lean-put-without-if-none-match",
    ),
    pytest.param(
        "memex/store/files.py",
        [("        path = self._path(key)\n        with self._dirty_lock:\n            if path in self._pending:\n                return False\n"
          "        if os.path.lexists(path):\n            reason = _damage(path, len(body), json_object=key.endswith(\".json\"))\n"
          "            if reason is None:\n                self._written_elsewhere(path)\n                return False\n"
          "            self._repair(key, body, reason)\n            return True\n        tmp = self._temp_file",
          "        path = self._path(key)\n        tmp = self._temp_file"),
         ("            if path in self._pending:  # another thread", "            if False:  # another thread"),
         ("                    os.link(tmp, path)\n", "                    os.replace(tmp, path)\n")],
        ["tests/core/test_objectstore.py::test_file_store_is_create_only"],
        id="file-store-write-temp-and-rename",
    ),
    pytest.param(
        "memex/runner.py",
        [("    uploader = Uploader(cfg, name, log, deadline=deadline)\n",
          "    uploader = Uploader(cfg, name, log, deadline=deadline)\n    uploader.store.get('messages/probe')  # a startup check, as a naive poller might do\n")],
        ["tests/core/test_poll.py::test_idle_poll_makes_no_s3_request_and_imports_no_boto3"],
        id="idle-poll-opens-the-store",
    ),
    pytest.param(
        "memex/s3/lean.py",
        [('condition = {"if-none-match": "*"} if etag is None else {"if-match": etag}', 'condition = {"if-none-match": "*"} if etag is None else {}')],
        ["tests/core/test_s3state.py::test_concurrent_writers_of_one_source_lose_no_update[moto]"],
        id="s3-cursor-put-without-if-match",
    ),
    pytest.param(
        "memex/state/s3state.py",
        [("            if self.epoch is not None and isinstance(stored_epoch, int) and stored_epoch > self.epoch:\n",
          "            if False:\n")],
        ["tests/core/test_s3state.py::test_a_holder_paused_past_its_ttl_is_fenced_and_the_new_holder_wins"],
        id="lease-without-fencing-epoch",
    ),
    pytest.param(
        "memex/state/s3state.py",
        [("            if attempt and before.get(\"write_id\") == write_id:\n", "            if False:\n")],
        ["tests/core/test_s3state.py::test_a_lost_response_to_a_landed_write_is_recognised_not_reapplied"],
        id="s3-cas-retry-reapplies-a-landed-write",
    ),
    pytest.param(
        "memex/state/s3lease.py",
        [("            age=got.age,\n", "            age=__import__(\"time\").time() - got.last_modified,\n")],
        ["tests/core/test_s3state.py::test_a_host_whose_clock_is_far_ahead_does_not_steal_a_live_lease"],
        id="lease-expiry-by-the-host-clock",
    ),
    pytest.param(
        "pollers/email/maildir/poller.py",
        [('                state = {"folders": {**folders, folder: {"ctime_ns": after, "names": sorted(names), **extra}}}\n',
          '                state = {**folders, folder: {"ctime_ns": after, "names": sorted(names), **extra}}\n')],
        ["tests/core/test_runner_faults.py::test_maildir_poll_stopped_by_its_deadline_mid_batch_resumes_exactly"],
        id="maildir-item-cursor-without-folders",
    ),
    pytest.param(
        "memex/advance.py",
        [("                positions = trusted_positions(self.poller, self.name, committed, current, declared_reset=self.declared_reset())\n",
          "                positions = self.poller.positions(current)\n")],
        ["tests/core/test_runner_faults.py::test_a_cursor_the_runner_cannot_trust_is_refused_loudly_and_never_saved"],
        id="runner-saves-any-cursor",
    ),
    pytest.param(
        "memex/records.py",
        [("        return repair_text(text).encode() + b\"\\n\"\n", "        raise\n")],
        ["tests/core/test_record_faults.py::test_maildir_mail_decoding_to_lone_surrogates_is_stored_and_the_rest_goes_on",
         "tests/core/test_record_faults.py::test_imap_mail_decoding_to_lone_surrogates_does_not_stop_the_mailboxes_after_it"],
        id="lone-surrogates-crash-the-poll",
    ),
    pytest.param(
        "memex/uploader.py",
        [("            except Exception as exc:\n                item = unrenderable(item, exc)\n",
          "            except ZeroDivisionError as exc:\n                item = unrenderable(item, exc)\n")],
        ["tests/core/test_record_faults.py::test_a_record_that_cannot_be_serialised_is_quarantined_with_its_bytes"],
        id="unrenderable-record-stops-the-poll",
    ),
    pytest.param(
        "memex/observe/dashboard_view.py",
        [('        if col in ("SOURCE", "STATE") or used + cost <= width:\n', "        if True:\n")],
        ["tests/core/test_dashboard_fit.py::test_fits_80x24_with_names_states_ages_and_the_last_error"],
        id="dashboard-shows-every-column-at-80",
    ),
    pytest.param(
        "memex/observe/follow.py",
        [("            self._open_oldest()\n", "            self._open_live(from_end=False)\n")],
        ["tests/core/test_tail.py::test_follower_started_before_the_log_existed_reads_the_files_rotated_before_its_first_read"],
        id="follower-starts-from-the-live-file",
    ),
    pytest.param(
        "pollers/imessage/rows.py",
        [("pollers/imessage/poller.py", "read failed ({describe_exc(exc)}); the next poll tries again", "read failed ({exc}); the next poll tries again"),
         ("    except sqlite3.OperationalError:\n        conn.text_factory = tolerant_text\n",
          "    except ZeroDivisionError:\n        conn.text_factory = tolerant_text\n")],
        ["tests/core/test_record_faults.py::test_a_database_error_quoting_message_text_reaches_no_output"],
        id="sqlite-message-in-the-log",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [("                return numbered(cursor, items, partial(cursor, walk, self.settings.overlap_us))\n",
          "                return numbered(cursor, items, advanced(cursor, walk, self.settings.overlap_us))\n"),
         ("                at = partial(cursor, walk, self.settings.overlap_us)\n", "                at = advanced(cursor, walk, self.settings.overlap_us)\n")],
        ["tests/teams/test_teams.py::test_kill_9_mid_walk_then_rerun_stores_every_message_once"],
        id="teams-chat-cursor-saved-per-page",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [("        walk.next_url = nxt if isinstance(nxt, str) else None\n", "        walk.next_url = None\n")],
        ["tests/teams/test_teams.py::test_first_sync_walks_every_chat_through_its_pages"],
        id="teams-nextlink-not-followed",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [("                prev = (cursor.get(kind) or {}).get(chat[\"id\"])\n",
          "                prev = (cursor.get(kind) or {}).get(chat[\"id\"]) or next(iter((cursor.get(kind) or {}).values()), None)\n")],
        ["tests/teams/test_teams.py::test_chat_created_between_polls_is_walked_from_its_start"],
        id="teams-one-cursor-for-every-chat",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [("        stored_before = since is not None and (", "        stored_before = False and (")],
        ["tests/teams/test_teams.py::test_incremental_poll_stores_new_messages_and_changes_as_revisions"],
        id="teams-change-stored-as-a-new-original",
    ),
    pytest.param(
        "memex/http_client.py",
        [("        return retry_after\n", "        return 0.0\n")],
        ["tests/teams/test_teams.py::test_throttling_is_waited_out_within_the_deadline"],
        id="teams-retry-after-ignored",
    ),
    pytest.param(
        "pollers/teams/graph.py",
        [("        at = _http_date(text)\n", "        at = None\n")],
        ["tests/teams/test_teams.py::test_throttling_with_an_http_date_is_waited_out_or_fails_the_chat_in_time"],
        id="teams-retry-after-date-ignored",
    ),
    pytest.param(
        "pollers/teams/graph.py",
        [("                if refreshed:\n", "                if True:\n")],
        ["tests/teams/test_teams.py::test_expired_access_token_is_refreshed_silently"],
        id="teams-401-without-a-refresh",
    ),
    pytest.param(
        "pollers/teams/graph.py",
        [('"Microsoft Graph refused the refreshed token (401)"', 'f"Microsoft Graph refused the refreshed token {self._bearer} (401)"')],
        ["tests/teams/test_teams.py::test_401_after_a_silent_refresh_is_the_run_memex_auth_line"],
        id="teams-token-in-the-error-line",
    ),
    pytest.param(
        "pollers/teams/channels.py",
        [('    return {"t": t, "seen": sorted(f"{mid}@{at}" for mid, at in seen.items() if at > t - overlap), "delta": delta}\n',
          '    return {"t": 0, "seen": [], "delta": delta}\n')],
        ["tests/teams/test_teams.py::test_start_now_with_channels_stores_only_what_comes_later"],
        id="teams-channel-head-without-its-position",
    ),
    pytest.param(
        "pollers/teams/channels.py",
        [("            yield from chain(poller, root)\n", "")],
        ["tests/teams/test_teams.py::test_backfill_reads_channels_whole_within_since_until"],
        id="teams-channel-backfill-without-replies",
    ),
    pytest.param(
        "pollers/teams/channels.py",
        [("        for page, _next, _delta in poller.graph.pages(more):\n", "        for page in ():\n")],
        ["tests/teams/test_teams.py::test_backfill_reads_channels_whole_within_since_until"],
        id="teams-replies-past-the-inline-ones-dropped",
    ),
    pytest.param(
        "pollers/teams/session.py",
        [("        if src is not None:\n", "        if src is not None:\n            return src\n")],
        ["tests/teams/test_teams.py::test_channel_inline_images_are_fetched_from_graph_url"],
        id="teams-image-src-used-as-is",
    ),
    pytest.param(
        "pollers/teams/render.py",
        [("f\"reactions-{reactions_digest(msg.get('reactions'))}\"", "f\"reactions-{modified}\"")],
        ["tests/teams/test_teams.py::test_incremental_poll_stores_new_messages_and_changes_as_revisions"],
        id="teams-reaction-bump-without-a-change-is-a-revision",
    ),
    pytest.param(
        "pollers/teams/history.py",
        [("                    yield Item(cursor=mark, failure=failure)\n", "")],
        ["tests/teams/test_teams.py::test_a_message_without_id_or_created_time_is_quarantined_and_the_walk_goes_on"],
        id="teams-history-skips-a-message-without-id-silently",
    ),
    pytest.param(
        "memex/uploader.py",
        [("                if item.contents:  # the record names where the bytes went (sha256, size): render it again\n                    body = message.to_json()\n", "")],
        ["tests/teams/test_teams.py::test_system_messages_images_and_files"],
        id="record-written-without-its-attachments-sha256",
    ),
    pytest.param(
        "memex/observe/health.py",
        [('    if live and live[-1].get("status") == "error" and live[-1].get("auth_required"):\n', "    if False:\n")],
        ["tests/teams/test_teams.py::test_revoked_login_says_run_memex_auth"],
        id="expired-login-not-shown-in-status",
    ),
    pytest.param(
        "pollers/teams/graph.py",
        [("        if not self._ours(url):\n", "        if False:\n")],
        ["tests/teams/test_teams.py::test_the_token_never_leaves_the_graph_url"],
        id="teams-token-sent-to-any-link",
    ),
    pytest.param(
        "memex/s3/lean.py",
        [("                conn.sock.settimeout(self.deadline.timeout(self.read_timeout, label))\n", "                conn.sock.settimeout(self.read_timeout)\n"),
         ("                with self.deadline.guard(functools.partial(conn.sock.shutdown, socket.SHUT_RDWR)):\n", "                if True:\n")],
        ["tests/core/test_deadline.py::test_sigterm_ends_a_poll_stuck_in_an_s3_request_within_seconds[lean]"],
        id="s3-lean-request-deaf-to-the-deadline",
    ),
    pytest.param(
        "memex/s3/bucket.py",
        [("        return self.deadline.call(call, label)\n", "        return call()\n")],
        ["tests/core/test_deadline.py::test_sigterm_ends_a_poll_stuck_in_an_s3_request_within_seconds[boto3]"],
        id="s3-boto3-request-deaf-to-the-deadline",
    ),
    pytest.param(
        "pollers/email/imap/session.py",
        [('        return self._deadline.call(call, f"source {self.name!r}: {what} at {self._where()}", abandon=self._abandon)\n',
          "        return call()\n")],
        ["tests/core/test_deadline.py::test_sigterm_ends_a_poll_waiting_on_a_hung_imap_server_within_seconds"],
        id="imap-exchange-deaf-to-the-deadline",
    ),
    pytest.param(
        "memex/live_cursor.py",
        [('    if section.get("cursor_set_reason"):\n', "    if False:\n")],
        ["tests/core/test_start_now.py::test_reset_then_poll_reads_from_the_beginning[imessage]"],
        id="start-now-after-a-reset-jumps-to-the-head",
    ),
    pytest.param(
        "memex/live_cursor.py",
        [("    if isinstance(backfill, dict):\n        start, event", "    if False:\n        start, event")],
        ["tests/core/test_start_now.py::test_first_live_poll_after_a_backfill_starts_where_the_walk_began[imessage]"],
        id="start-now-after-a-backfill-jumps-to-the-head",
    ),
    pytest.param(
        "memex/oauth/store.py",
        [("        if not sign_in and read(path) != expect:\n", "        if False:\n")],
        ["tests/teams/test_teams.py::test_a_poll_never_overwrites_a_newer_sign_in"],
        id="teams-poll-overwrites-a-newer-login",
    ),
    pytest.param(
        "pollers/teams/graph.py",
        [("            timeout = self.deadline.timeout(self.timeout, what)\n", "            timeout = self.timeout\n"),
         ("                resp = self.deadline.call(send, what, abandon=self._abandon)\n", "                resp = send()\n")],
        ["tests/teams/test_teams.py::test_a_poll_out_of_time_stops_its_walk_cleanly",
         "tests/teams/test_teams.py::test_sigterm_mid_walk_ends_the_poll_within_seconds_with_progress_saved"],
        id="teams-requests-deaf-to-the-deadline",
    ),
    pytest.param(
        "pollers/imessage/rows.py",
        [("    except sqlite3.OperationalError:\n        conn.text_factory = tolerant_text\n",
          "    except ZeroDivisionError:\n        conn.text_factory = tolerant_text\n")],
        ["tests/imessage/test_imessage_faults.py::test_invalid_utf8_in_one_row_affects_that_row_only_and_is_kept"],
        id="invalid-utf8-fails-the-batch",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [('            recent = spread_anchors([[r["ROWID"], r["guid"]], *recent])\n',
          '            recent = [[r["ROWID"], r["guid"]], *recent][:ANCHORS]\n')],
        ["tests/imessage/test_imessage_faults.py::test_deleting_the_conversation_of_the_newest_messages_is_not_a_rebuild"],
        id="anchors-only-the-newest",
    ),
    pytest.param(
        "memex/backfill/run.py",
        [("        on_stop = Deadline(None, self.stop)\n", "        on_stop = Deadline()\n")],
        ["tests/core/test_deadline.py::test_sigterm_ends_a_backfill_stuck_on_a_hung_s3_within_seconds"],
        id="backfill-uploads-deaf-to-sigterm",
    ),
    pytest.param(
        "memex/store/files.py",
        [("            self._dirty_files.add(path)\n", "            pass\n")],
        ["tests/core/test_filestore_safety.py::test_an_object_found_already_there_is_made_durable_before_it_is_counted_past"],
        id="file-store-counts-past-an-object-it-never-made-durable",
    ),
    pytest.param(
        "memex/state/files.py",
        [("            folder.mkdir(mode=DIR_MODE)\n", "            folder.mkdir()\n"),
         ("        os.chmod(folder, DIR_MODE)  # the umask may have removed bits we want; never adds any\n", "")],
        ["tests/core/test_filestore_safety.py::test_every_store_folder_is_private_under_umask_000"],
        id="store-folders-follow-the-umask",
    ),
    pytest.param(
        "memex/store/files.py",
        [("            if mode & 0o022:\n", "            if False:\n")],
        ["tests/core/test_filestore_safety.py::test_a_store_folder_other_users_can_write_is_refused"],
        id="world-writable-store-accepted",
    ),
    pytest.param(
        "memex/observe/health.py",
        [("        if replayed:\n", "        if True:\n")],
        ["tests/core/test_health.py::test_duplicates_met_by_a_moving_cursor_are_normal_but_a_replay_is_stuck"],
        id="any-duplicate-is-stuck",
    ),
    pytest.param(
        "memex/observe/status.py",
        [("        problem = config_problem(source) if source.enabled else None\n", "        problem = None\n")],
        ["tests/core/test_status.py::test_a_broken_source_section_is_config_not_stale"],
        id="broken-section-shown-as-stale",
    ),
    pytest.param(
        "memex/state/backend.py",
        [("    if deadline is not None:\n        state.use_deadline(deadline)\n", "")],
        ["tests/core/test_deadline.py::test_hung_s3_state_ends_the_poll_soon_after_max_seconds"],
        id="s3-state-requests-deaf-to-the-deadline",
    ),
    pytest.param(
        "pollers/email/mail/parts.py",
        [('        if part.get_content_maintype() == "message" and part.is_multipart():\n            self.found.leaves += 1\n',
          '        if False:\n            self.found.leaves += 1\n')],
        ["tests/email/test_email_render.py::test_attached_message_is_one_attachment_and_its_text_is_searchable",
         "tests/email/test_email_corpus.py::test_record_matches_pythons_parser"],
        id="attached-message-walked-into",
    ),
    pytest.param(
        "memex/config.py",
        [("    return path.parent.absolute() if path is not None else Path.cwd()\n", "    return path.parent if path is not None else Path.cwd()\n")],
        ["tests/core/test_cli_errors.py::test_relative_config_and_state_dir_work_from_the_config_folder"],
        id="relative-config-folder",
    ),
    pytest.param(
        "memex/live_cursor.py",
        [("    problem = can.validate_cursor(cursor) if can.validate_cursor is not None else None\n", "    problem = None\n")],
        ["tests/core/test_cli_errors.py::test_a_cursor_given_by_hand_is_checked"],
        id="cursor-set-accepts-any-shape",
    ),
    pytest.param(
        "pollers/email/imap/poller.py",
        [("                refused = self._still_listed(chunk, {uid for uid, _, _ in fetched})\n", "                refused = []\n")],
        ["tests/email/test_imap_mailboxes.py::test_a_uid_the_fetch_leaves_out_is_never_skipped"],
        id="imap-uid-left-out-of-fetch-skipped",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [("                    return self._changes(conn, cursor, changed, limit) if cursor else Batch(items=[], cursor=cursor)\n",
          "                    return Batch(items=[], cursor=cursor)\n")],
        ["tests/imessage/test_imessage_edits.py::test_an_edit_and_an_unsend_on_a_live_database_become_revisions_of_untouched_originals"],
        id="imessage-rowid-cursor-never-sees-edits",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [('        since = min(top, int(cursor.get("checked", top)))\n', "        since = top\n")],
        ["tests/imessage/test_imessage_edits.py::test_an_edit_followed_by_a_backlog_longer_than_the_window_is_not_lost"],
        id="imessage-edit-window-only-the-newest-rows",
    ),
    pytest.param(
        "pollers/imessage/edits.py",
        [("            original = replace(message, text=next(iter(first.values())).text, edited_at=None)\n", "            pass\n")],
        ["tests/imessage/test_imessage_edits.py::test_an_edit_made_while_memex_was_off_keeps_the_first_version_as_the_original"],
        id="imessage-original-is-the-latest-edit",
    ),
    pytest.param(
        "pollers/email/maildir/poller.py",
        [("            if ahead is None and after > horizon:\n", "            if False:\n")],
        ["tests/email/test_maildir.py::test_a_cursor_ahead_of_the_clock_loses_no_mail"],
        id="maildir-cursor-ahead-of-the-clock-trusted",
    ),
    pytest.param(
        "pollers/email/maildir/poller.py",
        [("        if listing is None or listing.resume is None or cursor != listing.resume:\n", "        if True:\n")],
        ["tests/email/test_maildir.py::test_a_poll_lists_the_maildir_once_however_many_batches"],
        id="maildir-listing-per-batch",
    ),
    pytest.param(
        "pollers/email/imap/poller.py",
        [("            except MailboxError as exc:\n", "            except ZeroDivisionError as exc:\n")],
        ["tests/email/test_imap_mailboxes.py::test_a_mailbox_that_cannot_be_opened_does_not_stop_the_others"],
        id="imap-one-bad-mailbox-stops-all",
    ),
    pytest.param(
        "memex/state/spool.py",
        [("                    taken += _give_back(folder, self.new)\n", "                    pass\n")],
        ["tests/core/test_spool.py::test_kill_9_at_random_moments_loses_no_record"],
        id="spool-dead-claims-never-taken-back",
    ),
    pytest.param(
        "memex/state/spool.py",
        [("                if _try_lock(fd):\n                    delivered += self._deliver(path, fd)\n",
          "                if True:\n                    delivered += self._deliver(path, fd)\n")],
        ["tests/core/test_spool.py::test_a_writer_outliving_memex_keeps_its_file_until_it_ends"],
        id="spool-delivers-a-file-still-being-written",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [("                if self.attachment_contents:\n", "                if False:\n")],
        ["tests/imessage/test_imessage_attachments.py::test_the_same_photo_in_two_messages_is_stored_once_and_a_missing_file_is_recorded"],
        id="imessage-attachments-metadata-only",
    ),
    pytest.param(
        "memex/s3/multipart.py",
        [('MultipartUpload={"Parts": parts}, IfNoneMatch="*"', 'MultipartUpload={"Parts": parts}')],
        ["tests/core/test_revisions_attachments.py::test_a_large_attachment_goes_up_in_parts_create_only"],
        id="multipart-upload-overwrites",
    ),
    pytest.param(
        "memex/store/attachments.py",
        [("        while chunk := f.read(CHUNK):\n", "        while chunk := f.read():\n")],
        ["tests/imessage/test_imessage_attachments.py::test_a_huge_attachment_is_streamed_without_raising_peak_memory"],
        id="attachment-hashed-whole-in-memory",
    ),
    pytest.param(
        "memex/state/files.py",
        [("            shutil.copyfileobj(src, dst, 1 << 20)\n", "            dst.write(src.read())\n")],
        ["tests/imessage/test_imessage_attachments.py::test_a_huge_attachment_is_streamed_without_raising_peak_memory"],
        id="attachment-copied-whole-in-memory",
    ),
    pytest.param(
        "pollers/imessage/rows.py",
        [("            text = salvage_text(bytes(body))\n", "            text = None\n")],
        ["tests/imessage/test_imessage_faults.py::test_a_truncated_attributed_body_keeps_its_blob_and_the_readable_start"],
        id="truncated-typedstream-text-thrown-away",
    ),
    pytest.param(
        "pollers/signal/cli.py",
        [("                self._records = deque(self._entry.records())\n",
          "                self._records = deque(self._entry.records())\n                self._entry.path.unlink()\n")],
        ["tests/signal/test_signal.py::test_a_poll_killed_before_its_store_sync_keeps_every_spooled_message"],
        id="signal-spool-entry-removed-before-it-is-stored",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [('        author = (self.me if is_me else None) or row["author"] or doc.get("sourceServiceId")\n',
          '        author = (self.me if is_me else None) or doc.get("source") or row["author"]\n')],
        ["tests/signal/test_signal_desktop.py::test_a_live_message_and_the_same_message_from_desktop_are_one_object"],
        id="signal-desktop-native-id-by-phone-number",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [("        own = native_id(author, sent)\n", '        own = native_id(author, int(doc["received_at"]))\n')],
        ["tests/signal/test_signal_desktop.py::test_a_live_message_and_the_same_message_from_desktop_are_one_object"],
        id="signal-desktop-native-id-by-received-at",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [("        author = (self.me if is_me else None) or ", "        author = ")],
        ["tests/signal/test_signal_desktop.py::test_desktop_rows_become_the_live_pollers_records"],
        id="signal-desktop-outgoing-author-not-own-aci",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [("        first = next(", "        first = 0 if history else next(")],
        ["tests/signal/test_signal_desktop.py::test_desktop_rows_become_the_live_pollers_records"],
        id="signal-desktop-edited-message-stored-as-its-newest-version",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [('            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()\n', "")],
        ["tests/signal/test_signal_desktop.py::test_a_wrong_key_or_password_is_one_clear_line_and_nothing_is_written"],
        id="signal-desktop-wrong-key-not-told",
    ),
    pytest.param(
        "pollers/signal/desktop_files.py",
        [("    if version < 2 or not local_key:\n", "    if True:\n")],
        ["tests/signal/test_signal_desktop.py::test_desktop_rows_become_the_live_pollers_records"],
        id="signal-desktop-attachment-stored-encrypted",
    ),
    pytest.param(
        "pollers/email/imap/session.py",
        [("            context = ssl.create_default_context(cafile=s.ca_file)\n", "            context = ssl._create_unverified_context()\n")],
        ["tests/email/test_imap_tls.py::test_a_certificate_not_trusted_is_refused_with_a_clear_error"],
        id="imap-tls-certificate-not-verified",
    ),
    pytest.param(
        "memex/store/files.py",
        [("                sync_files(list(pending.values()), method)\n", "                pass\n")],
        ["tests/core/test_filestore_safety.py::test_a_cursor_never_passes_an_object_that_is_not_durable"],
        id="file-store-links-names-before-their-bytes-are-durable",
    ),
    pytest.param(
        "memex/store/files.py",
        [("            fsync_dir(d)\n", "            pass\n")],
        ["tests/core/test_filestore_safety.py::test_a_cursor_never_passes_an_object_that_is_not_durable"],
        id="file-store-cursor-saved-before-folder-entries-are-durable",
    ),
    pytest.param(
        "memex/uploader.py",
        [("                    if self._stored_already(item, key, mine):\n", "                    if True:\n")],
        ["tests/email/test_email_collisions.py::test_two_different_mails_with_one_message_id_are_both_stored_and_findable"],
        id="reused-message-id-collapses-two-mails",
    ),
    pytest.param(
        "pollers/email/mail/identity.py",
        [('        _addresses(msg, "To", known),\n        _addresses(msg, "Cc", known),\n', "")],
        ["tests/email/test_email_collisions.py::test_real_mails_sharing_an_id_that_differ_in_recipients_or_parts_are_both_kept"],
        id="mail-fingerprint-without-recipients",
    ),
    pytest.param(
        "pollers/email/mail/identity.py",
        [("        _parts(msg, body, headers=False)\n", "        pass\n")],
        ["tests/email/test_email_collisions.py::test_real_mails_sharing_an_id_that_differ_in_recipients_or_parts_are_both_kept"],
        id="mail-fingerprint-without-parts",
    ),
    pytest.param(
        "memex/store/collisions.py",
        [("    if refingerprint is not None and blob_suffix is not None:\n", "    if False:\n")],
        ["tests/email/test_email_collisions.py::test_an_index_stored_under_the_earlier_fingerprint_rule_is_not_doubled"],
        id="old-index-fingerprint-not-recomputed",
    ),
    pytest.param(
        "memex/uploader.py",
        [("        return any(ours(collision_key(key, fp))", "        return False and any(ours(collision_key(key, fp))")],
        ["tests/email/test_email_collisions.py::test_an_index_stored_under_the_earlier_fingerprint_rule_is_not_doubled"],
        id="old-index-collision-key-not-searched",
    ),
    pytest.param(
        "memex/cli/common.py",
        [("        require_state_dir(cfg.state_dir)\n    return cfg\n", "    return cfg\n"),
         # the generic translation of a file-system fault (memex/fs_errors.py) now catches the same fault further down:
         # undone too, so the row still shows the folder check is what names it
         ("memex/error_lines.py", "    fault = explain(exc)\n    if fault is not None:\n        return str(fault)\n", "    fault = None\n")],
        ["tests/core/test_cli_errors.py::test_an_unusable_state_folder_is_one_line_for_every_command[tail]",
         "tests/core/test_cli_errors.py::test_an_unusable_state_folder_is_one_line_for_every_command[dashboard-once]"],
        id="tail-and-dashboard-trust-the-state-folder",
    ),
    pytest.param(
        "memex/error_lines.py",
        [('    return f"internal error: {type(exc).__name__}{where}; please report',
          '    return f"internal error: {type(exc).__name__}: {exc}{where}; please report')],
        ["tests/core/test_record_faults.py::test_a_library_exception_quoting_a_record_reaches_no_output"],
        id="internal-error-quotes-the-library-message",
    ),
    pytest.param(
        "pollers/email/mail/parts.py",
        [("        name = _shadow(part).get_filename()\n", "        name = part.get_filename()\n")],
        ["tests/email/test_email_render.py::test_raw_8bit_filename_is_an_attachment_not_a_quarantine"],
        id="email-header-object-taken-for-text",
    ),
    pytest.param(
        "pollers/email/mail/parts.py",
        [("            text = segment if text is None else text + SEPARATOR + segment\n",
          "            text = segment if text is None else text\n")],
        ["tests/email/test_email_render.py::test_later_inline_text_parts_are_appended_with_a_separator"],
        id="email-only-the-first-text-part",
    ),
    pytest.param(
        "pollers/email/mail/headers.py",
        [("    pieces: list[str | tuple[str, bytes]] = []", "    return value\n    pieces: list[str | tuple[str, bytes]] = []")],
        ["tests/email/test_email_render.py::test_encoded_words_in_broken_charsets_are_decoded_best_effort"],
        id="email-broken-charset-words-kept-raw",
    ),
    pytest.param(
        "pollers/email/mail/headers.py",
        [("    if not any(_GOOD_ADDR_RE.match(addr) for _, addr in out):\n", "    if False:\n")],
        ["tests/email/test_email_render.py::test_malformed_from_falls_back_to_the_first_address_in_it"],
        id="email-malformed-from-taken-as-parsed",
    ),
    pytest.param(
        "pollers/email/imap/session.py",
        [("        if uidnext is None:\n            return sorted(u for u in self._search_range(f\"{first}:*\", criteria) if u >= first)\n",
          "        if True:\n            return sorted(u for u in self._search_range(f\"{first}:*\", criteria) if u >= first)\n")],
        ["tests/email/test_imap_mailboxes.py::test_a_mailbox_of_200000_messages_is_polled_in_bounded_search_windows"],
        id="imap-whole-mailbox-search",
    ),
    pytest.param(
        "pollers/email/imap/poller.py",
        [("    shown = utf7.decode(mailbox)\n    return", "    shown = mailbox\n    return")],
        ["tests/email/test_imap_mailboxes.py::test_mailbox_names_in_modified_utf7_are_shown_decoded"],
        id="imap-mailbox-shown-in-modified-utf7",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [('            kept = {TYPEDSTREAM: bytes(r["attributedBody"])} if message.extra.get("text_error") and r.get("attributedBody") else {}\n',
          "            kept: dict[str, bytes] = {}\n")],
        ["tests/imessage/test_imessage_faults.py::test_a_truncated_attributed_body_keeps_its_blob_and_the_readable_start"],
        id="truncated-typedstream-blob-thrown-away",
    ),
    pytest.param(
        "memex/store/attachments.py",
        [('    except FileNotFoundError:\n        attachment["missing"] = True\n        return "missing"\n    attachment["sha256"] = sha\n',
          '    except ZeroDivisionError:\n        attachment["missing"] = True\n        return "missing"\n    attachment["sha256"] = sha\n')],
        ["tests/imessage/test_imessage_attachments.py::test_the_same_photo_in_two_messages_is_stored_once_and_a_missing_file_is_recorded"],
        id="missing-attachment-file-fails-the-message",
    ),
    pytest.param(
        "pollers/email/mail/render.py",
        [("    if raw.startswith(BOM):\n", "    if False:\n")],
        ["tests/email/test_email_render.py::test_a_mail_saved_with_a_byte_order_mark_keeps_its_headers_and_parts"],
        id="email-byte-order-mark-hides-the-headers",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [('        return re.sub(r"\\r?\\n(?=[ \\t])", "", boundary) if isinstance(boundary, str) else boundary\n', "        return boundary\n")],
        ["tests/email/test_email_render.py::test_a_folded_boundary_parameter_still_splits_the_parts"],
        id="email-folded-boundary-kept-folded",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [("        token = ctype.split(None, 1)[0] if ctype.strip() else ctype\n", "        token = ctype\n")],
        ["tests/email/test_email_render.py::test_a_content_type_missing_its_semicolon_is_only_the_type"],
        id="email-content-type-keeps-its-folded-parameters",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [('        if boundary is None and self.get_content_maintype() == "multipart":\n', "        if False:\n")],
        ["tests/email/test_email_render.py::test_a_content_type_missing_its_semicolon_is_only_the_type"],
        id="email-boundary-after-a-missing-semicolon-ignored",
    ),
    pytest.param(
        "pollers/messenger/poller.py",
        [('    return {**cur, "at": {"export": opened.hash, "unit": unit, "n": k}, "items": int(cur["items"]) + n}\n',
          '    return _finish({**cur, "items": int(cur["items"]) + n}, opened, count=True)\n')],
        ["tests/messenger/test_messenger_faults.py::test_kill_9_in_a_large_export_then_a_rerun_stores_every_message_exactly_once"],
        id="messenger-export-marked-read-before-it-is-stored",
    ),
    pytest.param(
        "pollers/messenger/parse.py",
        [('        return text.encode("latin-1").decode("utf-8")\n',
          '        return text.encode("latin-1", "ignore").decode("utf-8", "ignore")\n')],
        ["tests/messenger/test_messenger.py::test_repair_is_lossless"],
        id="messenger-lossy-mojibake-fix",
    ),
    pytest.param(
        "pollers/messenger/parse.py",
        [("_h('fbm', key, p.ts, who, content, ordinal)", "_h('fbm', key, p.ts, who, content)")],
        ["tests/messenger/test_messenger.py::test_same_millisecond_messages_stay_apart_and_match_again"],
        id="messenger-no-ordinal-among-identical-messages",
    ),
    pytest.param(
        "pollers/messenger/parse.py",
        [('revision=Revision(id="unsent", kind="delete", at=None)', "revision=None")],
        ["tests/messenger/test_messenger.py::test_unsent_later_is_a_delete_revision_and_the_text_is_kept"],
        id="messenger-unsent-stored-as-the-original",
    ),
    pytest.param(
        "pollers/messenger/parse.py",
        [('    key = "\\x1e".join(_fold(p) for p in people)\n', '    key = "\\x1e".join(_fold(p) for p in people) + str(unit.folder)\n')],
        ["tests/messenger/test_messenger.py::test_a_renamed_thread_folder_keeps_ids_a_renamed_participant_is_stored_again"],
        id="messenger-folder-name-in-the-id",
    ),
    pytest.param(
        "pollers/messenger/exports.py",
        [("        if cand.changed_at > horizon:\n", "        if False:\n")],
        ["tests/messenger/test_messenger_faults.py::test_a_zip_still_being_written_is_left_until_complete"],
        id="messenger-unsettled-export-read",
    ),
    pytest.param(
        "memex/watch.py",
        [("        settle = max(settle, can.settle_seconds + MARGIN)\n", "        pass\n")],
        ["tests/core/test_watch.py::test_a_mail_is_stored_once_it_settles_and_sigterm_exits_0"],
        id="watch-polls-inside-the-pollers-settle-window",
    ),
    pytest.param(
        "memex/watch.py",
        [("                    due = min(self._last + settle, self._first + settle * BURST_FACTOR)\n", "                    due = self._first\n")],
        ["tests/core/test_watch.py::test_a_burst_of_200_mails_is_taken_in_a_few_polls"],
        id="watch-polls-on-every-change",
    ),
    pytest.param(
        "memex/watch.py",
        [("                retry_at = now + backoff\n", "                pass\n")],
        ["tests/core/test_watch.py::test_a_poll_skipped_because_cron_holds_the_lock_is_retried"],
        id="watch-skipped-poll-not-retried",
    ),
    pytest.param(
        "pollers/imessage/poller.py",
        [('        return [path, path.with_name(path.name + "-wal")]\n', "        return [path]\n")],
        ["tests/core/test_watch.py::test_rows_a_separate_process_writes_to_chat_db_are_stored"],
        id="watch-imessage-ignores-the-wal",
    ),
    pytest.param(
        "memex/state/locks.py",
        [("            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n        except BlockingIOError:\n            pid = _read_pid(fd)\n",
          "            pass\n        except BlockingIOError:\n            pid = _read_pid(fd)\n")],
        ["tests/core/test_watch.py::test_a_cron_poll_beside_the_watcher_never_polls_the_source_at_the_same_time"],
        id="run-lock-not-taken",
    ),
    pytest.param(
        "memex/watch.py",
        [("            return poll(self.cfg, self.plan.name, max_seconds=self.max_seconds, stop=self.stop,",
          "            return poll(self.cfg, self.plan.name, max_seconds=self.max_seconds, stop=threading.Event(),")],
        ["tests/core/test_watch.py::test_sigterm_during_a_poll_stops_it_with_progress_saved_and_exits_0"],
        id="watch-sigterm-does-not-stop-the-poll",
    ),
    pytest.param(
        "memex/watch.py",
        [('                    note = {"trigger": "more"}\n', "                    pass\n")],
        ["tests/core/test_watch.py::test_a_poll_stopped_by_its_time_limit_is_followed_by_the_next_at_once"],
        id="watch-waits-after-a-poll-cut-short",
    ),
    pytest.param(
        "memex/watch.py",
        [("            if event.event_type not in WRITE_EVENTS:\n                return\n", "")],
        ["tests/core/test_watch.py::test_rows_a_separate_process_writes_to_chat_db_are_stored"],
        id="watch-reads-count-as-changes",
    ),
    pytest.param(
        "memex/watch.py",
        [('WRITE_EVENTS = frozenset({"created", "modified", "moved", "deleted"})\n',
          'WRITE_EVENTS = frozenset({"created", "modified", "moved", "deleted", "closed"})\n')],
        ["tests/core/test_watch.py::test_rows_a_separate_process_writes_to_chat_db_are_stored"],
        id="watch-own-close-of-the-wal-counts-as-a-change",
    ),
    pytest.param(
        "pollers/imessage/typedstream.py",
        [("    if tail.fullmatch(blob, end) is None:  # also when the length runs past the end (no end mark there)\n", "    if blob[end : end + 1] != b\"\\x86\":\n")],
        ["tests/imessage/test_typedstream_fast.py::test_a_blob_cut_at_any_offset_reads_as_before"],
        id="typedstream-fast-path-trusts-a-cut-tail",
    ),
    pytest.param(
        "pollers/imessage/typedstream.py",
        [('        return blob[start:end].decode("utf-8")\n', '        return blob[start:end].decode("utf-8", "replace")\n')],
        ["tests/imessage/test_typedstream_fast.py::test_invalid_utf8_falls_back_to_pytypedstreams_error"],
        id="typedstream-fast-path-lenient-utf8",
    ),
    pytest.param(
        "memex/deadline.py",
        [("        return SaveTimedOut(what) if self.saving else Interrupted(reason, what)\n", "        return Interrupted(reason, what)\n")],
        ["tests/core/test_state_deadline.py::test_a_cursor_save_that_misses_the_state_deadline_is_an_error_naming_the_object"],
        id="state-deadline-taken-for-the-polls-normal-stop",
    ),
    pytest.param(
        "memex/state/s3lease.py",
        [("        if previous.released:\n", "        if True:\n")],
        ["tests/core/test_quiet_commands.py::test_a_lease_taken_from_a_holder_that_did_not_release_is_a_warning_naming_it"],
        id="lease-taken-from-a-dead-holder-is-only-info",
    ),
    pytest.param(
        "memex/state/s3state.py",
        [("                if remembered is not None:\n                    continue  # judged on a remembered copy", "                if False:\n                    continue  # judged on a remembered copy")],
        ["tests/core/test_s3state_requests.py::test_a_write_judged_on_a_remembered_copy_reads_the_object_before_it_decides_nothing_changes"],
        id="cas-trusts-a-remembered-copy-for-a-no-op",
    ),
    pytest.param(
        "memex/runner.py",
        [("    primed = (name, claimed) if claimed is not None else None", "    primed = None")],
        ["tests/core/test_s3state_requests.py::test_an_idle_poll_with_state_url_costs_at_most_four_requests"],
        id="idle-poll-rereads-the-claimed-cursor",
    ),
    pytest.param(
        "memex/cli/recipes.py",
        [("    if interval not in CRON_INTERVALS:\n        raise ValueError(interval)\n",
          "    interval = min(CRON_INTERVALS, key=lambda i: abs(i - interval))\n")],
        ["tests/core/test_deploy.py::test_cron_keeps_an_interval_exactly_or_refuses_it_naming_the_nearest[420]"],
        id="cron-rounds-an-interval-silently",
    ),
    pytest.param(
        "memex/cli/main.py",
        [("    if not sys.stdin.isatty():\n", "    if False:\n")],
        ["tests/core/test_cli_errors.py::test_moving_a_cursor_back_by_hand_asks_first_and_is_logged"],
        id="cursor-move-without-a-terminal-is-a-bare-abort",
    ),
    pytest.param(
        "pollers/signal/process.py",
        [("            if WAITING.search(seen):\n", "            if False:\n")],
        ["tests/signal/test_signal.py::test_a_running_daemon_ends_the_receive_at_once_as_busy"],
        id="signal-daemon-waiting-line-not-watched",
    ),
    pytest.param(
        "pollers/signal/desktop.py",
        [('            conn.execute("PRAGMA cipher_log_level = NONE")\n', "")],
        ["tests/signal/test_signal_desktop.py::test_a_wrong_key_or_password_is_one_clear_line_and_nothing_is_written"],
        id="signal-desktop-sqlcipher-log-on-stderr",
    ),
    pytest.param(
        "memex/uploader.py",
        [("                if item.whole and message.revision is not None:\n", "                if False:\n")],
        ["tests/core/test_revision_original.py::test_a_whole_revision_whose_original_is_missing_stores_the_original_first[file]",
         "tests/teams/test_teams_originals.py::test_a_message_changed_while_the_first_walk_is_between_pages_gets_its_original"],
        id="revision-without-original-no-stand-in",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [('            params["$orderby"] = "createdDateTime desc"\n            params["$filter"] = f"createdDateTime lt ',
          '            params["$filter"] = f"lastModifiedDateTime lt '),
         ("            at = modified if created is None else created\n", "")],
        ["tests/teams/test_teams_originals.py::test_a_message_changed_after_an_interrupted_first_sync_is_stored_as_an_original[sigkill]"],
        id="teams-resume-by-modification",
    ),
    pytest.param(
        "pollers/teams/poller.py",
        [("        if not moved:  # a moved message", "        if True:  # a moved message")],
        ["tests/teams/test_teams_originals.py::test_a_message_changed_after_an_interrupted_first_sync_is_stored_as_an_original[sigkill]"],
        id="teams-resume-cursor-takes-moved-messages",
    ),
    pytest.param(
        "memex/verify/inventory.py",
        [("        if repair and can.whole_revisions:  # memex.capabilities.WholeRevisions\n", "        if False:\n")],
        ["tests/teams/test_teams_originals.py::test_verify_finds_a_revision_without_its_original_and_repair_or_the_next_change_heals_it"],
        id="verify-repair-leaves-revisions-without-originals",
    ),
    pytest.param(
        "memex/uploader.py",
        [("                doc, why = conforms(message)\n", "                doc, why = message.to_dict(), None\n")],
        ["tests/core/test_schema.py::test_a_record_that_breaks_the_schema_is_quarantined_never_stored"],
        id="record-stored-without-schema-check",
    ),
    pytest.param(
        "memex/verify/checks.py",
        [("    return problem(doc)\n", "    return problem({**doc, \"type\": \"message\"}) if isinstance(doc, dict) else problem(doc)\n")],
        ["tests/core/test_verify.py::test_each_kind_of_damage_is_found_and_repaired[file-invented_type]"],
        id="verify-accepts-any-record-type",
    ),
    pytest.param(
        "pollers/teams/render.py",
        [('        type="event" if extra.get("system") else "message",', '        type="teams",')],
        ["tests/teams/test_teams.py::test_system_messages_images_and_files"],
        id="teams-invents-its-own-record-type",
    ),
    pytest.param(
        "memex/store/files.py",
        [("                sync_files(list(pending.values()), method)\n", "                sync_files(list(pending.values()), \"syncfs\")\n")],
        ["tests/core/test_filestore_flush.py::test_a_store_on_fuse_fsyncs_every_object_before_its_name_and_never_calls_syncfs"],
        id="file-store-trusts-syncfs-on-fuse",
    ),
    pytest.param(
        "memex/store/files.py",
        [('            reason = _damage(path, len(body), json_object=key.endswith(".json"))\n', "            reason = None\n")],
        ["tests/core/test_filestore_repair.py::test_an_empty_and_a_truncated_object_are_repaired_by_the_next_read_not_counted_as_duplicates"],
        id="file-store-taken-name-is-a-duplicate-unchecked",
    ),
    pytest.param(
        "memex/runner.py",
        [('    if cfg.search_index and has_pending(cfg.state_dir, name, "poll"):', '    if False:')],
        ["tests/core/test_search.py::test_a_crash_between_the_store_commit_and_the_index_update_is_repaired_by_the_next_poll"],
        id="search-no-catch-up-from-the-journal",
    ),
    pytest.param(
        "memex/runner.py",
        [("        self.follower.before_commit(keys)\n", "        pass\n")],
        ["tests/core/test_search.py::test_a_crash_between_the_store_commit_and_the_index_update_is_repaired_by_the_next_poll"],
        id="search-no-journal-before-the-store-commit",
    ),
    pytest.param(
        "memex/search/build.py",
        [("            upto = self._ends.get(seen)\n", "            upto = None\n")],
        ["tests/core/test_search_follow.py::test_an_update_never_empties_a_journal_a_later_batch_was_appended_to"],
        id="search-journal-keeps-every-batch-of-a-long-run",
    ),
    pytest.param(
        "memex/search/build.py",
        [("            if self._appended == seen:\n", "            if True:\n")],
        ["tests/core/test_search_follow.py::test_an_update_never_empties_a_journal_a_later_batch_was_appended_to"],
        id="search-update-empties-a-journal-a-later-batch-was-appended-to",
    ),
    pytest.param(
        "memex/search/index.py",
        [("        text = original if latest is None else latest\n", "        text = original\n")],
        ["tests/core/test_search.py::test_an_edit_makes_the_old_text_unfindable_and_an_unsend_hides_the_message"],
        id="search-original-text-kept-after-an-edit",
    ),
    pytest.param(
        "memex/search/rows.py",
        [("    return max(texts, key=lambda r: (timestamp(r.at) or 0.0, r.key)).text", "    return texts[0].text")],
        ["tests/core/test_search.py::test_an_edit_makes_the_old_text_unfindable_and_an_unsend_hides_the_message"],
        id="search-first-edit-not-the-latest",
    ),
    pytest.param(
        "memex/search/query.py",
        [('        if not self.deleted:\n            where.append("m.deleted = 0")\n', "")],
        ["tests/core/test_search.py::test_an_edit_makes_the_old_text_unfindable_and_an_unsend_hides_the_message"],
        id="search-unsent-messages-not-left-out",
    ),
    pytest.param(
        "pollers/email/imap/poller.py",
        [(" and uids[: len(early[0].uids)] == early[0].uids:", ":")],
        ["tests/email/test_imap_overlap.py::test_a_read_ahead_is_used_only_for_the_uids_right_after_the_cursor"],
        id="imap-read-ahead-used-for-any-cursor",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [("if memo is not None and memo[0] is payload and memo[1] == cte:", "if memo is not None:")],
        ["tests/email/test_render_fast.py::test_a_parts_decoded_bytes_are_decoded_once_and_again_after_a_change"],
        id="email-decoded-payload-kept-after-a-change",
    ),
    pytest.param(
        "memex/observe/follow.py",
        [("        for index in range(idents.index(last) + 1, len(idents)):\n", "        for index in range(1, len(idents)):\n")],
        ["tests/core/test_tail.py::test_history_read_while_two_rotations_happen_repeats_no_newer_file"],
        id="tail-history-reads-the-next-unread-name",
    ),
    pytest.param(
        "pollers/email/imap/inventory.py",
        [("partial(self._search, 1, last + 1)", "partial(self._search, 1)")],
        ["tests/email/test_imap_verify.py::test_verify_compares_the_uids_up_to_the_cursor_and_repair_restores_and_replaces"],
        id="imap-verify-lists-past-the-cursor",
    ),
    pytest.param(
        "pollers/email/imap/inventory.py",
        [("            if now != validity:\n", "            if False:\n")],
        ["tests/email/test_imap_verify.py::test_a_mailbox_renumbered_since_the_cursor_is_reported_and_not_repaired_with_other_mails"],
        id="imap-verify-ignores-uidvalidity",
    ),
    pytest.param(
        "pollers/messenger/inventory.py",
        [('stop = (str(at["unit"]), int(at["n"])) if export_hash == partial and at else None', "stop = None")],
        ["tests/messenger/test_messenger_verify.py::test_the_export_being_read_is_compared_up_to_the_cursor_only"],
        id="messenger-verify-lists-past-the-cursor",
    ),
    pytest.param(
        "pollers/messenger/inventory.py",
        [("if item.message is not None and item.message.revision is None:", "if item.message is not None:")],
        ["tests/messenger/test_messenger_verify.py::test_an_unsent_message_is_not_looked_for_as_an_original"],
        id="messenger-verify-looks-for-revisions-as-originals",
    ),
    pytest.param(
        "memex/verify/walk.py",
        [('            if json.loads(body)["revision"]["kind"] == "delete":\n', "            if True:\n")],
        ["tests/core/test_verify.py::test_a_revision_without_its_original_is_found_and_the_original_restored[file]"],
        id="verify-excuses-every-revision-without-its-original",
    ),
    pytest.param(
        "memex/verify/walk.py",
        [('            if json.loads(body)["revision"]["kind"] == "delete":\n', "            if False:\n")],
        ["tests/core/test_verify.py::test_a_tombstone_of_a_message_never_seen_is_counted_not_damage[file]"],
        id="verify-counts-a-never-seen-tombstone-as-damage",
    ),
    pytest.param(
        "memex/search/index.py",
        [("                if writer:\n                    self._locks.append(writer_lock(path.parent))\n", "")],
        ["tests/core/test_search_rebuild.py::test_a_poll_during_a_rebuild_keeps_its_journal_and_its_next_run_adds_it_to_the_new_index"],
        id="search-poll-writes-into-the-file-a-rebuild-replaces",
    ),
    pytest.param(
        "memex/search/build.py",
        [("            with exclusive(folder / OPEN_LOCK, SWAP_WAIT):  # no connection has the old file open now\n", "            if True:\n")],
        ["tests/core/test_search_rebuild.py::test_the_new_file_replaces_the_old_only_once_no_connection_has_it_open"],
        id="search-swap-under-an-open-connection",
    ),
    pytest.param(
        "memex/search/index.py",
        [('                fsync_file(Path(f"{self.path}-wal"), missing_ok=True)  # a WAL another connection kept\n', "                pass\n")],
        ["tests/core/test_search_rebuild.py::test_a_poll_empties_its_journal_only_after_its_index_update_is_on_disk"],
        id="search-journal-emptied-before-the-wal-is-on-disk",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [('    if "\\r" in line and line.count("\\r") != (1 if line.endswith("\\r\\n") else 0):\n', "    if False:\n")],
        ["tests/email/test_mime.py::test_parse_bytes_gives_the_standard_tree_for_every_case"],
        id="email-one-pass-parser-takes-bare-cr-line-ends",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [('        if cur.get_content_type() == "message/delivery-status":\n            raise _Fallback("message/delivery-status")\n', "")],
        ["tests/email/test_mime.py::test_parse_bytes_gives_the_standard_tree_for_every_case"],
        id="email-one-pass-parser-takes-delivery-status",
    ),
    pytest.param(
        "pollers/email/mail/mime.py",
        [("        self._ctype = self._index = None\n        super().replace_header(_name, _value)\n", "        super().replace_header(_name, _value)\n")],
        ["tests/email/test_mime.py::test_the_content_type_and_the_headers_are_remembered_until_the_headers_change"],
        id="email-remembered-headers-kept-after-a-change",
    ),
    pytest.param(
        "memex/search/bulk.py",
        [("    return f\"CASE json_type(body, '{path}') WHEN 'text' THEN json_extract(body, '{path}') ELSE '' END\"", "    return f\"coalesce(json_extract(body, '{path}'), '')\"")],
        ["tests/core/test_search_bulk.py::test_a_rebuild_makes_the_rows_the_python_path_makes"],
        id="search-rebuild-reads-a-field-of-the-wrong-type",
    ),
    pytest.param(
        "memex/search/bulk.py",
        [("        if clash:\n            _spread(db, taken, highest)\n", "")],
        ["tests/core/test_search_bulk.py::test_a_rebuild_makes_the_rows_the_python_path_makes"],
        id="search-rebuild-ids-clash-unresolved",
    ),
    pytest.param(
        "memex/search/rows.py",
        [("        if max(found) + 1 < end:\n            return max(found) + 1\n        want = end\n", "        want += 1\n")],
        ["tests/core/test_search_bulk.py::test_messages_at_one_millisecond_cost_a_few_queries_each_and_stay_near_their_time"],
        id="search-taken-id-moves-up-one-at-a-time",
    ),
    pytest.param(
        "memex/search/bulk.py",
        [("f\"END) WHERE type = 'text'{where}\"", "f\"END) WHERE 1{where}\"")],
        ["tests/core/test_search_bulk.py::test_a_rebuild_makes_the_rows_the_python_path_makes"],
        id="search-rebuild-recipients-not-only-strings",
    ),
    pytest.param(
        "memex/search/query.py",
        [("            if len(rows) >= limit:\n", "            if True:\n")],
        ["tests/core/test_search_rank.py::test_a_ranked_search_answers_as_ranking_every_match"],
        id="search-rank-trusts-a-window-that-holds-too-few",
    ),
    pytest.param(
        "pollers/email/mail/identity.py",
        [("        bare = _BARE_CR.search(payload) is not None\n", "        bare = False\n")],
        ["tests/email/test_render_fast.py::test_the_fingerprints_line_ends_are_made_lf_as_before"],
        id="mail-fingerprint-cr-shortcut-over-a-bare-cr",
    ),
    pytest.param(
        "memex/runner.py",
        [("else batch.after(handled, current)\n", "else current\n")],
        ["tests/messenger/test_messenger_faults.py::test_sigterm_inside_a_batch_saves_the_cursor_right_after_the_last_stored_message",
         "tests/core/test_runner_faults.py::test_maildir_poll_stopped_by_sigterm_mid_batch_resumes_exactly"],
        id="runner-stopped-inside-a-batch-keeps-its-start",
    ),
    pytest.param(
        "pollers/messenger/poller.py",
        [("    unit, (k, _) = marks[n - 1]\n", "    unit, (k, _) = marks[-1]\n")],
        ["tests/messenger/test_messenger_faults.py::test_sigterm_inside_a_batch_saves_the_cursor_right_after_the_last_stored_message"],
        id="messenger-item-cursor-is-the-batch-end",
    ),
    pytest.param(
        "memex/search/build.py",
        [("        except (sqlite3.Error, OSError) as exc:  # a full disk", "        except (ZeroDivisionError,) as exc:  # a full disk")],
        ["tests/core/test_search_bulk.py::test_a_rebuild_stopped_by_the_file_system_is_one_line_naming_the_file_and_the_live_index_stays"],
        id="search-rebuild-stopped-by-the-disk-is-an-internal-error",
    ),
    pytest.param(
        "memex/search/index.py",
        [("        self._unindex(rowid)  # first: FTS5 reads the words to remove from the row\n", ""),
         ("int(latest is not None), int(deleted), rowid))  # fmt: skip\n",
          "int(latest is not None), int(deleted), rowid))  # fmt: skip\n        self._unindex(rowid)\n")],
        ["tests/core/test_search.py::test_an_edit_makes_the_old_text_unfindable_and_an_unsend_hides_the_message"],
        id="search-words-removed-after-the-row-changed",
    ),
    # ---- rows of branch i32-host: append below ----
    # (branch i32-config, issue 32 §1: never touch what memex does not own)
    pytest.param(
        "memex/state/files.py",
        [("    make_dirs(path)\n    return path\n", "    make_dirs(path)\n    os.chmod(path, DIR_MODE)\n    return path\n")],
        ["tests/core/test_cursors.py::test_an_existing_state_dir_keeps_its_mode",
         "tests/core/test_bad_inputs_config.py::test_a_bad_config_input_gets_one_line_and_harms_nothing[existing-0755-state-dir-keeps-its-mode]"],
        id="existing-state-dir-chmoded-0700",
    ),
    pytest.param(
        "memex/urls.py",
        [('    if parts.netloc not in ("", "localhost"):\n', "    if False:\n")],
        ["tests/core/test_config_safety.py::test_a_store_url_that_would_write_elsewhere_is_refused_at_load"],
        id="file-url-host-part-accepted",
    ),
    pytest.param(
        "memex/cli/demo.py",
        [("        _inside(cfg, directory.resolve())", "        pass")],
        ["tests/core/test_config_safety.py::test_demo_creates_its_folder_private_and_refuses_a_config_pointing_out"],
        id="demo-follows-a-config-pointing-outside-its-folder",
    ),
    # ---- end of i32-host ----
    # ---- rows of branch i32-term: append below ----
    pytest.param(
        "memex/cli/show.py",
        [("    lines = [f\"{name + ':':<13} {visible(value)}\" for name, value in head]\n",
          "    lines = [f\"{name + ':':<13} {value}\" for name, value in head]\n"),
         ('    lines += ["", visible(doc.get("text") or "(no text)", multiline=True)]\n', '    lines += ["", doc.get("text") or "(no text)"]\n'),
         ("memex/cli/find.py", '        echo("  ".join(visible(x) for x in (', '        echo("  ".join(str(x) for x in ('),
         ("memex/cli/find.py", '            line.append(visible(piece), style="bold yellow" if marked else "")\n',
          '            line.append(piece, style="bold yellow" if marked else "")\n'),
         ("memex/cli/find.py", '        line.append(visible(_cut(_sender(r), PLAIN_WIDTH)), style="green")\n',
          '        line.append(_cut(_sender(r), PLAIN_WIDTH), style="green")\n')],
        ["tests/core/test_terminal_safety.py::test_on_a_terminal_hostile_text_is_shown_never_acted_on[show]",
         "tests/core/test_terminal_safety.py::test_on_a_terminal_hostile_text_is_shown_never_acted_on[search]",
         "tests/core/test_bad_inputs_terminal.py::test_hostile_text_is_shown_not_acted_on[show-by-key-body]",
         "tests/core/test_bad_inputs_terminal.py::test_hostile_text_is_shown_not_acted_on[search-line]"],
        id="terminal-show-and-search-print-mail-raw",
    ),
    pytest.param(
        "memex/safe_text.py",
        [("    value = text if isinstance(text, str) else str(text)\n", "    return text if isinstance(text, str) else str(text)\n")],
        ["tests/core/test_terminal_safety.py::test_on_a_terminal_hostile_text_is_shown_never_acted_on[status]",
         "tests/core/test_terminal_safety.py::test_on_a_terminal_hostile_text_is_shown_never_acted_on[poll]",
         "tests/core/test_bad_inputs_terminal.py::test_hostile_text_is_shown_not_acted_on[tail-error-line]",
         "tests/core/test_bad_inputs_terminal.py::test_hostile_text_is_shown_not_acted_on[verify-damaged-object-name]"],
        id="terminal-every-field-printed-raw",
    ),
    pytest.param(
        "memex/safe_text.py",
        [("    return _JSON_UNSAFE.sub(", "    return serialized or _JSON_UNSAFE.sub(")],
        ["tests/core/test_terminal_safety.py::test_on_a_terminal_hostile_text_is_shown_never_acted_on[search-json]",
         "tests/core/test_bad_inputs_terminal.py::test_hostile_text_is_shown_not_acted_on[show-json]"],
        id="terminal-json-leaves-bidi-and-c1-raw",
    ),
    # ---- end of i32-term ----
    # ---- rows of branch i32-isolate: append below ----
    # (branch i32-config, issue 32 §3: one broken source stops only itself)
    pytest.param(
        "memex/config.py",
        [("            sources[name] = _broken_source(name, table, path, state_dir, exc)\n", "            raise\n")],
        ["tests/core/test_bad_inputs_config.py::test_a_bad_config_input_gets_one_line_and_harms_nothing[broken-interval-sixty-poll-other]",
         "tests/core/test_config_safety.py::test_a_broken_section_loads_and_stops_only_its_source"],
        id="one-broken-source-section-fails-every-source",
    ),
    pytest.param(
        "memex/watch.py",
        [("        raise WatcherDied(died[0])\n", "        pass\n")],
        ["tests/core/test_config_safety.py::test_a_watcher_thread_that_dies_stops_watch_with_exit_1_never_a_silent_gap"],
        id="watch-thread-dies-silently",
    ),
    # ---- end of i32-isolate ----
    # ---- rows of branch i32-env: append below ----
    pytest.param(
        "memex/error_lines.py",
        [("    fault = explain(exc)\n    if fault is not None:\n        return str(fault)\n", "    fault = None\n")],
        ["tests/core/test_bad_inputs_environment.py::test_an_environment_failure_is_one_line_naming_the_path[store-full-poll]",
         "tests/core/test_fs_errors.py::test_each_cause_is_one_line_naming_the_path_the_cause_and_the_fix"],
        id="environment-fault-reported-as-internal-error",
    ),
    pytest.param(
        "memex/runner.py",
        [("        refuse_bad_stored(poller, can, name, committed, cursors.where(name))\n", "        pass\n")],
        ["tests/core/test_bad_inputs_environment.py::test_an_environment_failure_is_one_line_naming_the_path[cursor-wrong-type-maildir]"],
        id="hand-edited-cursor-handed-to-the-poller",
    ),
    pytest.param(
        "memex/backfill/run.py",
        [("                if explain(exc) is not None:\n                    self.abort.set()\n", ""),
         ("                if exc.needs_action:  # a full disk, a read-only store: every other item would fail the same way\n"
          "                    self.abort.set()\n", "")],
        ["tests/core/test_fs_errors.py::test_a_backfill_into_a_full_store_stops_at_the_first_fault_instead_of_failing_every_message"],
        id="backfill-fails-every-message-on-a-full-disk",
    ),
    # ---- end of i32-env ----
    # ---- rows of branch i32-wedge: append below ----
    pytest.param(
        "pollers/email/imap/poller.py",
        [("                fit, evicted = make_room(holes, len(refused))\n", "                fit, evicted = 0, []\n")],
        ["tests/email/test_imap_holes.py::test_a_mail_gmail_never_serves_is_given_up_after_five_polls_and_reported"],
        id="imap-withheld-uid-wedges-the-mailbox",
    ),
    pytest.param(
        "pollers/email/imap/poller.py",
        [("            if mailbox not in self._retried and live(holes):\n", "            if False:\n")],
        ["tests/email/test_imap_holes.py::test_a_withheld_uid_is_kept_as_a_hole_the_mailbox_moves_on_and_the_mail_comes_when_served"],
        id="imap-hole-never-asked-again",
    ),
    pytest.param(
        "pollers/email/imap/holes.py",
        [("    return sorted(uid for uid, tries in holes.items() if tries < HOLE_TRIES)\n", "    return sorted(holes)\n")],
        ["tests/email/test_imap_holes.py::test_a_mail_gmail_never_serves_is_given_up_after_five_polls_and_reported"],
        id="imap-hole-retried-for-ever",
    ),
    pytest.param(
        "memex/state/s3lease.py",
        [("            self.release()  # a no-op unless this attempt wrote the lease (self._etag)\n", "            pass\n")],
        ["tests/core/test_lease_release.py::test_a_poll_failing_on_a_corrupt_cursor_releases_its_lease_and_the_next_poll_reports_the_error"],
        id="lease-kept-by-a-failed-poll",
    ),
    pytest.param(
        "memex/state/s3lease.py",
        [("            if found is not None and found[0].live and not found[0].dead_here():\n",
          "            if found is not None and found[0].live:\n")],
        ["tests/core/test_lease_release.py::test_a_lease_held_by_a_dead_process_of_this_host_is_taken_over_at_once_and_logged",
         "tests/core/test_lease_release.py::test_a_poll_killed_mid_poll_leaves_a_lease_the_next_poll_on_this_host_takes_over_at_once"],
        id="lease-of-a-dead-holder-here-waits-for-its-ttl",
    ),
    pytest.param(
        "memex/runner.py",
        [("                deadline.extend(SLOW_GRACE)\n", "                pass\n")],
        ["tests/core/test_slow_first_batch.py::test_a_first_batch_read_past_the_time_limit_is_stored_and_each_poll_moves_on"],
        id="slow-first-batch-dropped",
    ),
    pytest.param(
        "memex/runner.py",
        [("    if result.slow_read_s is not None:\n        _slow(name, result, log)\n", "    if False:\n        _slow(name, result, log)\n")],
        ["tests/core/test_slow_first_batch.py::test_a_first_batch_none_of_which_can_be_stored_in_time_is_an_error_and_failing_not_idle"],
        id="slow-first-batch-reported-as-idle",
    ),
    pytest.param(
        "memex/verify/walk.py",
        [("(EMPTY, \"0 bytes\") if not body and not self._empty_at_source(key) else None)", "(EMPTY, \"0 bytes\") if not body else None)")],
        ["tests/email/test_maildir_verify.py::test_an_empty_eml_stored_by_an_older_memex_from_an_empty_file_is_whole_not_damage"],
        id="verify-empty-at-the-source-taken-for-damage",
    ),
    pytest.param(
        "pollers/email/mail/render.py",
        [("    if not raw or raw.isspace():", "    if False:")],
        ["tests/email/test_maildir_verify.py::test_a_zero_byte_file_is_quarantined_as_no_mail_and_verify_stays_whole"],
        id="empty-file-stored-as-a-mail",
    ),
    pytest.param(
        "memex/verify/inventory.py",
        [("        if current == body:  # the source holds exactly these bytes: writing them again cannot help\n", "        if False:\n")],
        ["tests/email/test_maildir_verify.py::test_a_damaged_object_whose_source_holds_the_same_bytes_is_not_claimed_replaced"],
        id="verify-repair-claims-a-replace-that-changes-nothing",
    ),
    pytest.param(
        "pollers/email/imap/holes.py",
        [("    for uid in given_up(holes):\n", "    for uid in []:\n")],
        ["tests/email/test_imap_holes.py::test_holes_are_bounded_a_full_list_stops_before_the_next_until_one_is_given_up"],
        id="imap-given-up-holes-fill-the-list-for-good",
    ),
    # ---- end of i32-wedge ----
    # ---- rows of branch i33-oauth: append below ----
    pytest.param(
        "memex/oauth/store.py",
        [("    text = read(refusal_path(state_dir, source))\n", "    text = None\n")],
        ["tests/email/test_imap_oauth.py::test_a_revoked_login_is_one_line_remembered_and_cured_by_signing_in",
         "tests/email/test_imap_oauth_google.py::test_google_revoked_refresh_token_is_remembered"],
        id="oauth-refusal-not-consulted-so-invalid-grant-retried-every-poll",
    ),
    pytest.param(
        "memex/oauth/microsoft.py",
        [("                if _code(result) in store.FOR_GOOD:\n", "                if False:\n")],
        ["tests/email/test_imap_oauth.py::test_a_revoked_login_is_one_line_remembered_and_cured_by_signing_in"],
        id="oauth-invalid-grant-not-remembered",
    ),
    pytest.param(
        "pollers/email/imap/oauth.py",
        [("    if refusal is not None and not fresh and ", "    if refusal is not None and False and ")],
        ["tests/email/test_imap_oauth.py::test_an_expired_access_token_is_refreshed_without_a_word"],
        id="oauth-refused-cached-token-not-refreshed",
    ),
    pytest.param(
        "pollers/email/imap/oauth.py",
        [('        return server_text(exc) + (f"; status {status}" if status else ""), []\n',
          '        return server_text(exc) + f" {token}", []\n')],
        ["tests/email/test_imap_oauth.py::test_no_token_or_secret_anywhere_but_the_login_files"],
        id="oauth-token-written-into-the-error-line",
    ),
    pytest.param(
        "pollers/email/imap/oauth.py",
        [('    return next((m for m in ("OAUTHBEARER", "XOAUTH2") if', '    return next((m for m in ("XOAUTH2", "OAUTHBEARER") if')],
        ["tests/email/test_imap_oauth.py::test_microsoft_sign_in_then_polls_over_oauthbearer"],
        id="oauth-xoauth2-preferred-over-oauthbearer",
    ),
    pytest.param(
        "memex/oauth/installed_app.py",
        [("        if not force_refresh and expires - REFRESH_MARGIN > time.time():\n",
          "        if not force_refresh and expires > time.time():\n")],
        ["tests/email/test_imap_oauth.py::test_a_token_about_to_expire_is_refreshed_before_it_is_used"],
        id="oauth-refreshed-only-after-expiry",
    ),
    pytest.param(
        "memex/oauth/installed_app.py",
        [('"redirect_uri": redirect, "code_verifier": verifier}\n', '"redirect_uri": redirect, "code_verifier": challenge}\n')],
        ["tests/email/test_imap_oauth_google.py::test_google_loopback_sign_in_with_pkce_then_poll"],
        id="oauth-pkce-challenge-sent-as-verifier",
    ),
    pytest.param(
        "memex/oauth/installed_app.py",
        [('        if query.get("state") != state:\n', "        if False:\n")],
        ["tests/email/test_imap_oauth_google.py::test_google_consent_declined_or_a_foreign_address_is_one_line"],
        id="oauth-redirect-state-not-checked",
    ),
    pytest.param(
        "pollers/email/imap/wire.py",
        [("            head = without_labels(head)", "            head = head")],
        ["tests/email/test_imap_gmail.py::test_labels_that_read_like_fetch_items_never_move_the_uid"],
        id="gmail-label-text-read-as-the-uid",
    ),
    pytest.param(
        "pollers/email/imap/session.py",
        [("        return ahead, self._parse(data, ahead.uids, ahead.key[0]), ", "        return ahead, parse_fetch(data, ahead.uids), ")],
        ["tests/email/test_imap_gmail.py::test_gmail_ids_and_labels_are_kept_in_extra"],
        id="gmail-fields-lost-on-a-read-ahead",
    ),
    pytest.param(
        "pollers/email/imap/wire.py",
        [("        return pattern in (name, shown) or fnmatch", "        return fnmatch")],
        ["tests/email/test_imap_gmail.py::test_all_mail_is_found_by_its_name_or_its_special_use_attribute"],
        id="gmail-all-mail-name-read-as-a-glob",
    ),
    pytest.param(
        "pollers/email/imap/session.py",
        [('self._deadline.call(tokens.token_info, f"source {self.name!r}: refreshing the OAuth2 login")', "tokens.token_info()")],
        ["tests/email/test_imap_oauth_google.py::test_a_refresh_that_hangs_never_outlasts_the_poll"],
        id="oauth-refresh-deaf-to-the-poll-deadline",
    ),
    # ---- end of i33-oauth ----
    # ---- rows of branch i33-mbox: append below ----
    pytest.param(
        "pollers/email/mbox/poller.py",
        [("            if entry and not self._same_file(path, entry, st.st_size):", "            if False:")],
        ["tests/email/test_mbox.py::test_a_rewritten_file_is_read_again_with_duplicates_counted_and_nothing_lost"],
        id="mbox-rewritten-file-not-detected",
    ),
    pytest.param(
        "pollers/email/mbox/poller.py",
        [("            if mail.last and not settled:", "            if False:")],
        ["tests/email/test_mbox.py::test_a_growing_file_is_read_on_and_its_last_mail_waits_until_the_file_settles"],
        id="mbox-last-mail-read-while-the-file-changes",
    ),
    pytest.param(
        "pollers/email/mbox/poller.py",
        [("            end, tail, count = marks[n - 1]", "            end, tail, count = marks[-1]")],
        ["tests/email/test_mbox_faults.py::test_sigterm_inside_a_batch_saves_the_offset_right_after_the_last_stored_mail"],
        id="mbox-item-cursor-at-the-end-of-its-batch",
    ),
    pytest.param(
        "pollers/email/mbox/read.py",
        [("    if variant == \"mboxcl2\" or b\">From \" not in raw:", "    if True:")],
        ["tests/email/test_mbox.py::test_a_takeout_mail_and_the_same_mail_from_gmail_imap_are_one_object"],
        id="mbox-quoted-from-lines-kept-quoted",
    ),
    pytest.param(
        "pollers/email/mbox/poller.py",
        [("            if len(items) >= limit or held >= BATCH_BYTES:", "            if len(items) >= limit:")],
        ["tests/email/test_mbox.py::test_a_batch_of_large_mails_is_cut_short_by_its_bytes"],
        id="mbox-batch-not-bounded-by-bytes",
    ),
    pytest.param(
        "pollers/email/mbox/poller.py",
        [("    if b\"X-Mozilla-\" in data:", "    if False:")],
        ["tests/email/test_mbox.py::test_a_rewritten_file_is_read_again_with_duplicates_counted_and_nothing_lost"],
        id="mbox-thunderbird-flags-look-like-a-rewrite",
    ),
    # ---- end of i33-mbox ----
    # ---- rows of branch i34-query: append below ----
    pytest.param(
        "memex/search/query.py",
        [("        if op == \"or\":\n            return _disj(", "        if op == \"or\":\n            return _conj(")],
        ["tests/core/test_search_query.py::test_boolean_operators_combine_as_notmuch_reads_them"],
        id="search-or-read-as-and",
    ),
    pytest.param(
        "memex/search/parse.py",
        [("                raise QueryError(f\"{tok.text.upper()} needs a term before it\")\n",
          "                self.take()\n                return Term(None, \"*\", False, False)\n")],
        ["tests/core/test_bad_inputs_search.py::test_a_bad_query_gets_one_line_and_exit_2[search-and-alone]"],
        id="search-a-lone-operator-returns-everything",
    ),
    pytest.param(
        "memex/search/parse.py",
        [("                raise QueryError(\"unclosed parenthesis: a ( has no matching )\")\n", "                return node\n")],
        ["tests/core/test_bad_inputs_search.py::test_a_bad_query_gets_one_line_and_exit_2[search-unclosed-paren]"],
        id="search-unclosed-parenthesis-read-as-closed",
    ),
    pytest.param(
        "memex/search/rows.py",
        [("    return min(max(int(ts * 1000), EARLIEST_MS), LATEST_MS)\n", "    return min(max(int(ts * 1000), 0), LATEST_MS)\n")],
        ["tests/core/test_search_query.py::test_dates_and_ranges_find_what_they_name_before_1970_too"],
        id="search-times-before-1970-clamped",
    ),
    pytest.param(
        "memex/search/query.py",
        [("and not t.quoted and not t.prefix", "and not t.prefix")],
        ["tests/core/test_search_query.py::test_words_match_by_their_stem_but_phrases_prefixes_fields_and_capitals_as_written"],
        id="search-phrases-stemmed",
    ),
    # ---- end of i34-query ----
    # ---- rows of branch i34-index: append below ----
    pytest.param(
        "pollers/email/mail/header_block.py",
        [("        elif kind == \"bad\":\n            problems.append(\"header: a malformed line among the headers, left out\")\n"
          "            continue\n", "        elif kind == \"bad\":\n            pass\n")],
        ["tests/email/test_email_searchable.py::test_a_stray_line_among_the_headers_does_not_end_them"],
        id="malformed-header-line-ends-the-headers",
    ),
    pytest.param(
        "pollers/email/mail/header_block.py",
        [("    if bad and (after < max(2, len(bad)) or any(", "    if False and (after < max(2, len(bad)) or any(")],
        ["tests/email/test_email_searchable.py::test_text_with_no_empty_line_before_it_stays_the_body"],
        id="body-without-separator-read-as-headers",
    ),
    pytest.param(
        "memex/search/index.py",
        [("            self.db.execute(\"UPDATE messages SET thread = ? WHERE thread = ?\", (lowest, other))\n",
          "            pass\n")],
        ["tests/core/test_search_threads.py::test_a_thread_joins_the_same_whichever_mail_comes_first"],
        id="thread-joined-only-in-arrival-order",
    ),
    pytest.param(
        "memex/search/rows.py",
        [("    ids = [native_id, conv_id, *_names(extra.get(\"references\")), *_names(extra.get(\"in_reply_to\"))]\n",
          "    ids = [native_id, *_names(extra.get(\"in_reply_to\"))]\n")],
        ["tests/core/test_search_threads.py::test_conversations_are_those_notmuch_makes"],
        id="thread-not-joined-across-missing-parents",
    ),
    pytest.param(
        "memex/search/bulk.py",
        [("        db.execute(INSERT_LINKS)\n", "")],
        ["tests/core/test_search_bulk.py::test_a_rebuild_makes_the_rows_the_python_path_makes"],
        id="rebuild-without-thread-links",
    ),
    # ---- end of i34-index ----
    # ---- rows of branch i35-people: append below ----
    pytest.param(
        "memex/people/book.py",
        [("        if not _same_name([cards[i].name for i in who]):\n", "        if False:\n")],
        ["tests/core/test_people.py::test_one_contact_exported_five_times_is_one_person_and_a_shared_address_with_another_name_a_conflict"],
        id="people-handle-shared-by-two-names-merged",
    ),
    pytest.param(
        "memex/people/book.py",
        [("        for handle in filter(None, (normalize(x, rules) for x in d.handles)):\n", "        for handle in ():\n")],
        ["tests/core/test_people_search.py::test_with_a_person_finds_exactly_their_messages_in_every_source"],
        id="people-decisions-ignored",
    ),
    pytest.param(
        "memex/search/persons.py",
        [('"to": (f"{received} EXCEPT {sent}", handles * 2)', '"to": (received, handles)')],
        ["tests/core/test_people_search.py::test_with_a_person_finds_exactly_their_messages_in_every_source"],
        id="people-to-counts-what-they-sent",
    ),
    # ---- end of i35-people ----
    # ---- rows of branch i36-mcp: append below ----
    pytest.param(
        "memex/read/archive.py",
        [('?mode=ro"', '?mode=rwc"'), ('"PRAGMA query_only = ON"', '"PRAGMA query_only = OFF"')],
        ["tests/core/test_mcp.py::test_the_index_connection_refuses_writes"],
        id="mcp-index-opened-read-write",
    ),
    pytest.param(
        "memex/assistant/server.py",
        [("from memex.assistant import render\n", "from memex.assistant import render\nfrom memex.search.build import rebuild as rebuild_index\n"),
         ('    "index_status": (\n', '    "rebuild_index": ("Rebuild the search index from the store.", {}),\n    "index_status": (\n')],
        ["tests/core/test_mcp.py::test_an_assistant_lists_searches_pages_and_reads_over_stdio",
         "tests/core/test_mcp.py::test_the_server_imports_nothing_that_writes"],
        id="mcp-write-tool-reachable",
    ),
    pytest.param(
        "memex/assistant/render.py",
        [('.replace("<<<", "<<\\\\x3c")', "")],
        ["tests/core/test_mcp.py::test_a_hostile_message_comes_back_as_inert_fenced_data"],
        id="mcp-forged-fence-marker",
    ),
    pytest.param(
        "memex/assistant/render.py",
        [('visible("" if value is None else value, multiline=multiline)', 'str("" if value is None else value)')],
        ["tests/core/test_mcp.py::test_a_hostile_message_comes_back_as_inert_fenced_data"],
        id="mcp-message-controls-raw",
    ),
    pytest.param(
        "memex/people/__init__.py",
        [("seen.read_only(index, s.rules) if read_only or index_rows is None else seen.follow(index, s.rules, index_rows)", "seen.follow(index, s.rules, PEOPLE_ROWS)"), ("    from memex.people import book_cache, card_cache, cards, seen\n", "    from memex.people import book_cache, card_cache, cards, seen\n    from memex.search.schema import PEOPLE_ROWS\n")],
        ["tests/core/test_mcp.py::test_people_and_with_terms_read_the_people_layer_without_writing"],
        id="mcp-people-handles-file-written",
    ),
    # ---- end of i36-mcp ----
    # ---- rows of branch i37-plugins: append below ----
    pytest.param(
        "pollers/teams/history.py",
        [("t > top - poller.settings.overlap_us]", "t >= top]")],
        ["tests/core/test_conformance.py::test_teams_conforms"],
        id="teams-head-forgets-the-overlap",
    ),
    pytest.param(
        "memex/live_cursor.py",
        [("        if head is None:\n", "        if False:\n")],
        ["tests/core/test_conformance.py::test_start_now_on_a_type_without_head_is_a_config_error"],
        id="start-now-without-head-is-an-internal-error",
    ),
    # ---- end of i37-plugins ----
    pytest.param(
        "memex/people/book.py",
        [('    decisions_from(doc, "people.toml", rules)  # the reading rule, before a byte is made\n', ""),
         ('    if decisions_from(tomllib.loads(text), "people.toml", rules) != [Decision(d.id, d.name, d.handles, d.never) for d in ordered]:\n',
          "    if False:\n")],
        ["tests/core/test_bad_inputs_people_edges.py::test_the_writer_refuses_a_value_memex_could_not_read_back"],
        id="people-file-written-unchecked",
    ),
    pytest.param(
        "pollers/email/imap/push.py",
        [('        conn.sock.sendall(b"DONE\\r\\n")\n        end = time.monotonic() + self.settings.timeout\n',
          '        conn.sock.sendall(b"DONE\\r\\n")\n        end = time.monotonic() + 3600\n')],
        ["tests/email/test_imap_push.py::test_a_black_holed_connection_is_found_dead_within_its_deadline_and_reopened"],
        id="imap-push-waits-for-ever-on-a-dead-connection",
    ),
    pytest.param(
        "pollers/email/imap/push.py",
        [('                link.wake("connected")', '                pass')],
        ["tests/email/test_imap_push.py::test_a_black_holed_connection_is_found_dead_within_its_deadline_and_reopened"],
        id="imap-push-reconnects-without-a-catch-up-poll",
    ),
    pytest.param(
        "pollers/signal/cli.py",
        [("        spool_messages(self.spool, (client.pushed if client else []) + (list(got) if isinstance(got, list) else []))\n",
          "        self._records.extend(json.dumps(m).encode() for m in (list(got) if isinstance(got, list) else []))\n"),
         ("            if self._entry is None:\n                if self._claim is None:\n",
          "            if self._entry is None and not self._records:\n                if self._claim is None:\n")],
        ["tests/signal/test_signal_daemon.py::test_a_poll_killed_after_the_daemon_handed_over_keeps_the_messages_in_the_spool"],
        id="signal-daemon-messages-held-in-memory-not-spooled-before-rendering",
    ),
    pytest.param(
        "memex/uploader.py",
        [('    return b"\\xef\\xbf\\xbd" not in body\n', "    return True\n")],
        ["tests/core/test_search_follow.py::test_a_record_handed_over_as_its_dict_gives_the_row_its_stored_bytes_give"],
        id="index-handed-a-dict-its-bytes-do-not-read-back-as",
    ),
    # ---- rows of branch i42-read: append below ----
    pytest.param(
        "memex/read/socket.py",
        [("    old = os.umask(0o177)\n", "    old = os.umask(0o022)\n"), ("    os.chmod(path, 0o600)\n", "")],
        ["tests/core/test_read_socket.py::test_the_socket_is_owner_only_and_a_live_one_is_left_alone"],
        id="read-socket-open-to-other-users",
    ),
    pytest.param(
        "memex/read/socket.py",
        [("        if request.get(\"config\") != self.identity:\n", "        if False:\n")],
        ["tests/core/test_read_socket.py::test_a_stale_socket_is_answered_in_process_and_replaced"],
        id="read-socket-answers-another-config",
    ),
    pytest.param(
        "memex/read/socket.py",
        [("        if _listening(path):\n            return SocketServer(archive, path, None)\n", "")],
        ["tests/core/test_read_socket.py::test_the_socket_is_owner_only_and_a_live_one_is_left_alone"],
        id="read-socket-steals-a-live-servers-socket",
    ),
    # ---- end of i42-read ----
    # ---- i42-web ----
    pytest.param(
        "memex/web/security.py",
        [('        if host_name(_header(scope, b"host")) not in self.hosts:\n', "        if False:\n")],
        ["tests/web/test_http.py::test_a_foreign_host_and_a_writing_method_are_refused"],
        id="web-answers-any-host-dns-rebinding",
    ),
    pytest.param(
        "memex/web/security.py",
        [("            if not (offered and hmac.compare_digest(offered.encode(), self.token.encode())):\n", "            if False:\n")],
        ["tests/web/test_http.py::test_off_loopback_every_request_needs_the_token"],
        id="web-token-not-checked",
    ),
    pytest.param(
        "memex/web/mail.py",
        [("        attribute_filter=None if remote else _local_only,\n", "        attribute_filter=None,\n")],
        ["tests/web/test_http.py::test_the_sanitiser_keeps_text_and_drops_everything_active"],
        id="web-mail-fetches-remote-images-unasked",
    ),
    pytest.param(
        "memex/web/views.py",
        [('        inline = kind != "file" and request.query_params.get("download") != "1"\n', '        inline = request.query_params.get("download") != "1"\n')],
        ["tests/web/test_http.py::test_attachments_a_browser_could_run_are_downloads_and_names_are_safe"],
        id="web-serves-html-and-svg-attachments-inline",
    ),
    # ---- end of i42-web ----
    # ---- rows of branch i44-lake: append below ----
    pytest.param(
        "memex/lake/table.py",
        [("        return [key for key in listed if key not in held]\n", "        return listed\n")],
        ["tests/core/test_lake.py::test_an_update_adds_only_what_is_new_and_a_new_revision_ends_the_old_ones_currency"],
        id="lake-update-adds-what-the-table-has",
    ),
    pytest.param(
        "memex/lake/table.py",
        [("            elif v.current != now:\n", "            elif False:\n")],
        ["tests/core/test_lake.py::test_an_update_adds_only_what_is_new_and_a_new_revision_ends_the_old_ones_currency"],
        id="lake-old-revision-stays-current",
    ),
    pytest.param(
        "memex/lake/table.py",
        [("        self.followed |= {key for key in todo if key in self._revised}", "        self.followed |= set()")],
        ["tests/core/test_lake.py::test_an_original_stored_after_its_revision_and_a_second_edit_settle_which_version_is_current"],
        id="lake-original-after-its-revision-taken-for-current",
    ),
    pytest.param(
        "memex/lake/sql.py",
        [('    con.execute("SET enable_external_access = false")\n', "")],
        ["tests/core/test_lake.py::test_memex_sql_reads_but_cannot_write_and_bad_queries_are_one_line"],
        id="lake-sql-writes-where-it-is-told",
    ),
    # ---- end of i44-lake ----
    # ---- rows of branch i40-cli: append below ----
    pytest.param(
        "memex/error_lines.py",
        [("        if reader_gone(exc):\n            raise", "        if False:\n            raise")],
        ["tests/core/test_bad_inputs_edges.py::test_a_closed_pipe_ends_the_command_quietly[tail]",
         "tests/core/test_bad_inputs_edges.py::test_a_closed_pipe_ends_the_command_quietly[search *]"],
        id="closed-pipe-is-an-internal-error",
    ),
    pytest.param(
        "memex/search/parse.py",
        [("        if self.depth > MAX_DEPTH:\n", "        if False:\n")],
        ["tests/core/test_bad_inputs_edges.py::test_a_bad_input_at_the_edges_gets_one_line[search-200-parentheses]",
         "tests/core/test_bad_inputs_edges.py::test_a_bad_input_at_the_edges_gets_one_line[search-50-stacked-nots]"],
        id="query-depth-unbounded",
    ),
    # ---- end of i40-cli ----
    # ---- rows of branch i40-guar: append below ----
    pytest.param(
        "memex/store/files.py",
        [("(mtime < now - STALE_TMP_SECONDS or writer_gone(name))", "(mtime < now - STALE_TMP_SECONDS)")],
        ["tests/core/test_store_temp_sweep.py::test_a_poll_after_kill_9_removes_the_dead_writers_temp_files_and_verify_reports_them"],
        id="temp-files-of-a-killed-writer-kept-an-hour",
    ),
    pytest.param(
        "memex/runner.py",
        [("    follower.cutoff = cutoff\n", "    follower.cutoff = None\n")],
        ["tests/core/test_poll_under_load.py::test_polls_beside_a_cpu_hog_end_within_the_time_limit_and_the_index_misses_nothing"],
        id="index-work-after-the-time-limit-unbounded",
    ),
    pytest.param(
        "memex/runner.py",
        [('        result.extra["moved_idle"] = True', "        pass")],
        ["tests/core/test_runner_faults.py::test_a_cursor_that_moves_while_nothing_is_stored_shows_as_stuck_after_five_polls"],
        id="cursor-moving-while-nothing-is-stored-shown-idle",
    ),
    pytest.param(
        "memex/conformance.py",
        [("    if not moves_when_idle and (still.keys or now != was):", "    if False:")],
        ["tests/core/test_conformance.py::test_the_kit_catches_a_poller_that_breaks_a_promise[cursor-moves-when-idle-still]"],
        id="conformance-misses-a-cursor-moving-while-idle",
    ),
    pytest.param(
        "memex/verify/inventory.py",
        [("            return True, [r for r in entry.revisions or () if not reader.has(revision_key(name, entry.native_id, r))]",
          "            return True, []")],
        ["tests/core/test_verify.py::test_a_deleted_revision_is_found_and_restored_where_the_source_lists_revisions[file]"],
        id="verify-blind-to-a-deleted-revision",
    ),
    pytest.param(
        "memex/search/build.py",
        [("                        self._drop(step[-1][1] - dropped)\n", "                        pass\n")],
        ["tests/core/test_poll_under_load.py::test_a_catch_up_cut_at_its_cutoff_keeps_what_each_transaction_added"],
        id="index-catch-up-cut-keeps-nothing",
    ),
    # ---- end of i40-guar ----
    pytest.param(
        "memex/conformance.py",
        [("        if problems:\n            raise _fail(\"capabilities\"", "        if False:\n            raise _fail(\"capabilities\"")],
        ["tests/core/test_conformance.py::test_the_kit_reports_a_misspelt_capability_and_half_a_capability"],
        id="conformance-kit-misses-a-misspelt-capability",
    ),
    # ---- end of i41-house ----
    # ---- rows of branch i42-speed ----
    pytest.param(
        "memex/people/__init__.py",
        [('        memo = f"{s.file.absolute()}\\0{index}\\0{made_from}"', '        memo = f"{s.file.absolute()}\\0{index}"')],
        ["tests/core/test_people_cache.py::test_a_read_only_reader_makes_the_book_once_per_process_until_its_inputs_change"],
        id="read-only-book-kept-after-its-cards-changed",
    ),
    pytest.param(
        "memex/read/socket.py",
        [("        if self.render is None or fields[:3] != [str(x) for x in self.identity] or facts != memex_thin.facts(os.environ):\n",
          "        if self.render is None or facts != memex_thin.facts(os.environ):\n"),
         ("memex_thin.py", "    if len(lines) != 5 or found is None or lines[1:4] != found:\n", "    if len(lines) != 5 or found is None:\n")],
        ["tests/core/test_read_socket.py::test_the_thin_client_falls_back_on_a_stale_beacon_or_a_changed_config"],
        id="thin-client-answered-for-a-changed-config",
    ),
    pytest.param(
        "memex/read/archive.py",
        [("            db.end_call()  # a statement left mid-way would keep the snapshot open past the ROLLBACK\n", "")],
        ["tests/core/test_read.py::test_a_kept_connection_sees_what_a_poll_added_and_the_file_a_rebuild_swapped_in"],
        id="kept-read-connection-keeps-a-mid-way-statements-snapshot",
    ),
    pytest.param(
        "memex/read/archive.py",
        [("            stale = [entry for entry in self._idle if entry[0] != file]\n            self._idle = [entry for entry in self._idle if entry[0] == file]\n",
          "            stale = []\n")],
        ["tests/core/test_read.py::test_a_kept_connection_sees_what_a_poll_added_and_the_file_a_rebuild_swapped_in"],
        id="kept-read-connection-reads-the-file-a-rebuild-replaced",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("path", "changes", "tests"), MUTANTS)
def test_safety_test_catches_the_naive_version(tmp_path: Path, path: str, changes: list[tuple[str, ...]], tests: list[str]) -> None:
    """With the mechanism undone, the guarding test fails (and the mutation still applies to today's code)."""
    for package in ("memex", "pollers", "tests"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "memex_thin.py", tmp_path / "memex_thin.py")
    for change in changes:  # (old, new) in ``path``, or (another file, old, new) for a mechanism spread over two
        where, old, new = change if len(change) == 3 else (path, *change)
        target = tmp_path / where
        source = target.read_text()
        assert source.count(old) == 1, f"mutation anchor not found exactly once in {where}; update MUTANTS"
        target.write_text(source.replace(old, new))
    # MEMEX_TEST_PATIENCE: the guarding test's waits are cut to a quarter (at least 10 s): under the mutant the
    # awaited condition usually never comes, and a full deadline per row made this table the suite's longest wait.
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "MEMEX_TEST_PATIENCE": "0.25"}
    for test in tests:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-rs", "-p", "no:cacheprovider", test],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if out.returncode == 0 and " skipped" in out.stdout and " passed" not in out.stdout and not os.environ.get("CI"):
            # the guarding test could not run here (no bindfs, no mount rights): say so instead of failing; CI runs it
            reason = next((ln.split(": ", 1)[-1] for ln in out.stdout.splitlines() if ln.startswith("SKIPPED")), "skipped")
            pytest.skip(f"{test} was skipped, so it cannot show the mutant is caught: {reason}")
        assert out.returncode == 1 and " failed" in out.stdout, f"{test} did not catch the mutant:\n{out.stdout[-1500:]}"
