"""Issue 34: the third attacker's probe, each attack a regression test (forgery corpus, beside
tests/test_board_forgery.py). A predictable draw, re-rolls through aliases, tolerance-sized edits that buy rank,
near-duplicates hidden behind recalibrated rows, a bloating config, slow readers, look-alike names, CRLF/BOM,
long or invisible path characters, and the entry page. Synthetic runs and real SQLite; no model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import random
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from leaderboards import attempts as attempts_store
from leaderboards import cli, identity, names, ranking, spotcheck
from leaderboards import db as DB
from leaderboards.errors import SubmissionError
from leaderboards.recompute import validate_run
from leaderboards.site import render

import board_fixtures as S
from test_board_tamper import CLS, N, edit_results, env, files, honest, rejected, stored, submit  # noqa: F401

# ---------------------------------------------------------------- 1. a draw that cannot be known in advance


def _old_scheme_published(seed: int) -> str:  # what the board published before issue 34
    return hashlib.sha256(str(seed).encode()).hexdigest()[:16]


def test_brute_force_recovers_the_old_seed_but_nothing_of_the_new_draw(env):
    """On a reduced space (2^16 instead of 2^31) brute force of the old published seed hash recovers the seed,
    hence the sample, before any submission. The new draw publishes, before the draw, only the content hash and
    a commitment to a 256-bit secret; brute force of every 16-bit secret and seed reproduces neither the
    commitment nor the tag, and a board secret below 128 bits is refused outright."""
    space = 2**16
    seed = random.Random(34).randrange(space)
    published = _old_scheme_published(seed)
    assert [s for s in range(space) if _old_scheme_published(s) == published] == [seed]  # the attack works

    con = DB.connect(env["db"])
    sub = validate_run(honest(env, "a"))
    h = sub.entries[0].doc_set_hash
    commitment = spotcheck.secret_commitment(con)  # published before any draw
    tag = spotcheck.draw_tag(con, sub.predictions_hash, CLS, h)  # published after the draw
    msg = f"semcal-spot-check-v2\0{sub.predictions_hash}\0{CLS}\0{h}".encode()
    hits = []
    for s in range(space):
        for key in (s.to_bytes(2, "big"), str(s).encode()):
            if (hmac.new(key, msg, hashlib.sha256).hexdigest() == tag
                    or hashlib.sha256(b"semcal-board-secret:" + key.hex().encode()).hexdigest() == commitment
                    or hashlib.sha256(str(s).encode()).hexdigest() == tag):
                hits.append(s)
    assert hits == []
    # the same brute force finds a secret that IS in the reduced space (the search can succeed) ...
    weak = (12345).to_bytes(2, "big")
    weak_tag = hmac.new(weak, msg, hashlib.sha256).hexdigest()
    assert [s for s in range(space) if hmac.new(s.to_bytes(2, "big"), msg, hashlib.sha256).hexdigest() == weak_tag] \
        == [12345]
    # ... which is why the board refuses a secret of fewer than 128 bits
    con.execute("UPDATE meta SET value = '3039' WHERE key = 'spot_check_secret'")
    with pytest.raises(SubmissionError, match="at least 128 bits"):
        spotcheck.draw_tag(con, sub.predictions_hash, CLS, h)


def _auditor_sample(ids: list[int], tag: str, k: int) -> list[int]:
    """The auditor's own implementation of the documented draw (docs/LEADERBOARD.md, "Auditing a draw")."""
    a = sorted(ids)
    for i in range(k):
        r = int(hashlib.sha256(f"{tag}:{i}".encode()).hexdigest(), 16) % (len(a) - i)
        a[i], a[i + r] = a[i + r], a[i]
    return sorted(a[:k])


