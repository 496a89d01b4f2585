"""Spot check of a self-reported submission: re-score a random sample of its documents with the model it names.

``board submit`` calls :func:`spot_check` after :func:`leaderboards.recompute.validate_run` accepted the run.
Recomputation proves the reported numbers follow from the logged probabilities; the spot check tests whether
the logged probabilities came from the model that ``config.model_args`` names:

1. The model: ``pretrained=semcal:NAME`` (a catalogue model installed here), a catalogue cache folder
   ``.../<name>-<sha256[:12]>`` (the path ``semcal-eval`` writes into the results; mapped back to the
   catalogue, so a run from another machine is checkable), or a model folder that exists on this machine.
   Anything else (a hub id, a folder elsewhere, a non-float32 dtype) cannot be re-scored: the submission is
   stored as tier ``self-reported`` with the reason.
2. The sample: per task of N documents, :func:`sample_size` (the smallest k with C(N-m, k)/C(N, k) <= 1 % for
   m = ceil(1 % of N) forged documents), selected by a draw tag (:func:`sample_doc_ids`): HMAC-SHA256 of the
   submission's content hash under the board's 256-bit secret (:func:`draw_tag`), unknowable before the
   submission; the tag and the documents are published with the entry afterwards, for audit. Each submission
   is drawn afresh, and rejected attempts per weights (:func:`leaderboards.identity.weights_key`) are capped.
3. Re-scoring: lm-eval itself, as a subprocess, with the board's pinned backend (hf-semsoft, float32, CPU)
   on exactly the sampled documents (``--samples`` naming a 0600 file: the ids are on no command line, which
   every local user can read), the run's split and hyper-parameters. Requests are thus
   built by the task, exactly as in the submitted run, never from the submitted ``arguments``.
4. Comparison: for every filter whose probabilities are a function of that one document's model output
   (``constrained``, ``semsoft``, ``semsoft_tau*``; ``none`` of ``*_base`` tasks), the largest absolute
   difference between submitted and re-scored class probabilities. Above :data:`TOLERANCE` anywhere: rejected
   (the worst document is recorded for the operator, not told to the submitter). Otherwise tier ``spot-checked``.
   A registered stock ``multiple_choice`` task (:mod:`leaderboards.stock`) is re-scored from its registered
   folder and compared on its ``loglik`` and ``loglik_norm`` rows (:func:`_stock_rows`); an unregistered one is
   not re-scored, and the entry is ``self-reported`` with that reason.

``semsoft_tuned`` (P_sem at a configuration chosen on other documents) is re-scored at the configuration each
of its records names (``tuned_tau``, ``tuned_top_k``, ``tuned_embedding``, which must lie in the run's tuning
grid): one more lm-eval run per distinct configuration (one; two when cross-fitted folds chose differently)
whose ``semsoft`` row must equal the submitted ``semsoft_tuned`` row. That proves the probabilities are the
named model's at the named configuration; it does not re-derive the choice itself (that needs the tuning
documents' model outputs, which are not logged); every record of the row names its configuration.

Not re-scored: the cross-fitted rows ``constrained_ts`` / ``semsoft_ts`` (their temperature is fitted on the
*other* documents of the run, so a sample cannot reproduce them). Instead :func:`check_crossfit` recomputes
them in full, without the model, from the run's own ``constrained`` / ``semsoft`` rows with the same
2-fold step (:func:`semcal_eval.run_rows.temperature_step`), so they are exactly as trustworthy
as the rows they come from. Reference rows are not compared (the board computes those itself). QA tasks
(generation with sampling) are not spot-checked.

A seed chosen with ``--spot-check-seed`` runs the same check, but the entry is self-reported (the chooser knew
the sample). Every rejection is recorded (:func:`leaderboards.attempts.record_attempt`, which also caps them);
its message names neither the sampled documents nor how far any was off.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import shutil
import sqlite3
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SubmissionError
from .identity import CACHE_FOLDER, PREFIXED, catalogue_entry, parse_model_args
from .registry import REFERENCE_FILTERS
# the tolerance (leaderboards.tolerance) is shared with the near-duplicate test and the ranking's tie bands
from .tolerance import CROSSFIT_ATOL, TOLERANCE, TOLERANCES

__all__ = ["TOLERANCE", "TOLERANCES", "FORGED_SHARE", "MISS_PROB", "MIN_DOCS", "SpotCheck", "SpotCheckRejected",
           "NotCheckable", "sample_size", "miss_probability", "sample_doc_ids", "claimed_model", "spot_check",
           "check_crossfit", "check_tuned_row", "draw_tag", "chosen_tag", "secret_commitment", "reach_probability"]


#: Sample size: the smallest k such that a forgery of at least FORGED_SHARE of the documents (m = ceil(q N))
#: is missed with probability at most MISS_PROB: C(N-m, k) / C(N, k) <= 0.01 (hypergeometric; see sample_size).
FORGED_SHARE = 0.01
MISS_PROB = 0.01
MIN_DOCS = 20
#: Filters whose probabilities depend on other documents than their own (fitted across the run's documents),
#: with the row they are fitted from.
CROSS_DOCUMENT_FILTERS = {"constrained_ts": "constrained", "semsoft_ts": "semsoft"}
#: A stock task's rows that are a function of one document's log-likelihoods (leaderboards.stages.stock).
STOCK_FILTERS = ("loglik", "loglik_norm")
#: The row whose configuration is chosen on other documents; re-scored at the configuration its records name.
TUNED_FILTER = "semsoft_tuned"
#: dtypes whose arithmetic the tolerance was chosen for (None/"auto": the float32 catalogue folders load float32).
_FLOAT32 = (None, "", "auto", "float32", "torch.float32", "float", "fp32")


class NotCheckable(Exception):
    """The submission cannot be re-scored here; the message is the reason stored with it."""


@dataclass
class SpotCheck:
    """Outcome of a spot check that did not reject: the tier and the ``verification`` JSON to store."""

    tier: str  # "spot-checked" | "self-reported"
    verification: dict = field(default_factory=dict)
    message: str = ""


def miss_probability(n: int, m: int, k: int) -> float:
    """P(a uniform sample of k of n documents misses all m forged ones) = C(n-m, k) / C(n, k)."""
    if m <= 0:
        return 1.0
    if k > n - m:
        return 0.0
    return math.exp(math.lgamma(n - m + 1) - math.lgamma(n - m - k + 1) - math.lgamma(n + 1) + math.lgamma(n - k + 1))


def sample_size(n: int, share: float = FORGED_SHARE, miss: float = MISS_PROB) -> int:
    """Documents re-scored out of ``n``: the smallest k (at least MIN_DOCS, at most n) with
    C(n-m, k)/C(n, k) <= ``miss`` for m = ceil(share * n) forged documents: 267 of 445, 432 of 4,548, and
    -> ln(miss)/ln(1-share) = 459 for large n."""
    if n <= MIN_DOCS:
        return n
    m = max(1, math.ceil(share * n - 1e-9))
    lo, hi = MIN_DOCS, n  # miss_probability falls as k grows: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if miss_probability(n, m, mid) <= miss:
            hi = mid
        else:
            lo = mid + 1
    return lo


def sample_doc_ids(doc_ids: list[int], tag: str) -> list[int]:
    """The documents a draw tag selects: ``k = sample_size(len(doc_ids))`` of the sorted ids by a partial
    Fisher-Yates shuffle whose i-th step swaps position i with position i + (sha256(``"<tag>:<i>"``) as a
    big-endian integer mod (N - i)), i = 0..k-1; the first k, sorted (all if at most MIN_DOCS). Public and
    language-independent, so an auditor recomputes the sample from the published tag (docs/LEADERBOARD.md,
    "Auditing a draw"); the modulo bias of a 256-bit number is below 2^-200."""
    ids = sorted(doc_ids)
    n, k = len(ids), sample_size(len(ids))
    for i in range(k):
        j = i + int.from_bytes(hashlib.sha256(f"{tag}:{i}".encode()).digest(), "big") % (n - i)
        ids[i], ids[j] = ids[j], ids[i]
    return sorted(ids[:k])


def chosen_tag(seed: int) -> str:
    """The draw tag of a seed chosen by the submitter (``--spot-check-seed``): sha256("semcal-chosen-seed:N").
    Anyone can compute it, which is why such an entry is never spot-checked."""
    return hashlib.sha256(f"semcal-chosen-seed:{int(seed)}".encode()).hexdigest()


def reach_probability(n: int, m: int, k: int, attempts: int) -> float:
    """P(a forgery of ``m`` of ``n`` documents reaches the spot-checked tier within ``attempts`` submissions, each
    with a fresh uniform sample of ``k``) = 1 - (1 - q)^attempts, q = C(n-m, k)/C(n, k) (:func:`miss_probability`).
    The draws are independent because each submission's tag is a PRF (HMAC) of a different content hash."""
    return 1.0 - (1.0 - miss_probability(n, m, k)) ** attempts


