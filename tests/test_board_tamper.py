"""The tamper corpus (issue 12), ingest side: each attack is an honest synthetic run, edited as an attacker would.

Every case must be rejected (exit 2, a one-line message naming the problem, no traceback) or flagged, while the
honest run is accepted. An attacker who edits per-document records also recomputes the results file with
semcal's own aggregations (:func:`recompute_results`), so the aggregate check alone cannot catch them: the
dataset check, the one-record rule and the board's own references must.

Defects covered here: D1 (one record per document), D2 (duplicates on predictions), D3 (coverage from the
dataset), D4 (board references), D5 (partial runs marked), D6 (provenance at submit), D7 (malformed results),
D8 (special files, size before reading, streaming memory), names; and the dataset check (doc ids, doc_hash,
gold labels, split size). Spot checks and verified entries are tests/test_board_verify.py; the site's side
(escaping, atomic render, ranking views) tests/test_board_site.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from leaderboards.cli import main
from leaderboards.registry import load_registry

import board_fixtures as S

REPO = Path(__file__).resolve().parents[1]
CLS = "semcal_synth_cls"
QA = "semcal_synth_qa"
N = 300


@pytest.fixture
def env(tmp_path, monkeypatch):
    tasks = S.write_synth_tasks(tmp_path / "tasks")
    monkeypatch.setenv("SEMCAL_BOARD_TASKS_DIR", str(tasks))
    monkeypatch.setenv("SEMCAL_BOARD_DB", str(tmp_path / "board.sqlite"))
    return {"tmp": tmp_path, "reg": load_registry(tasks), "db": tmp_path / "board.sqlite", "tasks": tasks}


def honest(env, name="run", n=N, seed=0, **kw) -> Path:
    """An honest synthetic run: the calibrated model (constrained), a softened copy (semsoft), the prior."""
    items = S.cls_items(n, seed=seed)
    filters = kw.pop("filters", None) or {
        "constrained": items,
        "semsoft": S.cls_items(n, seed=seed, temperature=2.0),
        "prior": S.prior_items(items),
    }
    S.write_run(env["tmp"] / name, CLS, filters, env["reg"][CLS].metrics, **kw)
    return env["tmp"] / name


def files(path: Path) -> tuple[Path, Path]:
    (res,) = path.rglob("results_*.json")
    (samp,) = path.rglob("samples_*.jsonl")
    return res, samp


def submit(path, name="model-a", method="base") -> int:
    return main(["submit", str(path), "--model-name", name, "--method", method])


def rejected(capsys, path, *needles, name="model-a", method="base") -> str:
    """Submit ``path``; assert exit 2 with one line on stderr holding every needle, and no traceback."""
    code = submit(path, name, method)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if "error:" in x]  # ours, or argparse's "prog: error: ..."
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def edit_results(path: Path, fn) -> None:
    res, _ = files(path)
    data = json.loads(res.read_text())
    fn(data)
    res.write_text(json.dumps(data, allow_nan=True))


def edit_rows(path: Path, fn) -> None:
    """Apply ``fn(row) -> row`` to every sample row (JSON object)."""
    _, samp = files(path)
    rows = [json.loads(x) for x in samp.read_text().splitlines() if x.strip()]
    samp.write_text("".join(json.dumps(fn(r), allow_nan=True) + "\n" for r in rows))


def recompute_results(path: Path, task: str = CLS) -> None:
    """What a careful attacker does after editing records: recompute every aggregate with semcal's own code, per
    metric from the record logged under that metric name."""
    res, samp = files(path)
    data = json.loads(res.read_text())
    rows = [json.loads(x) for x in samp.read_text().splitlines() if x.strip()]
    aggs = {m: agg for m, agg in load_registry(os.environ["SEMCAL_BOARD_TASKS_DIR"])[task].metrics.items()}
    by_filter: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["doc_id"]):
        by_filter.setdefault(r["filter"], []).append(r)
    for f, frows in by_filter.items():
        for m, agg in aggs.items():
            data["results"][task][f"{m},{f}"] = S._aggregate(agg, [r[m] for r in frows])
    res.write_text(json.dumps(data, allow_nan=True))


def stored():
    from leaderboards import db as DB

    return DB.load_entries(DB.connect(os.environ["SEMCAL_BOARD_DB"]))


# ---------------------------------------------------------------- the honest run


def test_honest_run_is_accepted_full_coverage(env, capsys):
    assert submit(honest(env)) == 0
    es = {e["filter"]: e for e in stored()}
    assert set(es) == {"constrained", "semsoft", "prior", "majority", "uniform"}
    for e in es.values():
        assert (e["coverage"], e["n_split"], e["n_docs"], e["split"]) == ("full", N, N, "test")
        assert e["tier"] == "self-reported" and len(e["predictions_hash"]) == 64
    assert es["prior"]["is_reference"] and not es["constrained"]["is_reference"]


def test_validate_run_interface(env):
    """What helpers B and C read: one canonical record per document, ordered by doc_id, and the split facts."""
    from leaderboards.recompute import validate_run
    from semcal_eval.core.records import records_hash

    path = honest(env, n=60)
    sub = validate_run(path)
    items = S.cls_items(60, seed=0)
    (e,) = [e for e in sub.entries if e.filter == "constrained"]
    assert e.doc_ids == list(range(60)) and e.records == items
    assert e.predictions_hash == records_hash(items)
    assert (e.split, e.n_split, e.coverage) == ("test", 60, "full")
    assert sub.model_args == "pretrained=synthetic/model,dtype=float32" and sub.split == "test"
    assert sub.predictions_hash == sub.content_hash


# ---------------------------------------------------------------- D1: one canonical record per document


def test_d1_brier_copy_differs_from_the_ece_copy(env, capsys):
    # The probe's attack: spread every non-top probability onto the gold class in the copies the old board did
    # not read for its columns (results.json then recomputed: each metric matches its own copy).
    path = honest(env)

    def spread(r):
        if r["filter"] != "constrained":
            return r
        rec = r["brier_mc"]
        p = np.asarray(rec["probs"])
        top = int(p.argmax())
        q = np.zeros_like(p)
        q[top] = p[top]
        q[rec["gold"]] += 1 - p[top]
        for m in r["metrics"]:
            if m not in ("ece_uw15", "acc", "ece_uw15_ci_lo", "ece_uw15_ci_hi", "auroc_conf"):
                r[m] = {**rec, "probs": q.tolist()}
        return r

    edit_rows(path, spread)
    recompute_results(path)
    rejected(capsys, path, "doc_id 0, filter constrained", "different records under 'acc' and 'brier_mc'")


def test_d1_qa_em_variant_item(env, capsys):
    # QA records carry em as a field of the one record; a different item under "em" is a second record
    items = S.qa_items(80, seed=4)
    em = [{"conf": it["conf"], "correct": 1 - it["correct"], "em": 1 - it["correct"]} for it in items]
    S.write_run(env["tmp"] / "qa", QA, {"judge_f1": items}, env["reg"][QA].metrics, version="1.0",
                variants={"judge_f1": {"em": em}})
    rejected(capsys, env["tmp"] / "qa", "different records under", "'em'")


# ---------------------------------------------------------------- D2: duplicates on the predictions


@pytest.mark.parametrize("attack", ["alias", "stderr", "prompt_hash", "fake_group", "nudge_reported",
                                    "key_order_and_whitespace"])
def test_d2_edits_that_are_not_a_new_measurement(env, capsys, attack):
    path = honest(env)
    assert submit(path, "original") == 0
    if attack == "alias":
        edit_results(path, lambda d: d["results"][CLS].__setitem__("alias", "totally new run"))
    elif attack == "stderr":
        edit_results(path, lambda d: d["results"][CLS].__setitem__("ece_uw15_stderr,constrained", "0.001"))
    elif attack == "prompt_hash":
        edit_rows(path, lambda r: {**r, "prompt_hash": "f" * 64})
    elif attack == "fake_group":
        def group(d):
            d["results"]["semcal_fake_group"] = {"alias": "fake", "acc,none": 0.9}
            d["group_subtasks"]["semcal_fake_group"] = [CLS]
        edit_results(path, group)
    elif attack == "nudge_reported":
        def nudge(d):
            d["results"][CLS]["ece_uw15,constrained"] *= 1 + 1e-7  # inside the recompute tolerance
        edit_results(path, nudge)
    else:
        edit_rows(path, lambda r: dict(reversed(list(r.items()))))
    rejected(capsys, path, "duplicate submission", "(original)", name="copy")
    assert len({e["submission_id"] for e in stored()}) == 1


def test_d2_probabilities_nudged_below_tolerance(env, capsys):
    # a new predictions hash, but the same measurement: every confidence within DUP_ATOL of the stored one
    path = honest(env, "a")
    assert submit(path, "original") == 0
    rng = np.random.default_rng(9)

    def nudge(items):
        out = []
        for it in items:
            p = np.asarray(it["probs"]) * (1 + rng.uniform(-1e-9, 1e-9, len(it["probs"])))
            out.append({**it, "probs": (p / p.sum()).tolist()})
        return out

    items = S.cls_items(N)
    honest(env, "b", filters={"constrained": nudge(items), "semsoft": nudge(S.cls_items(N, temperature=2.0)),
                              "prior": S.prior_items(items)})
    rejected(capsys, env["tmp"] / "b", "duplicate submission", "(original)", name="copy")


def test_d2_renamed_filter(env, capsys):
    path = honest(env, "a")
    assert submit(path, "original") == 0
    items = S.cls_items(N)
    honest(env, "b", filters={"constrained_v2": items, "semsoft_v2": S.cls_items(N, temperature=2.0)})
    rejected(capsys, env["tmp"] / "b", "duplicate submission", name="copy")


# ---------------------------------------------------------------- D3 / D5: coverage from the dataset


def test_d3_original_edited_to_claim_full_coverage(env, capsys):
    path = honest(env, n=50, limit=50, original=N)  # an honest 50-of-300 run
    edit_results(path, lambda d: (d["n-samples"][CLS].__setitem__("original", 50), d["config"].__setitem__("limit", None)))
    rejected(capsys, path, "n-samples.original is 50", f"has {N} documents")


def test_d5_limited_run_is_partial(env, capsys):
    assert submit(honest(env, n=2, limit=2, original=N, filters={"constrained": S.cls_items(2)})) == 0
    es = stored()
    assert {e["coverage"] for e in es} == {"partial"} and {e["n_split"] for e in es} == {N}
    assert {e["n_docs"] for e in es} == {2}


def test_d5_partial_without_a_limit(env, capsys):
    path = honest(env, n=N)
    S.write_synth_data(env["tasks"], CLS, N + 20)  # the split is larger than the run: 300 of 320, no --limit
    edit_results(path, lambda d: d["n-samples"][CLS].__setitem__("original", N + 20))
    rejected(capsys, path, f"evaluated {N} of {N + 20} documents without a recorded --limit")


def test_wrong_split_size(env, capsys):
    # drop 20 documents and claim a 280-document split, results recomputed
    path = honest(env)
    _, samp = files(path)
    rows = [json.loads(x) for x in samp.read_text().splitlines()]
    samp.write_text("".join(json.dumps(r) + "\n" for r in rows if r["doc_id"] < N - 20))
    edit_results(path, lambda d: d["n-samples"].__setitem__(CLS, {"original": N - 20, "effective": N - 20}))
    recompute_results(path)
    rejected(capsys, path, f"n-samples.original is {N - 20}", f"has {N} documents")


# ---------------------------------------------------------------- the dataset check


def test_invented_gold_labels(env, capsys):
    # make the model look right: set every document's gold to its argmax, in every copy, results recomputed
    path = honest(env)

    def fix_gold(r):
        g = int(np.argmax(r["acc"]["probs"]))
        for m in r["metrics"]:
            r[m] = {**r[m], "gold": g}
        return r

    edit_rows(path, fix_gold)
    recompute_results(path)
    rejected(capsys, path, "gold label", "checked against the dataset")


def test_wrong_doc_hash(env, capsys):
    path = honest(env)
    edit_rows(path, lambda r: {**r, "doc_hash": "0" * 64} if r["doc_id"] == 7 else r)
    rejected(capsys, path, "doc_id 7 has doc_hash", "hashes to")


def test_documents_reordered(env, capsys):
    # swap the records of documents 3 and 4 (ids kept): the logged documents no longer match positions
    path = honest(env)
    edit_rows(path, lambda r: {**r, "doc_id": {3: 4, 4: 3}.get(r["doc_id"], r["doc_id"])})
    rejected(capsys, path, "doc_hash")


def test_wrong_target_hash(env, capsys):
    path = honest(env)
    edit_rows(path, lambda r: {**r, "target_hash": "1" * 64} if r["doc_id"] == 11 else r)
    rejected(capsys, path, "doc_id 11: target_hash")


def test_doc_id_outside_the_split(env, capsys):
    path = honest(env)
    edit_rows(path, lambda r: {**r, "doc_id": 5000} if r["doc_id"] == 0 else r)
    rejected(capsys, path, "doc_id 5000 is outside 0..299")


def test_dataset_not_loadable(env, capsys):
    path = honest(env)
    edit_results(path, lambda d: d["configs"][CLS]["metadata"].__setitem__("split", "nonexistent"))
    rejected(capsys, path, "could not load the documents", "'nonexistent'")


def test_only_reference_rows(env, capsys):
    items = S.cls_items(N)
    rejected(capsys, honest(env, filters={"prior": S.prior_items(items)}), "only reference rows")


# ---------------------------------------------------------------- D4: references computed by the board


def test_d4_fake_prior_is_ignored_and_the_flag_stays(env, capsys):
    from leaderboards.ranking import rank_entries

    items = S.cls_items(N)
    real_prior = S.prior_items(items)
    # a "model" that is the prior itself, and a terrible fake prior row (consistent results) that it beats
    fake = [{**it, "probs": [0.97, 0.01, 0.01, 0.01]} for it in items]
    assert submit(honest(env, filters={"constrained": items, "semsoft": real_prior, "prior": fake})) == 0
    es = {e["filter"]: e for e in stored()}
    np.testing.assert_allclose(es["prior"]["conf"], [max(real_prior[0]["probs"])] * N)  # the board's prior
    rows = {r["filter"]: r for r in rank_entries(stored())}
    assert rows["semsoft"]["beats_prior"] is False  # no better than the board's own prior: flagged
    assert rows["constrained"]["beats_prior"] is True


def test_d4_omitted_prior_is_computed(env):
    from leaderboards.ranking import rank_entries

    items = S.cls_items(N)
    assert submit(honest(env, filters={"constrained": items, "semsoft": S.prior_items(items)})) == 0
    rows = {r["filter"]: r for r in rank_entries(stored())}
    assert rows["prior"]["is_reference"] and rows["semsoft"]["beats_prior"] is False


# ---------------------------------------------------------------- D6 / D7: malformed results


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.__setitem__("date", 1e300), "'date'"),
    (lambda d: d.__setitem__("git_hash", "x" * 5000), "'git_hash'"),
    (lambda d: d["config"].__setitem__("limit", float("nan")), "config.limit nan"),
    (lambda d: d["config"].__setitem__("limit", float("inf")), "config.limit inf"),
    (lambda d: d["config"].__setitem__("limit", 1.5), "config.limit 1.5"),
    (lambda d: d["n-samples"][CLS].__setitem__("original", 10**30), "n-samples.semcal_synth_cls.original"),
    (lambda d: d.__setitem__("versions", ["2.0"]), "'versions' must be a JSON object"),
    (lambda d: d.__setitem__("config", [1, 2]), "'config' must be a JSON object"),
    (lambda d: d.__setitem__("n-samples", [300]), "'n-samples' must be a JSON object"),
    (lambda d: d.__setitem__("group_subtasks", [CLS]), "'group_subtasks' must be a JSON object"),
    (lambda d: d["group_subtasks"].__setitem__(CLS, "x"), "group_subtasks.semcal_synth_cls must be a list"),
    (lambda d: d["versions"].__setitem__(CLS, [2.0]), "versions.semcal_synth_cls must be a number"),
    (lambda d: d["results"].__setitem__(CLS, [1]), "results.semcal_synth_cls must be an object"),
    (lambda d: d["results"][CLS].__setitem__("acc,constrained", "0.5"), "is not a number"),
])
def test_d6_d7_malformed_results(env, capsys, edit, needle):
    path = honest(env, n=60)
    edit_results(path, edit)
    rejected(capsys, path, needle)


@pytest.mark.parametrize("metrics, needle", [
    ([{"acc": 1}], "'metrics' must be a non-empty list of metric names"),
    ([], "'metrics' must be a non-empty list"),
    ("acc", "'metrics' must be a non-empty list"),
    (["acc", ["x"]], "'metrics' must be a non-empty list"),
    (["acc", "made_up"], "made_up logged per document but not reported"),
])
def test_d7_odd_metrics_lists(env, capsys, metrics, needle):
    path = honest(env, n=60)
    edit_rows(path, lambda r: {**r, "metrics": metrics} if r["doc_id"] == 2 else r)
    rejected(capsys, path, needle)


@pytest.mark.parametrize("where", ["results", "samples"])
def test_d7_deeply_nested_json(env, capsys, where):
    path = honest(env, n=60)
    res, samp = files(path)
    deep = "[" * 200_000 + "]" * 200_000
    if where == "results":
        res.write_text(res.read_text()[:-1] + f', "x": {deep}}}')
    else:
        lines = samp.read_text().splitlines()
        lines[1] = lines[1][:-1] + f', "x": {deep}}}'
        samp.write_text("\n".join(lines) + "\n")
    rejected(capsys, path, "nested too deeply")


def test_filter_name_with_trailing_newline(env, capsys):
    path = honest(env, n=60)
    edit_rows(path, lambda r: {**r, "filter": "semsoft\n"} if r["filter"] == "semsoft" else r)
    edit_results(path, lambda d: d["results"].__setitem__(CLS, {
        (k.replace(",semsoft", ",semsoft\n") if k.endswith(",semsoft") else k): v for k, v in d["results"][CLS].items()}))
    rejected(capsys, path, "is not a plain identifier")


# ---------------------------------------------------------------- D8: special files, size before reading


def _submit_with_timeout(path, timeout=60) -> tuple[int, str]:
    """Run submit in a child process, so a read that hangs fails the test instead of hanging it."""
    proc = subprocess.run(
        [sys.executable, "-m", "leaderboards.cli", "submit", str(path), "--model-name", "m", "--method", "base"],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
    )
    return proc.returncode, proc.stderr


def test_d8_results_symlinked_to_dev_zero(env):
    path = honest(env, n=60)
    res, _ = files(path)
    res.unlink()
    res.symlink_to("/dev/zero")
    code, err = _submit_with_timeout(path)
    assert code == 2 and "not a regular file" in err and "Traceback" not in err, err


@pytest.mark.parametrize("which", ["results", "samples"])
def test_d8_fifo_is_refused_without_hanging(env, which):
    path = honest(env, n=60)
    target = files(path)[0 if which == "results" else 1]
    target.unlink()
    os.mkfifo(target)
    code, err = _submit_with_timeout(path)
    assert code == 2 and "FIFO" in err and "Traceback" not in err, err


def test_d8_size_checked_before_reading(env, capsys, monkeypatch):
    # a 4 GiB sparse samples file: refused from its size, never read (a read would take minutes)
    path = honest(env, n=60)
    _, samp = files(path)
    with open(samp, "r+b") as f:
        f.truncate(4 * 2**30)
    done = threading.Event()
    result = {}

    def run():
        result["code"] = submit(path)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "submit read the oversized file instead of refusing it"
    assert result["code"] == 2
    assert "exceeds the limit of" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads VmHWM from /proc (Linux)")
def test_d8_streaming_memory_stays_under_1gb(env, tmp_path):
    """200 MB of samples, two ways: an honest run whose rows carry large logged responses (accepted) and 200 MB
    of tiny rows (rejected at the first row beyond the split). Peak RSS of the submit process is reported and
    must stay under 1 GB (the old reader kept every row: 2.74 GB)."""
    peaks = {}
    for case in ("large_rows", "tiny_rows"):
        path = honest(env, case, n=N)
        _, samp = files(path)
        rows = [json.loads(x) for x in samp.read_text().splitlines()]
        target = 200 * 2**20
        with open(samp, "w") as f:
            if case == "large_rows":
                pad = "x" * (target // len(rows))
                for r in rows:
                    f.write(json.dumps({**r, "resps": [[pad]]}) + "\n")
            else:
                tiny = json.dumps({"doc_id": 0, "filter": "constrained"}) + "\n"
                for r in rows:
                    f.write(json.dumps(r) + "\n")
                block = tiny * 10_000  # written in blocks: a 200 MB string here would inflate the child's count
                for _ in range(target // len(block)):
                    f.write(block)
        # VmHWM (peak resident set of this process image, reset at exec); ru_maxrss would include the parent's
        code = ("import re, sys; from leaderboards.cli import main; rc = main(sys.argv[1:]); "
                "print('PEAK', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)); "
                "sys.exit(rc)")
        proc = subprocess.run(
            [sys.executable, "-c", code, "submit", str(path), "--model-name", case, "--method", "base",
             "--db", str(tmp_path / f"{case}.sqlite")],
            capture_output=True, text=True, timeout=900, cwd=REPO,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
        )
        peak = int(proc.stdout.split("PEAK")[-1].split()[0]) / 1024  # KiB
        peaks[case] = peak
        print(f"{case}: {samp.stat().st_size / 2**20:.0f} MB of samples, peak RSS {peak:.0f} MiB, exit {proc.returncode}")
        assert proc.returncode == (0 if case == "large_rows" else 2), proc.stderr[-2000:]
        assert peak < 1024, peaks
    assert "doc_id 0 appears twice" in proc.stderr  # tiny rows: stopped at the first row beyond the split


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("model, method, needle", [
    ("model-a", "base\n", "method"),
    ("model\u200b-a", "base", "ZERO WIDTH SPACE"),
    ("\u202emodel-a", "base", "RIGHT-TO-LEFT OVERRIDE"),
    ("model\x85a", "base", "U+0085"),
    ("model-a\n", "base", "U+000A"),
    ("model\u2066a", "base", "LEFT-TO-RIGHT ISOLATE"),
])
def test_names_with_invisible_characters(env, capsys, model, method, needle):
    rejected(capsys, honest(env, n=60), needle, name=model, method=method)


def test_names_are_nfc_normalised(env):
    from leaderboards import names

    assert names.model_name("Mode\u0301le") == "Mod\u00e9le"
    assert submit(honest(env, n=60), "Mode\u0301le") == 0
    assert {e["label"] for e in stored()} == {"Mod\u00e9le"}  # the label as given, NFC
    with pytest.raises(Exception, match="short identifier"):
        names.method("../../etc")


def test_d4_run_metadata_cannot_choose_the_reference_training_split(env, capsys):
    # a run naming another training split (or data folder) gets the board's own prior all the same
    items = S.cls_items(N)
    path = honest(env, filters={"constrained": items, "semsoft": S.prior_items(items)},
                  metadata={"train_split": "test", "data_dir": "/nonexistent"})
    assert submit(path) == 0
    es = {e["filter"]: e for e in stored()}
    np.testing.assert_allclose(es["prior"]["board"]["brier"], es["semsoft"]["board"]["brier"], rtol=0, atol=1e-12)


def test_d7_nested_provenance(env, capsys):
    # parsed by json, but stored provenance must stay flat enough for every later reader (render, export)
    path = honest(env, n=60)
    deep: dict = {}
    for _ in range(600):
        deep = {"x": deep}
    edit_results(path, lambda d: d["config"].__setitem__("gen_kwargs", deep))
    rejected(capsys, path, "config.gen_kwargs is nested more than")