def test_an_auditor_recomputes_the_published_draw(env):
    con = DB.connect(env["db"])
    sub = validate_run(honest(env, "a", n=300))
    h = sub.entries[0].doc_set_hash
    tag = spotcheck.draw_tag(con, sub.predictions_hash, CLS, h)
    ids = list(range(300))
    published = spotcheck.sample_doc_ids(ids, tag)
    assert published == _auditor_sample(ids, tag, spotcheck.sample_size(300)) and len(set(published)) == len(published)
    # once the operator retires and reveals the secret: the commitment and every tag are checked
    secret = con.execute("SELECT value FROM meta WHERE key = 'spot_check_secret'").fetchone()[0]
    assert hashlib.sha256(b"semcal-board-secret:" + secret.encode()).hexdigest() == spotcheck.secret_commitment(con)
    msg = f"semcal-spot-check-v2\0{sub.predictions_hash}\0{CLS}\0{h}".encode()
    assert hmac.new(bytes.fromhex(secret), msg, hashlib.sha256).hexdigest() == tag


# ---------------------------------------------------------------- 2. no re-rolls


def _model_folder(root: Path, payload: bytes = b"weights" * 1000) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(payload)
    return root


def test_aliases_revisions_and_path_spellings_resolve_to_one_weights_key(tmp_path):
    folder = _model_folder(tmp_path / "run" / "checkpoint-500")
    copy = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(folder, copy)
    (copy / "model.safetensors").rename(copy / "other-name.safetensors")
    link = tmp_path / "link"
    link.symlink_to(folder)
    keys = set()
    for spelling in (f"{folder}", f"{folder}/.", f"{folder}/", f"{link}", f"{copy}",
                     f"{folder},revision=r1", f"{folder},revision=r2", f"{folder},revision=main"):
        pretrained, _ = spotcheck.claimed_model(f"pretrained={spelling},dtype=float32")
        keys.add(identity.weights_key(pretrained))
    assert len(keys) == 1 and next(iter(keys)).startswith("tensors-sha256:")  # issue 43: a hash of the tensors
    other = _model_folder(tmp_path / "other", b"weights" * 999 + b"X" * 7)
    assert identity.weights_key(str(other)) not in keys
    # a catalogue model: the tensors of the board's install (issue 43: so a symlink or copy of its folder is the
    # same weights), whatever the spelling
    assert identity.weights_key("semcal:smollm2-135m") == identity.known_weights("smollm2-135m")


def test_rejected_attempts_are_capped_per_weights_whatever_the_alias(env, capsys, monkeypatch, tmp_path):
    """Three rejections under revision=r1, r2, main: the fourth spelling (<folder>/.) is refused before any
    re-scoring; the messages name the failure, not the documents or the size of a difference."""
    folder = _model_folder(tmp_path / "m")
    calls = []

    def rescore_finds_a_mismatch(results_path, **kw):  # the re-scoring (a model run) disagrees
        calls.append(kw["tags"])
        raise spotcheck.SpotCheckRejected(
            "spot check failed: semcal_synth_cls: the submitted probabilities are not the model's",
            detail=json.dumps({"worst": {"doc_id": 17, "diff": 0.05}}))

    monkeypatch.setattr(spotcheck, "spot_check", rescore_finds_a_mismatch)
    for i, spelling in enumerate([f"{folder},revision=r1", f"{folder},revision=r2", f"{folder},revision=main"]):
        path = honest(env, f"r{i}", seed=i, model_name=spelling)
        line = rejected(capsys, path, "spot check failed", f"rejected attempt {i + 1} of 3")
        assert "17" not in line and "0.05" not in line
    assert len(calls) == 3 and len({json.dumps(c, sort_keys=True) for c in calls}) == 3  # each drawn afresh
    path = honest(env, "r4", seed=4, model_name=f"{folder}/.")
    rejected(capsys, path, "spot check refused", "the board allows 3", "nothing was re-scored")
    assert len(calls) == 3
    con = DB.connect(env["db"])
    atts = attempts_store.attempts(con)
    assert len(atts) == 3 and len({a["weights"] for a in atts}) == 1 and atts[0]["weights"].startswith("tensors-")
    # the operator clears the cap; the attempts stay recorded
    assert cli.main(["attempts", "--clear", atts[0]["weights"]]) == 0
    assert attempts_store.rejected_attempts(con, atts[0]["weights"], "anonymous") == 0 and len(attempts_store.attempts(con)) == 3
    assert stored() == []