def claimed_model(model_args) -> tuple[str, str]:
    """``(pretrained for lm-eval, the claim as written)`` of the model a run names; NotCheckable if it cannot
    be loaded here. The catalogue's own names for a model (``semcal:NAME`` or its cache folder's path on any
    machine, :func:`leaderboards.identity.catalogue_entry`) load the board's install; any other value must be a
    model folder on this machine, re-scored as it is (a look-alike name is not the catalogue's model)."""
    from semcal_eval.models import CATALOGUE, PREFIX, ModelNotInstalledError, model_path

    args = parse_model_args(model_args)
    claim = args.get("pretrained")
    if not isinstance(claim, str) or not claim:
        raise NotCheckable("model could not be loaded: config.model_args names no pretrained model")
    dtype = args.get("dtype")
    if dtype not in _FLOAT32:
        raise NotCheckable(f"model_args dtype={dtype} is not float32; the spot check's tolerance is for float32 "
                           "runs (rerun with dtype=float32 to be spot-checked)")
    found = catalogue_entry(claim)
    if found is not None and found[1] in (PREFIXED, CACHE_FOLDER):
        try:
            model_path(found[0].name)
        except ModelNotInstalledError as e:
            raise NotCheckable(f"model could not be loaded: {e}") from None
        return PREFIX + found[0].name, claim
    if claim.startswith(PREFIX):
        raise NotCheckable(f"model could not be loaded: {claim!r} is not in the catalogue ({', '.join(CATALOGUE)})")
    if Path(claim).is_dir() and (Path(claim) / "config.json").is_file():
        return str(Path(claim).resolve()), claim
    raise NotCheckable(f"model could not be loaded: pretrained={claim[:120]!r} is neither a semcal catalogue model "
                       "nor a model folder on this machine (the board does not download models)")