def test_a_filter_the_task_does_not_produce_is_a_recorded_attempt(env, capsys, monkeypatch, tmp_path):
    """An invented filter is refuted by the re-scoring (the task's own run has no such row): that rejection
    is recorded like a mismatch and counts towards the cap."""
    folder = _model_folder(tmp_path / "m")
    monkeypatch.setattr(spotcheck, "_rescorable", lambda *a: None)

    def rescore_without_the_filter(task, jobs, sub_rows, n_docs, split, pretrained, tmp, worst, progress):
        filters, meta, ids, _ = jobs[0]
        return "", spotcheck._compare(task, filters, sub_rows, {}, ids, meta, split, worst)  # real comparison

    monkeypatch.setattr(spotcheck, "_rescore", rescore_without_the_filter)
    path = honest(env, "inv", model_name=str(folder))
    line = rejected(capsys, path, "spot check failed", "is not produced by the task", "rejected attempt 1 of 3")
    (att,) = attempts_store.attempts(DB.connect(env["db"]))
    assert att["outcome"] == "rejected" and att["weights"] == identity.weights_key(str(folder))
    assert "draws" in json.loads(att["detail"]) and "doc" not in line.split("task")[-1]


def _hypergeom_miss(n, m, k):  # independent of spotcheck.miss_probability: the product form
    p = 1.0
    for i in range(k):
        p *= (n - m - i) / (n - i)
    return max(p, 0.0)


def test_forgery_reaches_the_tier_over_every_allowed_attempt_as_the_formula_says(capsys):
    """A forger of m = 1 % of N documents submits fresh variants (each a new content hash, so a new HMAC draw)
    until accepted or capped: P(reach) = 1 - (1 - q)^A, q = C(N-m, k)/C(N, k), A = the cap. Simulated with the
    board's own draw (HMAC tags under a random 256-bit secret, sample_doc_ids)."""
    import sqlite3

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    rows = []
    for n, trials in ((200, 4000), (445, 2000)):
        ids, k, m = list(range(n)), spotcheck.sample_size(n), math.ceil(0.01 * n)
        cap = attempts_store.max_attempts()
        rng = random.Random(n)
        reached = 0
        for t in range(trials):
            forged = set(rng.sample(ids, m))
            for a in range(cap):
                tag = spotcheck.draw_tag(con, f"content-{t}-{a}", CLS, "docs")
                if not forged & set(spotcheck.sample_doc_ids(ids, tag)):
                    reached += 1
                    break
        rate = reached / trials
        q = _hypergeom_miss(n, m, k)
        want = 1 - (1 - q) ** cap
        assert want == pytest.approx(spotcheck.reach_probability(n, m, k, cap), rel=1e-9)
        assert abs(rate - want) <= 4 * math.sqrt(want * (1 - want) / trials) + 1e-3, (n, rate, want)
        assert want <= 1 - (1 - spotcheck.MISS_PROB) ** cap  # <= 2.97 % for the default cap of 3
        rows.append((n, k, m, cap, rate, want))
    with capsys.disabled():
        print("\nN    k    m  attempts  reached(sim)  formula 1-(1-q)^A")
        for n, k, m, cap, rate, want in rows:
            print(f"{n:<4} {k:<4} {m:<2} {cap:<9} {rate:.4f}        {want:.4f}")


# ---------------------------------------------------------------- 3. edits inside the tolerance buy no rank