#: Bytes of the board secret (256 bits; at least 128 are required of a secret read from the database).
SECRET_BYTES = 32
MIN_SECRET_BITS = 128


def _secret(con: sqlite3.Connection) -> bytes:
    """The board's spot-check secret (meta key ``spot_check_secret``, hex), created once per database with
    :func:`secrets.token_hex`; never rendered or served (``board render`` refuses a site folder holding a
    database). A stored secret shorter than MIN_SECRET_BITS is refused."""
    row = con.execute("SELECT value FROM meta WHERE key = 'spot_check_secret'").fetchone()
    if row is None:
        con.execute("INSERT OR IGNORE INTO meta VALUES ('spot_check_secret', ?)", (secrets.token_hex(SECRET_BYTES),))
        row = con.execute("SELECT value FROM meta WHERE key = 'spot_check_secret'").fetchone()
    try:
        key = bytes.fromhex(row[0])
    except ValueError:
        key = b""
    if len(key) * 8 < MIN_SECRET_BITS:
        raise SubmissionError("the board's spot-check secret (meta.spot_check_secret) is not at least "
                              f"{MIN_SECRET_BITS} bits of hex; replace it with `python -c 'import secrets; "
                              "print(secrets.token_hex(32))'`")
    return key


def secret_commitment(con: sqlite3.Connection) -> str:
    """sha256("semcal-board-secret:" + secret hex): published with every entry. It reveals nothing about a
    256-bit secret, and binds the board to it: once the operator retires the secret and publishes it, an
    auditor checks this hash and every entry's tag (:func:`draw_tag`)."""
    return hashlib.sha256(b"semcal-board-secret:" + _secret(con).hex().encode()).hexdigest()


def draw_tag(con: sqlite3.Connection, content_hash: str, task: str, doc_set_hash: str) -> str:
    """The spot-check draw of one task of one submission: HMAC-SHA256(board secret,
    ``"semcal-spot-check-v2\0<content hash>\0<task>\0<doc-set hash>"``), hex. ``content_hash`` is the
    submission's predictions hash. Without the secret the tag (and so the sample, :func:`sample_doc_ids`) cannot
    be computed, not even by brute force over the published values; every new submission gets a fresh,
    independent draw, and the number of rejected draws per weights is capped (:func:`leaderboards.attempts.max_attempts`)."""
    msg = "\0".join(["semcal-spot-check-v2", str(content_hash), str(task), str(doc_set_hash)]).encode()
    return hmac.new(_secret(con), msg, hashlib.sha256).hexdigest()


class SpotCheckRejected(SubmissionError):
    """A spot check that found a mismatch; ``detail`` names the worst document (recorded, not shown)."""

    def __init__(self, message: str, detail: str):
        super().__init__(message)
        self.detail = detail


def check_crossfit(results_path: Path) -> dict:
    """Recompute every cross-fitted row (``constrained_ts`` / ``semsoft_ts``) of a run from its own source
    row with the step the ``crossfit_temperature`` filter calls (:func:`semcal_eval.run_rows.temperature_step`:
    documents sorted by doc_id, each fold scaled with T fitted on the other); SubmissionError naming the worst
    document if a logged probability differs by more than :data:`CROSSFIT_ATOL`. Returns {task/filter: max |diff|}
    of the rows checked.
    """
    import numpy as np

    from semcal_eval.core.records import first_gold
    from semcal_eval.run_rows import temperature_step

    out = {}
    for task, samples in _task_samples(results_path):
        rows = _rows(samples, None, gold=True, strict=False)
        for ts, source in CROSS_DOCUMENT_FILTERS.items():
            if ts not in rows or source not in rows:
                continue
            ids = sorted(rows[source])
            if sorted(rows[ts]) != ids:
                raise SubmissionError(f"{task}: filter {ts} covers other documents than {source}; rejected")
            probs = [rows[source][i]["probs"] for i in ids]
            labels = [first_gold(rows[source][i]["gold"]) for i in ids]
            try:
                with warnings.catch_warnings():  # a fit at its bound is the run's business, not the check's
                    warnings.simplefilter("ignore")
                    steps = temperature_step(probs, labels)
            except ValueError as e:
                raise SubmissionError(f"{task}: filter {ts} cannot be recomputed from {source}: {e}") from e
            worst = (-1.0, None)
            for i in sorted(range(len(ids)), key=lambda i: (steps[i][2], i)):  # fold by fold, as the filter fits
                p, fit, _ = steps[i]
                T = float(fit.T)
                got = rows[ts][ids[i]]["probs"]
                d = math.inf if len(got) != len(p) else float(np.max(np.abs(np.asarray(got, float) - p)))
                t_got = rows[ts][ids[i]].get("temperature")
                # the record's temperature must be the one fitted on the other fold, to float noise
                if t_got is not None and not (_finite(t_got) and abs(float(t_got) - T) <= CROSSFIT_ATOL * max(1.0, T)):
                    raise SubmissionError(
                        f"{task} document {ids[i]} (filter {ts}): the record's temperature {str(t_got)[:30]} is "
                        f"not the temperature {T:.12g} fitted on the other fold of the run's own {source} row; "
                        "rejected")
                if d > worst[0]:
                    worst = (d, ids[i])
            if not worst[0] <= CROSSFIT_ATOL:
                raise SubmissionError(
                    f"{task} document {worst[1]} (filter {ts}): the logged probabilities differ by {worst[0]:.3g} "
                    f"from temperature scaling of the run's own {source} row, cross-fitted as the task does "
                    f"(recomputed exactly: tolerance {CROSSFIT_ATOL:g}, float noise); rejected"
                )
            out[f"{task}/{ts}"] = worst[0]
    return out


def _task_samples(results_path: Path) -> list[tuple[str, Path]]:
    """(task, samples file) of every task of a run (groups left out), from its results file."""
    from semcal_eval.runs import locate_run, read_results

    results = read_results(Path(results_path))
    subtasks = _dict(results.get("group_subtasks"))
    tasks = sorted(t for t in results["results"] if not subtasks.get(t))
    run = locate_run(results_path, tasks)
    return [(t, run.samples_paths[t]) for t in tasks]


def _finite(x) -> bool:
    """A finite JSON number within float range (an integer of 400 digits is not: float() would overflow)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return abs(x) < 2**63 if isinstance(x, int) else math.isfinite(x)


def _tuned_key(task: str, doc: int, tuned: tuple, how: tuple) -> tuple:
    """The configuration a semsoft_tuned record names, checked by the rule every semsoft run is built with:
    (τ, K, embedding) must make a valid :class:`~semcal_eval.semsoft.spec.SemSoftParams` (τ ∈ [−1, 1), integer
    K ≥ 1, a known label embedding); the record's own fields must be JSON numbers of the right type, and
    ``tuned_on`` / ``tuned_n`` / ``tuned_fold`` a choice the filter makes. SubmissionError otherwise."""
    from semcal_eval.semsoft.scoring import SemSoftError
    from semcal_eval.semsoft.spec import SemSoftParams

    tau, k, emb = tuned
    on, n, guard, fold = how
    shown = (f"{task} document {doc} (filter {TUNED_FILTER}): tuned fields tau={str(tau)[:30]}, top_k={str(k)[:30]}, "
             f"label_embedding={str(emb)[:30]}, tuned_on={str(on)[:20]}, tuned_n={str(n)[:30]}, tuned_fold="
             f"{str(fold)[:10]} are not a configuration")
    # JSON types first: float("0.5") or an integer of 400 digits must not reach the range check as a number
    typed = (_finite(tau) and _finite(k) and isinstance(k, int) and isinstance(emb, str) and len(emb) <= 64
             and on in ("validation", "crossfit")
             and (n is None or (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 10**9))
             and (guard is None or isinstance(guard, bool)) and (fold is None or fold in (0, 1)))
    if not typed:
        raise SubmissionError(f"{shown} (tau and top_k JSON numbers, a short embedding name, tuned_on "
                              "validation|crossfit, fold 0|1); rejected")
    try:
        p = SemSoftParams.from_metadata({"tau": tau, "top_k": k, "label_embedding": emb, "tune": False})
    except SemSoftError as e:
        raise SubmissionError(f"{shown}: {e}; rejected") from None
    return (p.tau, p.top_k, p.label_embedding, on, n, guard)


def check_tuned_row(results_path: Path) -> dict:
    """``semsoft_tuned`` uses ONE configuration per fold, chosen once per run: on validation documents (one
    configuration for every record, ``tuned_fold`` null) or cross-fitted (documents sorted by id, fold =
    position % 2 as the filter does, one configuration per fold). A record that names another configuration
    than its fold's — a per-document choice — is rejected. Returns {task: {fold: configuration}} (stored)."""
    from semcal_eval.core.crossfit import fold_of

    out = {}
    for task, samples in _task_samples(results_path):
        rows = _rows(samples, None, strict=False).get(TUNED_FILTER)
        if not rows:
            continue
        chosen: dict = {}
        for pos, doc in enumerate(sorted(rows)):
            r = rows[doc]
            key = _tuned_key(task, doc, r["tuned"], r["tuned_how"])
            fold = r["tuned_how"][3]
            want_fold = None if key[3] == "validation" else fold_of(pos)
            if fold != want_fold:
                raise SubmissionError(
                    f"{task} document {doc} (filter {TUNED_FILTER}): tuned_fold {fold} but a {key[3]} choice puts "
                    f"it in fold {want_fold} (documents sorted by id, fold = position % 2); rejected")
            if fold in chosen and chosen[fold] != key:
                raise SubmissionError(
                    f"{task} document {doc} (filter {TUNED_FILTER}): names configuration tau={key[0]:g}, "
                    f"top_k={key[1]}, label_embedding={key[2]} but its fold chose tau={chosen[fold][0]:g}, "
                    f"top_k={chosen[fold][1]}, label_embedding={chosen[fold][2]}; the tuned row uses one "
                    "configuration per fold, a per-document choice is rejected")
            chosen.setdefault(fold, key)
        if len({k[3] for k in chosen.values()}) > 1:
            raise SubmissionError(f"{task} (filter {TUNED_FILTER}): records mix validation and crossfit choices; "
                                  "rejected")
        out[task] = {str(f): {"tau": k[0], "top_k": k[1], "label_embedding": k[2], "tuned_on": k[3],
                              "tuned_n": k[4]} for f, k in sorted(chosen.items(), key=lambda kv: str(kv[0]))}
    return out