def _toward_gold(items, eps):
    out = []
    for it in items:
        p = np.asarray(it["probs"], float)
        g = int(it["gold"])
        moved = p.copy()
        moved[g] = min(1.0, p[g] + eps)
        others = [j for j in range(len(p)) if j != g]
        take = moved[g] - p[g]
        moved[others] -= take * p[others] / p[others].sum()  # every other class moves less than eps
        out.append({**it, "probs": moved.tolist()})
    return out


def _load(env, name, filters, tier="spot-checked"):
    path = S.write_run(env["tmp"] / name, CLS, filters, env["reg"][CLS].metrics)
    con = DB.connect(env["tmp"] / f"{name}.sqlite")
    sid = DB.insert(con, validate_run(path), None, "base", tier=tier)
    rows = [e for e in DB.load_entries(con) if e["submission_id"] == sid]
    for r in rows:
        r["submission_id"] = name
        r["entry_id"] = f"{name}/{r['filter']}"
    return rows


def test_a_6_5e6_forgery_toward_gold_cannot_outrank_its_honest_twin(env):
    eps = 6.5e-6
    items, semsoft = S.cls_items(N, seed=7), S.cls_items(N, seed=7, temperature=2.0)
    honest_rows = _load(env, "honest", {"constrained": items, "semsoft": semsoft})
    forged_rows = _load(env, "forged", {"constrained": _toward_gold(items, eps), "semsoft": _toward_gold(semsoft, eps)})
    worse_rows = _load(env, "worse", {"constrained": S.cls_items(N, seed=7, temperature=3.0),
                                      "semsoft": S.cls_items(N, seed=7, temperature=4.0)})
    model = lambda rows: sorted((r for r in rows if not r["is_reference"]), key=lambda r: r["filter"])  # noqa: E731
    assert len(model(honest_rows)) == 2
    for h, f in zip(model(honest_rows), model(forged_rows)):
        assert f["board"]["brier"] < h["board"]["brier"]  # the forgery is real: a better raw Brier ...
        assert ranking._rank([f["board"]["brier"], h["board"]["brier"]]) == [1, 2]  # ... ranked above without bands
    kept = ranking.rank_entries(honest_rows + forged_rows + worse_rows)
    by = {(e["submission_id"], e["filter"]): e for e in kept if not e["is_reference"]}
    for f in ("constrained", "semsoft"):
        for col in ("brier", "ece", "prr"):
            assert by[("forged", f)][f"{col}_rank"] >= by[("honest", f)][f"{col}_rank"], (f, col)
        assert by[("worse", f)]["brier_rank"] > by[("honest", f)]["brier_rank"]  # real differences still rank
    groups = {(g["model_name"], g["filter"]): g for g in ranking.overall(kept)}
    assert len(groups) >= 2


def test_worst_case_bands_hold_for_random_edits_within_the_tolerance():
    """The Brier and ECE bands of ranking.tolerance_interval bound random edits of every probability by at most
    the tolerance (an independent computation of both metrics with numpy)."""
    from semcal_eval.core import metrics as M

    rng = np.random.default_rng(0)
    tol = spotcheck.TOLERANCE
    for trial in range(20):
        n, k = 200, 5
        p = rng.dirichlet(np.ones(k) * 0.5, size=n)
        gold = rng.integers(0, k, n)
        d = rng.uniform(-tol, tol, size=(n, k))
        d -= d.mean(axis=1, keepdims=True)
        d *= tol / max(tol, np.abs(d).max())
        q = np.clip(p + d, 0, 1)
        q /= q.sum(axis=1, keepdims=True)
        t = np.eye(k)[gold]

        def brier(x):
            return float(np.mean(np.sum((x - t) ** 2, axis=1)))

        def entry(x):
            conf, correct = x.max(axis=1), (x.argmax(axis=1) == gold).astype(float)
            return {"board": {"brier": brier(x), "ece": float(M.calibration_error(y_true=correct, y_prob=conf, n_bins=15))},
                    "conf": conf, "correct": correct, "kind": "classification"}

        a, b = entry(p), entry(q)
        if not np.array_equal(a["correct"], b["correct"]):
            continue  # a flipped top label is outside the ECE bound (documented)
        for col in ("brier", "ece"):
            lo, hi = ranking.tolerance_interval(b, col)
            assert lo <= a["board"][col] <= hi, (trial, col)


def test_the_honest_copy_after_a_forgery_is_a_near_duplicate_despite_recalibrated_rows(env, capsys):
    """constrained_ts amplifies a 6.5e-6 edit of constrained (fitted temperature); the near-duplicate test
    compares the raw rows only, so the honest run submitted after its forged twin is refused."""
    from semcal_eval.core import recalibration

    def with_ts(items):
        probs = np.asarray([it["probs"] for it in items])
        labels = np.asarray([it["gold"] for it in items])
        fold = np.arange(len(items)) % 2
        ts = [None] * len(items)
        for f in (0, 1):
            fit_on, apply_to = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            scaled, fit = recalibration.temperature_scale(probs[fit_on], labels[fit_on], probs[apply_to])
            for i, p in zip(apply_to, scaled):
                ts[i] = {**items[i], "probs": p.tolist(), "temperature": float(fit.T), "at_bound": bool(fit.at_bound)}
        return {"constrained": items, "constrained_ts": ts}

    items = S.cls_items(80, seed=3, temperature=0.6)
    S.write_run(env["tmp"] / "forged", CLS, with_ts(_toward_gold(items, 6.5e-6)), env["reg"][CLS].metrics)
    S.write_run(env["tmp"] / "honest", CLS, with_ts(items), env["reg"][CLS].metrics)
    assert submit(env["tmp"] / "forged", "forged") == 0
    capsys.readouterr()
    rejected(capsys, env["tmp"] / "honest", "duplicate submission", name="honest")


def test_a_run_of_derived_rows_only_is_compared_on_those():
    """The near-duplicate test reads raw rows; a submission holding only derived rows (constrained_ts here) is
    compared with the stored derived rows instead of with nothing."""
    import sqlite3
    from types import SimpleNamespace

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE entries (submission_id INTEGER, task TEXT, filter TEXT, is_reference INTEGER, "
                "n_docs INTEGER, doc_set_hash TEXT, conf BLOB, correct BLOB)")
    conf, correct = np.array([0.9, 0.4, 0.7]), np.array([1.0, 0.0, 1.0])
    for sid, flt in ((7, "constrained_ts"), (8, "constrained")):
        con.execute("INSERT INTO entries VALUES (?, 't', ?, 0, 3, 'h', ?, ?)",
                    (sid, flt, conf.astype("<f8").tobytes(), correct.astype("<f8").tobytes()))

    def entry(flt, c):
        return SimpleNamespace(is_reference=False, filter=flt, conf=c, correct=correct, task="t", doc_set_hash="h",
                               n_docs=3)

    assert DB._near_duplicate(con, SimpleNamespace(entries=[entry("constrained_ts", conf + 1e-7)])) == 7
    # with a raw row present, only stored raw rows count: the stored constrained row (#8), not #7's derived one
    assert DB._near_duplicate(con, SimpleNamespace(entries=[entry("constrained", conf)])) == 8
    assert DB._near_duplicate(con, SimpleNamespace(entries=[entry("constrained_ts", conf + 0.1)])) is None


# ---------------------------------------------------------------- 4. bounded provenance, board.json, server


def test_a_config_of_thousands_of_keys_is_refused_before_anything_is_stored(env, capsys):
    path = honest(env, "big")
    edit_results(path, lambda d: d["config"].update({f"k{i}": "x" * 4000 for i in range(7600)}))
    rejected(capsys, path, "config has", "keys; the board keeps at most 64")
    path = honest(env, "fat")
    edit_results(path, lambda d: d["config"].update({f"k{i}": "x" * 4000 for i in range(8)}))
    rejected(capsys, path, "config is", "bytes of JSON; the board keeps at most 16384")
    assert stored() == []