def _task_kinds() -> tuple[set[str], set[str]]:
    """(semsoft tasks, stock multiple_choice tasks) of the packaged task folder."""
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs
    from semcal_eval.semsoft.task import semsoft_task_names

    mc = {cfg["task"] for _, cfg in iter_task_configs(TASKS_DIR) if cfg.get("output_type") == "multiple_choice"}
    return semsoft_task_names(), mc


def _record(row: dict, strict: bool = True):
    """The row's semcal record; a row with none is an error when ``strict``, else None (a stock task's row:
    validate_run already refused any semcal row without its record)."""
    from semcal_eval.runs import RunError, row_record

    try:
        got = row_record(row)
    except RunError as e:
        raise SubmissionError(str(e)) from None
    if got is None and strict:
        raise SubmissionError(f"samples row {row.get('_line')}: no semcal record under any of its metrics")
    return None if got is None else got[1]


def _rows(samples_path: Path, wanted: set[int] | None, *, gold: bool = False,
          strict: bool = True) -> dict[str, dict[int, dict]]:
    """filter -> doc_id -> {"probs", "doc_hash"(, "gold")} of classification records (streamed); a confidence
    (QA) record raises NotCheckable when ``strict``, else its filter is left out."""
    from semcal_eval.runs import iter_samples

    out: dict[str, dict[int, dict]] = {}
    for r in iter_samples(samples_path):
        if wanted is not None and r.get("doc_id") not in wanted:
            continue
        if r.get("metrics") == []:  # a row skipped on a short run: nothing to compare (stages.records.skipped_row)
            continue
        rec = _record(r, strict)
        if rec is None:
            continue
        if not isinstance(rec, dict) or "probs" not in rec:
            if strict:
                raise NotCheckable("records are not classification records")
            continue
        row = {"probs": rec["probs"], "doc_hash": r.get("doc_hash"), "temperature": rec.get("temperature"),
               "tuned": tuple(rec.get(k) for k in ("tuned_tau", "tuned_top_k", "tuned_embedding")),
               "tuned_how": tuple(rec.get(k) for k in ("tuned_on", "tuned_n", "tuned_guard", "tuned_fold"))}
        if gold:
            row["gold"] = rec.get("gold")
        out.setdefault(r["filter"], {})[r["doc_id"]] = row
    return out


def _stock_rows(samples_path: Path, cfg: dict) -> dict[str, dict[int, dict]]:
    """row -> doc_id -> {"probs", "doc_hash"} of a stock multiple_choice task's samples: the board's two model
    rows that are a function of one document (softmax of the choice log-likelihoods, and of the per-character
    ones: :func:`semcal_eval.run_rows.calibration_rows`). Both are compared, so a log-likelihood shifted by a
    constant per document (invisible to the first) is caught by the second."""
    from scipy.special import softmax

    from semcal_eval import run_rows
    from semcal_eval.runs import iter_samples

    delimiter, mutual_info = run_rows.choice_settings(cfg)
    out: dict[str, dict[int, dict]] = {name: {} for name in STOCK_FILTERS}
    from .stages.records import check_logliks

    for r in iter_samples(samples_path):
        check_logliks(r, f"{samples_path}:{r.get('_line')}")
        try:
            ll, ch = run_rows.choice_logliks(r, delimiter, mutual_info)
        except ValueError as e:
            raise SubmissionError(str(e)) from None
        for name, z in zip(STOCK_FILTERS, (ll, run_rows.norm_logits(ll, ch))):
            out[name][r["doc_id"]] = {"probs": list(softmax(z)), "doc_hash": r.get("doc_hash")}
    return out


def _dict(x) -> dict:
    """``x`` if it is a JSON object, else {} (results fields a submitter may have retyped)."""
    return x if isinstance(x, dict) else {}


def _rescore_metadata(task_cfg: dict, semsoft: bool) -> tuple[dict, str | None]:
    """The run's hyper-parameters and split, as --metadata for the re-scoring run (no cross-fit, no reference
    rows: they are not compared, and cross-fitting refuses fewer than 40 documents)."""
    meta = dict(_dict(task_cfg.get("metadata")))
    split = meta.get("split")
    if split is not None and not isinstance(split, str):
        raise SubmissionError(f"the run's metadata split {str(split)[:40]!r} is not a split name; rejected")
    if not semsoft:
        return {}, split
    from semcal_eval.semsoft.scoring import SemSoftError
    from semcal_eval.semsoft.spec import SemSoftParams

    try:
        p = SemSoftParams.from_metadata(meta)
    except SemSoftError as e:
        raise SubmissionError(f"the run's semsoft hyper-parameters are invalid: {e}") from e
    # tune: false — semsoft_tuned is re-scored at its own recorded configuration (_tuned_configs)
    return {"tau": list(p.taus), "top_k": p.top_k, "label_embedding": p.label_embedding, "recalibrate": False,
            "reference_predictors": False, "tune": False, **({"tune_grid": p.grid} if p.grid else {})}, split


def _tuned_configs(task: str, rows: dict[int, dict], ids: list[int], grid: dict | None) -> dict[tuple, list[int]]:
    """The sampled documents of the semsoft_tuned row grouped by the (τ, K, embedding) their records name;
    SubmissionError when a record names none or one outside the run's tuning grid."""
    out: dict[tuple, list[int]] = {}
    for doc in ids:
        tau, k, emb = rows[doc]["tuned"]
        ok = (grid is not None and isinstance(emb, str) and emb in grid["label_embeddings"]
              and isinstance(k, (int, float)) and int(k) in grid["top_k"]
              and isinstance(tau, (int, float)) and any(abs(float(tau) - t) < 1e-12 for t in grid["taus"]))
        if not ok:
            raise SubmissionError(
                f"{task} (filter {TUNED_FILTER}): a record names configuration tau={tau!r}, "
                f"top_k={k!r}, label_embedding={emb!r}, which is not in the run's tuning grid {grid}; rejected")
        out.setdefault((float(tau), int(k), emb), []).append(doc)
    return out


def spot_check(results_path: Path, *, seed: int | None = None, tags: dict[str, str] | None = None,
               splits: dict[str, str] | None = None, work_dir: Path | None = None, progress=print,
               stock: dict | None = None) -> SpotCheck:
    """Spot-check the validated run of ``results_path`` (see the module docstring): the board's **tier** stage.
    ``splits``: task -> the split validate_run checked the documents against (preferred to the run's own
    metadata). ``stock``: the run's stock multiple_choice tasks -> their registration
    (:class:`leaderboards.stock.StockTask`), or None when the board has not registered the task's config: such a
    task is not re-scored (its documents are the submitter's) and the entry is ``self-reported``. A registered one
    is re-scored from the registered task folder and its ``loglik`` / ``loglik_norm`` rows compared.

    ``tags``: task -> the board's draw tag (:func:`draw_tag`; a stock task by its lm-eval name, drawn under its
    entry name); a task without one is refused. ``seed``: a seed chosen by the caller
    (``--spot-check-seed``, tag :func:`chosen_tag`); such a check is reported but can never give the
    ``spot-checked`` tier, since whoever chose the seed knew the sample. Returns a :class:`SpotCheck` (tier
    ``spot-checked``, or ``self-reported`` with the reason); raises :class:`SpotCheckRejected` when the
    probabilities differ beyond :data:`TOLERANCE` or the re-scoring refutes the run (the message names neither
    the sampled documents nor the size of any difference; ``detail`` does, for the attempts table)."""
    from semcal_eval.runs import locate_run, read_results

    results = read_results(Path(results_path))
    chosen = seed is not None
    try:
        pretrained, claim = claimed_model(_dict(results.get("config")).get("model_args"))
    except NotCheckable as e:
        return SpotCheck("self-reported", {"reason": str(e)}, f"not spot-checked: {e}")
    kinds = _task_kinds()
    subtasks = _dict(results.get("group_subtasks"))
    tasks = sorted(t for t in results["results"] if not subtasks.get(t))
    run = locate_run(results_path, tasks)
    draws: dict[str, dict] = {}
    unchecked: dict[str, str] = {}
    checked: dict[str, int] = {}
    worst = {"diff": -1.0}
    tmp = Path(tempfile.mkdtemp(prefix="semcal-spotcheck-", dir=work_dir))
    try:
        for task in tasks:
            cfg = _dict(_dict(results.get("configs")).get(task))
            reg = (stock or {}).get(task)
            try:
                if task in (stock or {}):
                    if reg is None:
                        raise NotCheckable(
                            "a stock task whose config the board has not registered: its documents and gold labels "
                            "are the submitter's (an operator registers it: `semcal-eval board register-task`)")
                    _rescorable(task, results, None)
                    sub_rows, filters = _stock_rows(run.samples_paths[task], cfg), list(STOCK_FILTERS)
                else:
                    _rescorable(task, results, kinds)
                    sub_rows, filters = _submitted_rows(run.samples_paths[task])
            except NotCheckable as e:
                unchecked[task] = str(e)
                continue
            tag = chosen_tag(seed) if chosen else (tags or {}).get(task)
            if tag is None and tags is not None:
                # every task of a board submission, stock tasks included, is drawn under the committed secret
                # (issue 43: stock tasks fell back to a random token, so no stock entry could be audited)
                raise SubmissionError(f"{task}: the board computed no draw for this task; nothing was re-scored "
                                      "(report this to the board operator)")
            if tag is None:
                tag = secrets.token_hex(32)  # a library caller without a board: an unpredictable, unaudited draw
            ids = sample_doc_ids(list(sub_rows[filters[0]]), tag)
            draws[task] = {"tag": tag, "doc_ids": ids}
            try:
                if reg is not None:  # the registered task, on its own split, read as the board reads stock rows
                    jobs, split = [(filters, {}, ids, None)], None
                    how = {"include_path": reg.include_path or None, "read": lambda p, c=cfg: _stock_rows(p, c)}
                else:
                    jobs, split = _rescore_jobs(task, cfg, task in kinds[0], sub_rows, filters, ids, splits)
                    how = {}
                failed, worst = _rescore(task, jobs, sub_rows, len(sub_rows[filters[0]]), split, pretrained, tmp,
                                         worst, progress, **how)
            except SpotCheckRejected:
                raise
            except SubmissionError as e:  # refuted by the re-scoring itself: an attempt like a mismatch
                raise SpotCheckRejected(f"spot check failed: {e}",
                                        detail=json.dumps({"error": str(e), "draws": draws}, sort_keys=True)) from None
            if failed:
                unchecked[task] = failed
                continue
            checked[task] = len(ids)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _finish(checked, unchecked, worst, draws, chosen, claim, pretrained)