def _render_filters(env, n_filters: int, capsys) -> int:
    items = S.cls_items(200, seed=1)
    filters = {f"f{i}": S.cls_items(200, seed=1, temperature=1.0 + i / 10) for i in range(n_filters - 1)}
    filters["prior"] = S.prior_items(items)
    path = honest(env, f"run{n_filters}", filters=filters)
    edit_results(path, lambda d: d["config"].update({f"note{i}": "y" * 200 for i in range(40)}))  # a full config
    db = env["tmp"] / f"b{n_filters}.sqlite"
    assert cli.main(["submit", str(path), "--method", "base", "--db", str(db)]) == 0, capsys.readouterr().err
    site = env["tmp"] / f"site{n_filters}"
    assert cli.main(["render", "--out", str(site), "--db", str(db)]) == 0
    data = json.loads((site / "board.json").read_text())
    assert len(data["submissions"]) == 1 and all("provenance" not in r for r in data["entries"])
    assert (site / "board.json").read_text().count('"note0"') == 1  # the provenance once, not once per row
    return (site / "board.json").stat().st_size


def test_board_json_keeps_provenance_once_per_submission(env, capsys):
    b8, b32 = _render_filters(env, 8, capsys), _render_filters(env, 32, capsys)
    with capsys.disabled():
        print(f"\nboard.json bytes: 8 filters {b8}, 32 filters {b32}")
    assert b32 < 4.5 * b8 and b32 < 400_000  # grows with the rows' metrics only