def _rescorable(task: str, results: dict, kinds: tuple[set[str], set[str]] | None) -> None:
    """NotCheckable with the reason when ``task`` of this run cannot be re-scored document by document: its
    kind (QA generation; ``kinds`` None: a registered stock task), few-shot contexts, a chat template or system
    instruction."""
    if kinds is not None and task not in kinds[0] and task not in kinds[1]:
        raise NotCheckable("only semsoft and multiple_choice (*_base) tasks are re-scored; generation (QA) tasks "
                           "are not spot-checked")
    shots = _dict(results.get("n-shot")).get(task)
    if shots and not (isinstance(shots, int) and shots == 0):
        raise NotCheckable("few-shot contexts depend on the documents drawn before each one")
    if results.get("chat_template") or results.get("system_instruction"):
        raise NotCheckable("runs with a chat template or system instruction are not re-scored")


def _submitted_rows(samples: Path) -> tuple[dict[str, dict[int, dict]], list[str]]:
    """``(rows, filters compared)`` of a task's submitted samples: the filters whose probabilities are a function
    of one document's model output (NotCheckable when there is none, or the records are not classification)."""
    rows = _rows(samples, None)
    filters = [f for f in sorted(rows)
               if f not in CROSS_DOCUMENT_FILTERS and f not in REFERENCE_FILTERS and f != TUNED_FILTER]
    if not filters:
        raise NotCheckable("no filter of this run is a per-document function of the model")
    return rows, filters


def _rescore_jobs(task: str, cfg: dict, semsoft: bool, sub_rows: dict, filters: list[str], ids: list[int],
                  splits: dict[str, str] | None) -> tuple[list[tuple], str | None]:
    """The lm-eval runs that re-score ``ids``: ``(submitted filters, metadata, documents, compared with)`` each
    (one with the run's hyper-parameters; one more per configuration the ``semsoft_tuned`` records name), and
    the split to run them on."""
    meta, split = _rescore_metadata(cfg, semsoft)
    grid = meta.pop("tune_grid", None)
    split = (splits or {}).get(task) or split
    jobs = [(filters, meta, ids, None)]
    if TUNED_FILTER in sub_rows and semsoft:
        tids = [d for d in ids if d in sub_rows[TUNED_FILTER]]
        for (tau, k, emb), docs in sorted(_tuned_configs(task, sub_rows[TUNED_FILTER], tids, grid).items()):
            jobs.append(([TUNED_FILTER], {**meta, "tau": [tau], "top_k": k, "label_embedding": emb}, docs, "semsoft"))
    return jobs, split