def test_slow_readers_cannot_starve_the_preview_server(env, tmp_path):
    """40 clients send complete requests for a large file and read it at ~64 KB/s, reconnecting; legitimate
    requests must still be answered. Loopback only, bounded to a few seconds."""
    from leaderboards import server as SV

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<!doctype html><title>board</title>")
    (site / "board.json").write_bytes(b"[" + b"0," * (4 * 1024 * 1024) + b"0]")  # 8 MiB
    srv = SV.make_server(site, 0, read_timeout=5, deadline=30, min_rate=256 * 1024, min_rate_grace=0.5,
                         response_deadline=3.0, max_connections=16)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    stop = time.monotonic() + 6.0
    slow_bytes = []

    def slow_reader():
        while time.monotonic() < stop:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(b"GET /board.json HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                got = 0
                while time.monotonic() < stop:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += len(chunk)
                    time.sleep(0.06)  # ~64 KB/s
                slow_bytes.append(got)
                s.close()
            except OSError:
                time.sleep(0.05)

    threads = [threading.Thread(target=slow_reader, daemon=True) for _ in range(40)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    ok = total = 0
    while time.monotonic() < stop - 0.5:
        total += 1
        try:
            ok += urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=3).status == 200
        except OSError:
            pass
        time.sleep(0.1)
    for t in threads:
        t.join(timeout=10)
    srv.shutdown()
    srv.server_close()
    print(f"legitimate requests served during the slow-read attack: {ok} of {total}")
    assert total >= 10 and ok >= 0.9 * total, (ok, total)
    assert max(slow_bytes, default=0) < 8 * 1024 * 1024  # no slow reader got the whole file at its pace


# ---------------------------------------------------------------- 5. names and text

LOOK_ALIKES = [
    "Smo\u217cLM2-135M",          # SMALL ROMAN NUMERAL FIFTY
    "Smol\uff2cM2-135M",          # FULLWIDTH L
    "\U0001d5b2molLM2-135M",      # MATHEMATICAL SANS-SERIF S
    "SmolLM2\u2010135M",          # HYPHEN
    "SmolLM2\u2011135M",          # NON-BREAKING HYPHEN
    "SmolLM2\u2212135M",          # MINUS SIGN
    "SmolLM2-1З5M",               # CYRILLIC ZE for 3
    "SmolLM2-135\u041c",          # CYRILLIC EM
    "SmolLM2-\uff11\uff13\uff15M",  # FULLWIDTH DIGITS
    "Smo1LM2-135M",               # digit one for l
    "SmoILM2-135M",               # capital I for l
    "SmolLM2-l35M",               # l for 1
    "SmolLM2-135\u039c",          # GREEK CAPITAL MU
    "SmolLM2\u00a0135M",          # NBSP (a space-separated twin below)
]


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_look_alike_names_of_a_stored_entry_are_refused(name):
    stored_names = ["SmolLM2-135M", "SmolLM2 135M", "gemma-3-270m"]
    with pytest.raises(SubmissionError, match="looks like the stored name|mixes the|mixes scripts"):
        names.check_unconfusable(names.model_name(name) if "\u00a0" not in name else name, stored_names)


@pytest.mark.parametrize("name", ["google/gemm\u0251-3-270m", "google/gemma-\u0417-270m", "google\u2044gemma-3-270m",
                                  "google/gemma\u20103-270m", "google/gemma-3-27\uff10m"])
def test_the_issues_gemma_forms_are_refused_at_submit_before_any_spot_check(env, capsys, name, monkeypatch):
    assert submit(honest(env, "orig", model_name="google/gemma-3-270m"), "g") == 0
    capsys.readouterr()
    monkeypatch.setattr(spotcheck, "spot_check", lambda *a, **k: pytest.fail("the spot check ran first"))
    rejected(capsys, honest(env, "alike", seed=1, model_name=name), "model name")


def test_distinct_names_are_kept():
    for ok in ["SmolLM2-360M", "\u6a21\u578b v2", "Qwen2.5-Coder-0.5B", "Vi\u1ec7t-LM", "Mod\u00e9le"]:
        assert names.check_unconfusable(ok, ["SmolLM2-135M", "gemma-3-270m"]) == ok


def test_crlf_samples_and_a_bom_in_results_or_samples_are_accepted(env):
    path = honest(env, "crlf")
    res, samp = files(path)
    samp.write_bytes(samp.read_bytes().replace(b"\n", b"\r\n"))
    res.write_bytes(b"\xef\xbb\xbf" + res.read_bytes())
    samp.write_bytes(b"\xef\xbb\xbf" + samp.read_bytes())
    assert submit(path) == 0


def test_crlf_with_a_trailing_blank_line_is_still_refused(env, capsys):
    path = honest(env, "crlf")
    _, samp = files(path)
    samp.write_bytes(samp.read_bytes().replace(b"\n", b"\r\n") + b"\r\n")
    rejected(capsys, path, "blank line")


@pytest.mark.parametrize("pretrained, needle", [
    ("/models/" + "a" * 300, "bytes long; file systems allow 255"),
    ("/models/bad\x00name", "control or invisible character"),
    ("/models/evil\u202egnp.model", "control or invisible character"),
])
def test_bad_pretrained_paths_are_refused_with_a_clear_message_before_any_spot_check(env, capsys, monkeypatch,
                                                                                    pretrained, needle):
    monkeypatch.setattr(spotcheck, "spot_check", lambda *a, **k: pytest.fail("the spot check ran first"))
    path = honest(env, "p")
    edit_results(path, lambda d: d["config"].update({"model_args": f"pretrained={pretrained},dtype=float32"}))
    out = rejected(capsys, path, needle)
    assert "File name too long" not in out and "self-reported" not in out


def test_a_300_character_output_folder_is_refused_clearly(env, capsys):
    rejected(capsys, env["tmp"] / ("x" * 300), "bytes long; file systems allow 255")


# ---------------------------------------------------------------- 6. the entry page


def test_entry_page_has_a_provenance_table_diagrams_beside_rows_and_no_board_paths(env, tmp_path):
    con = DB.connect(env["db"])
    sub = validate_run(honest(env, "a"))
    board_path = "/root/.cache/semcal/models/smollm2-135m-1234567890ab"
    ver = {"spot_check": {"n_docs": 60, "docs_per_task": {CLS: 60}, "tolerance": spotcheck.TOLERANCE,
                          "max_abs_diff": 1e-6, "weights": "gguf-sha256:" + "a" * 64, "dtype": "float32",
                          "backend": "hf-semsoft", "device": "cpu", "rescored_with": board_path,
                          "rejected_attempts_before": 1, "max_attempts": 3, "content_hash": sub.predictions_hash,
                          "secret_commitment": "c" * 64, "draws": {CLS: {"tag": "d" * 64, "doc_ids": [1, 2, 3]}}},
           "pretrained": board_path}
    DB.insert(con, sub, None, "base", tier="spot-checked", verification=ver)
    site = tmp_path / "site"
    render(DB.load_entries(con), site, warn=None)
    (page,) = (site / "entries").glob("*.html")
    html = page.read_text()
    assert 'id="provenance"' in html and "gguf-sha256:" in html and "1 rejected attempt(s)" in html
    assert "tolerance max |Δp|" in html and "hf-semsoft" in html
    assert "/root/" not in html and "/root/" not in (site / "board.json").read_text()
    rows = html.split('<table id="entry">')[1].split("</table>")[0]
    assert rows.count("<tr>") - 1 == rows.count('class="reliability"') >= 1  # a diagram in every row


def test_entry_page_in_a_real_browser_at_desktop_and_phone_width(env, tmp_path):
    """Chromium (tests/test_leaderboard_browser.py's setup): each diagram sits in its row, the provenance table
    is readable, nothing overflows the page at phone width (the wide table scrolls in its own box).
    Screenshots: $SEMCAL_BOARD_SCREENSHOTS (default: the test's tmp folder)."""
    from test_leaderboard_browser import _need_browser

    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    from leaderboards import server as SV
    from test_leaderboard_browser import CHROMEDRIVER, CHROMIUM

    con = DB.connect(env["db"])
    sub = validate_run(honest(env, "a"))
    ver = {"spot_check": {"n_docs": 60, "docs_per_task": {CLS: 60}, "tolerance": spotcheck.TOLERANCE,
                          "max_abs_diff": 1e-6, "weights": "gguf-sha256:" + "a" * 64, "dtype": "float32",
                          "backend": "hf-semsoft", "device": "cpu", "rejected_attempts_before": 0, "max_attempts": 3,
                          "content_hash": sub.predictions_hash, "secret_commitment": "c" * 64,
                          "draws": {CLS: {"tag": "d" * 64, "doc_ids": list(range(60))}}}}
    DB.insert(con, sub, None, "base", tier="spot-checked", verification=ver)
    site = tmp_path / "site"
    render(DB.load_entries(con), site, warn=None)
    srv = SV.make_server(site, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    (page,) = (site / "entries").glob("*.html")
    url = f"http://127.0.0.1:{srv.server_address[1]}/entries/{page.name}"
    shots = Path(os.environ.get("SEMCAL_BOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tmp_path / "profile"
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        for width, height in ((1400, 900), (390, 844)):
            d.set_window_size(width, height)
            d.get(url)
            rows = d.find_elements(By.CSS_SELECTOR, "#entry tbody tr")
            assert len(rows) >= 2
            for row in rows:
                img = row.find_element(By.CSS_SELECTOR, "img.reliability")
                assert d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) > 100
                r, i = row.rect, img.rect
                assert r["y"] - 1 <= i["y"] and i["y"] + i["height"] <= r["y"] + r["height"] + 1  # beside its row
            prov = d.find_element(By.ID, "provenance").text
            assert "weights" in prov and "gguf-sha256:" in prov and "60 documents re-scored" in prov
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, (width, overflow)
            path = shots / f"board-entry-{width}px.png"
            d.get_screenshot_as_file(str(path))
            print(f"screenshot {path}")
    finally:
        d.quit()
        srv.shutdown()
        srv.server_close()