def _rescore(task: str, jobs: list[tuple], sub_rows: dict, n_docs: int, split: str | None, pretrained: str,
             tmp: Path, worst: dict, progress, include_path: str | None = None, read=None) -> tuple[str, dict]:
    """Run each job with lm-eval (the board's pinned settings; ``include_path``: the task folder of a registered
    stock task) and fold its differences into ``worst``; ``read``: samples path -> rows (default :func:`_rows`).
    ``(why the re-scoring failed, or "", worst)``."""
    from semcal_eval.runs import RunError, locate_run

    from .evaluate import PINNED, lm_eval_command, run_lm_eval

    for j_no, (j_filters, j_meta, j_ids, compared_with) in enumerate(jobs):
        out = tmp / f"{task}-{j_no}"
        cmd = lm_eval_command(pretrained, [task], out, samples={task: j_ids}, split=split, metadata=j_meta,
                              settings=PINNED, include_path=include_path)
        progress(f"spot check: re-scoring {len(j_ids)} of {n_docs} documents of {task} "
                 f"({', '.join(j_filters)}) with {pretrained}")
        err = run_lm_eval(cmd, tmp / f"{task}-{j_no}.log")
        if err:
            return f"re-scoring failed: {err}", worst
        try:
            new_rows = (read or (lambda p: _rows(p, None)))(locate_run(out, [task]).samples_paths[task])
        except (RunError, NotCheckable) as e:
            return f"re-scoring wrote no usable samples: {e}", worst
        worst = _compare(task, j_filters, sub_rows, new_rows, j_ids, j_meta, split, worst, compared_with)
    return "", worst


def _compare(task, filters, sub_rows, new_rows, ids, meta, split, worst, compared_with=None) -> dict:
    """Largest |submitted − re-scored| over ``filters`` × ``ids`` folded into ``worst``; SubmissionError for a
    missing filter/row or another document behind the same doc_id. ``compared_with``: the re-scored filter
    that must equal each submitted one (default: the same name)."""
    for f in filters:
        src = compared_with or f
        if src not in new_rows:
            raise SubmissionError(
                f"{task}: filter {src} is not produced by the task with the run's own "
                f"hyper-parameters ({json.dumps(meta, sort_keys=True)}); rejected"
            )
        # lm-eval 0.4.13 logs the chosen documents under their own doc_id; should a version number
        # them 0..k-1 in document order instead, map by position.
        by_pos = set(new_rows[src]) != set(ids) and set(new_rows[src]) == set(range(len(ids)))
        for j, doc in enumerate(ids):
            s, n = sub_rows[f][doc], new_rows[src].get(j if by_pos else doc)
            if n is None:
                raise SubmissionError(f"{task}: the re-scoring returned no row for a sampled document")
            if s["doc_hash"] and n["doc_hash"] and s["doc_hash"] != n["doc_hash"]:
                raise SubmissionError(
                    f"{task}: a sampled document's doc_hash is not the dataset's on split {split or 'default'}; "
                    "rejected")
            if len(s["probs"]) != len(n["probs"]):
                diff = math.inf
            else:
                diff = max(abs(float(a) - float(b)) for a, b in zip(s["probs"], n["probs"]))
            if diff > worst["diff"]:
                worst = {"diff": diff, "task": task, "doc_id": doc, "filter": f}
    return worst


def _finish(checked, unchecked, worst, draws, chosen, claim, pretrained) -> SpotCheck:
    from .evaluate import PINNED

    # Each draw is published with the entry (the tag and the documents it selects): it was unpredictable before
    # the submission (HMAC of the content hash under the board secret), and the next submission is drawn afresh.
    check = {"n_docs": sum(checked.values()), "docs_per_task": checked, "tolerance": TOLERANCE,
             "forged_share_caught": {"share": FORGED_SHARE, "probability": 1 - MISS_PROB},
             "seed_chosen_by_submitter": bool(chosen), "draws": draws,
             "model": claim, "rescored_with": pretrained, "backend": PINNED["backend"], "dtype": PINNED["dtype"],
             "device": PINNED["device"]}
    if checked:
        check["max_abs_diff"] = worst["diff"]
    if checked and not worst["diff"] <= TOLERANCE:
        raise SpotCheckRejected(
            f"spot check failed: {worst['task']}: the submitted probabilities are not {claim}'s with the settings "
            f"the run's task config records: a re-scored document is outside the tolerance "
            f"{TOLERANCE:g} ({check['n_docs']} documents re-scored; neither which ones nor how far off is "
            "disclosed). The attempt is recorded and counts towards the board's cap",
            detail=json.dumps({"worst": worst, "draws": draws}, sort_keys=True, default=str),
        )
    if unchecked:
        reason = "; ".join(f"{t}: {why}" for t, why in sorted(unchecked.items()))
        return SpotCheck("self-reported", {"reason": reason, "spot_check": check}, f"not spot-checked: {reason}")
    if chosen:
        reason = ("re-scored with a spot-check seed chosen by the submitter (--spot-check-seed), who therefore "
                  "knew which documents would be checked: not a spot-checked entry")
        return SpotCheck("self-reported", {"reason": reason, "spot_check": check},
                         f"spot check with a chosen seed passed (max |diff| {worst['diff']:.2g}); {reason}")
    return SpotCheck("spot-checked", {"spot_check": check},
                     f"spot check passed: {check['n_docs']} documents re-scored with {pretrained}, max |diff| "
                     f"{worst['diff']:.2g} <= {TOLERANCE:g}")
