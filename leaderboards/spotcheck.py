"""Spot check of a self-reported submission: re-score a random sample of its documents with the model it names.

``board submit`` calls :func:`spot_check` after :func:`leaderboards.recompute.validate_run` accepted the run.
Recomputation proves the reported numbers follow from the logged probabilities; the spot check tests whether
the logged probabilities came from the model that ``config.model_args`` names:

1. The model: ``pretrained=semcal:NAME`` (a catalogue model installed here), a catalogue cache folder
   ``.../<name>-<sha256[:12]>`` (the path ``semcal-eval`` writes into the results; mapped back to the
   catalogue, so a run from another machine is checkable), or a model folder that exists on this machine.
   Anything else (a hub id, a folder elsewhere, a non-float32 dtype) cannot be re-scored: the submission is
   stored as tier ``self-reported`` with the reason.
2. The sample: per task, ``max(20, ceil(2 %))`` of the evaluated documents (all of them if fewer than 20),
   drawn with ``random.Random(seed)``; the seed is drawn fresh at submit time (so the submitter cannot know
   which documents will be checked) and stored, so anyone can repeat the check.
3. Re-scoring: lm-eval itself, as a subprocess, with the board's pinned backend (hf-semsoft, float32, CPU)
   on exactly the sampled documents (``--samples``), the run's split and hyper-parameters. Requests are thus
   built by the task, exactly as in the submitted run, never from the submitted ``arguments``.
4. Comparison: for every filter whose probabilities are a function of that one document's model output
   (``constrained``, ``semsoft``, ``semsoft_tau*``; ``none`` of ``*_base`` tasks), the largest absolute
   difference between submitted and re-scored class probabilities. Above :data:`TOLERANCE` anywhere: rejected,
   naming the worst document. Otherwise tier ``spot-checked``.

``semsoft_tuned`` (P_sem at a configuration chosen on other documents) is re-scored at the configuration each
of its records names (``tuned_tau``, ``tuned_top_k``, ``tuned_embedding``, which must lie in the run's tuning
grid): one more lm-eval run per distinct configuration (one; two when cross-fitted folds chose differently)
whose ``semsoft`` row must equal the submitted ``semsoft_tuned`` row. That proves the probabilities are the
named model's at the named configuration; it does not re-derive the choice itself (that needs the tuning
documents' model outputs, which are not logged); every record of the row names its configuration.

Not re-scored: the cross-fitted rows ``constrained_ts`` / ``semsoft_ts`` (their temperature is fitted on the
*other* documents of the run, so a sample cannot reproduce them). Instead :func:`check_crossfit` recomputes
them in full, without the model, from the run's own ``constrained`` / ``semsoft`` rows with the same
2-fold fit (:func:`semcal_eval.core.recalibration.temperature_scale`), so they are exactly as trustworthy
as the rows they come from. Reference rows are not compared (the board computes those itself). QA tasks
(generation with sampling) are not spot-checked.

The seed: ``--spot-check-seed`` if given, else :func:`board_seed`, a hash of a secret kept in the board
database and the submission's predictions: unpredictable to a submitter, and the same for the same
predictions, so resubmitting a forged run draws the same documents again instead of a fresh chance.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import secrets
import shutil
import sqlite3
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SubmissionError
from .registry import REFERENCE_FILTERS

__all__ = ["TOLERANCE", "FRACTION", "MIN_DOCS", "SpotCheck", "NotCheckable", "sample_doc_ids", "claimed_model",
           "parse_model_args", "spot_check", "check_crossfit", "board_seed"]

#: Largest accepted |submitted - re-scored| of any class probability. Same model, same float32 weights, other
#: batching: padding and summation order move probabilities by ~5e-7 on CPU (measured); GPU kernels (TF32)
#: are expected to stay around 1e-4 (not measured). A different model, prompt, τ or K moves them by 1e-2 and
#: more (SmolLM2 vs Gemma-3-270m: 0.33 on GoEmotions), so the margin costs no detection power.
TOLERANCE = 1e-3
FRACTION = 0.02
MIN_DOCS = 20
#: Filters whose probabilities depend on other documents than their own (fitted across the run's documents),
#: with the row they are fitted from.
CROSS_DOCUMENT_FILTERS = {"constrained_ts": "constrained", "semsoft_ts": "semsoft"}
#: The row whose configuration is chosen on other documents; re-scored at the configuration its records name.
TUNED_FILTER = "semsoft_tuned"
#: dtypes whose arithmetic the tolerance was chosen for (None/"auto": the float32 catalogue folders load float32).
_FLOAT32 = (None, "", "auto", "float32", "torch.float32", "float", "fp32")
#: Main metric under which the per-document record is read (recompute checks that all copies are equal).
_MAIN = ("ece_uw15", "ece_uw10", "acc")


class NotCheckable(Exception):
    """The submission cannot be re-scored here; the message is the reason stored with it."""


@dataclass
class SpotCheck:
    """Outcome of a spot check that did not reject: the tier and the ``verification`` JSON to store."""

    tier: str  # "spot-checked" | "self-reported"
    verification: dict = field(default_factory=dict)
    message: str = ""


def sample_doc_ids(doc_ids: list[int], seed: int) -> list[int]:
    """A seeded random sample of ``doc_ids``: all if at most MIN_DOCS, else max(MIN_DOCS, ceil(2 %)); sorted."""
    ids = sorted(doc_ids)
    k = len(ids) if len(ids) <= MIN_DOCS else max(MIN_DOCS, math.ceil(FRACTION * len(ids)))
    return sorted(random.Random(seed).sample(ids, k))


def parse_model_args(model_args) -> dict:
    """lm-eval's model_args (a dict in results.json, or ``k=v,k=v`` text) as a dict of strings."""
    if isinstance(model_args, dict):
        return {str(k): v for k, v in model_args.items()}
    if isinstance(model_args, str):
        out = {}
        for part in model_args.split(","):
            k, sep, v = part.partition("=")
            if sep:
                out[k.strip()] = v.strip()
        return out
    return {}


def claimed_model(model_args) -> tuple[str, str]:
    """``(pretrained for lm-eval, the claim as written)`` of the model a run names; NotCheckable if it cannot
    be loaded here."""
    from semcal_eval.models import CATALOGUE, PREFIX, ModelNotInstalledError, model_path

    args = parse_model_args(model_args)
    claim = args.get("pretrained")
    if not isinstance(claim, str) or not claim:
        raise NotCheckable("model could not be loaded: config.model_args names no pretrained model")
    dtype = args.get("dtype")
    if dtype not in _FLOAT32:
        raise NotCheckable(f"model_args dtype={dtype} is not float32; the spot check's tolerance is for float32 "
                           "runs (rerun with dtype=float32 to be spot-checked)")
    name = claim[len(PREFIX):] if claim.startswith(PREFIX) else None
    if name is None:
        base = Path(claim).name
        name = next((e.name for e in CATALOGUE.values() if base == e.key), None)  # a catalogue cache folder
        if name is None and Path(claim).is_dir() and (Path(claim) / "config.json").is_file():
            return str(Path(claim).resolve()), claim
    if name is not None:
        if name not in CATALOGUE:
            raise NotCheckable(f"model could not be loaded: {claim!r} is not in the catalogue ({', '.join(CATALOGUE)})")
        try:
            model_path(name)
        except ModelNotInstalledError as e:
            raise NotCheckable(f"model could not be loaded: {e}") from None
        return PREFIX + name, claim
    raise NotCheckable(f"model could not be loaded: pretrained={claim[:120]!r} is neither a semcal catalogue model "
                       "nor a model folder on this machine (the board does not download models)")


def board_seed(con: sqlite3.Connection, predictions_hash: str) -> int:
    """Spot-check seed of a submission: sha256(board secret, predictions hash) as a 31-bit integer. The
    secret is created once per board database (meta key ``spot_check_secret``) and never shown."""
    row = con.execute("SELECT value FROM meta WHERE key = 'spot_check_secret'").fetchone()
    if row is None:
        con.execute("INSERT OR IGNORE INTO meta VALUES ('spot_check_secret', ?)", (secrets.token_hex(32),))
        row = con.execute("SELECT value FROM meta WHERE key = 'spot_check_secret'").fetchone()
    digest = hashlib.sha256(f"{row[0]}\x00{predictions_hash}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def check_crossfit(results_path: Path) -> dict:
    """Recompute every cross-fitted row (``constrained_ts`` / ``semsoft_ts``) of a run from its own source
    row, the way the ``crossfit_temperature`` filter does (documents sorted by doc_id, folds = position % 2,
    each fold scaled with T fitted on the other); SubmissionError naming the worst document if a logged
    probability differs by more than :data:`TOLERANCE`. Returns {task/filter: max |diff|} of the rows checked.
    """
    import numpy as np

    from semcal_eval.core import recalibration
    from semcal_eval.core.records import first_gold
    from semcal_eval.runs import locate_run, read_results

    results = read_results(Path(results_path))
    subtasks = _dict(results.get("group_subtasks"))
    tasks = sorted(t for t in results["results"] if not subtasks.get(t))
    run = locate_run(results_path, tasks)
    out = {}
    for task in tasks:
        rows = _rows(run.samples_paths[task], None, gold=True, strict=False)
        for ts, source in CROSS_DOCUMENT_FILTERS.items():
            if ts not in rows or source not in rows:
                continue
            ids = sorted(rows[source])
            if sorted(rows[ts]) != ids:
                raise SubmissionError(f"{task}: filter {ts} covers other documents than {source}; rejected")
            probs = np.asarray([rows[source][i]["probs"] for i in ids], dtype=float)
            labels = np.asarray([first_gold(rows[source][i]["gold"]) for i in ids])
            fold = np.arange(len(ids)) % 2
            worst = (-1.0, None)
            for f in (0, 1):
                fit_on, apply_to = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
                try:
                    with warnings.catch_warnings():  # a fit at its bound is the run's business, not the check's
                        warnings.simplefilter("ignore")
                        scaled, _ = recalibration.temperature_scale(probs[fit_on], labels[fit_on], probs[apply_to])
                except ValueError as e:
                    raise SubmissionError(f"{task}: filter {ts} cannot be recomputed from {source}: {e}") from e
                for i, p in zip(apply_to, scaled):
                    got = rows[ts][ids[i]]["probs"]
                    d = math.inf if len(got) != len(p) else float(np.max(np.abs(np.asarray(got, float) - p)))
                    if d > worst[0]:
                        worst = (d, ids[i])
            if not worst[0] <= TOLERANCE:
                raise SubmissionError(
                    f"{task} document {worst[1]} (filter {ts}): the logged probabilities differ by {worst[0]:.3g} "
                    f"from temperature scaling of the run's own {source} row, cross-fitted as the task does "
                    f"(tolerance {TOLERANCE:g}); rejected"
                )
            out[f"{task}/{ts}"] = worst[0]
    return out


def _task_kinds() -> tuple[set[str], set[str]]:
    """(semsoft tasks, stock multiple_choice tasks) of the packaged task folder."""
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs
    from semcal_eval.semsoft.task import semsoft_task_names

    mc = {cfg["task"] for _, cfg in iter_task_configs(TASKS_DIR) if cfg.get("output_type") == "multiple_choice"}
    return semsoft_task_names(), mc


def _record(row: dict):
    for m in _MAIN:
        if m in row:
            return row[m]
    raise SubmissionError(f"samples row {row.get('_line')}: no record under {', '.join(_MAIN)}")


def _rows(samples_path: Path, wanted: set[int] | None, *, gold: bool = False,
          strict: bool = True) -> dict[str, dict[int, dict]]:
    """filter -> doc_id -> {"probs", "doc_hash"(, "gold")} of classification records (streamed); a confidence
    (QA) record raises NotCheckable when ``strict``, else its filter is left out."""
    from semcal_eval.runs import iter_samples

    out: dict[str, dict[int, dict]] = {}
    for r in iter_samples(samples_path):
        if wanted is not None and r.get("doc_id") not in wanted:
            continue
        rec = _record(r)
        if not isinstance(rec, dict) or "probs" not in rec:
            if strict:
                raise NotCheckable("records are not classification records")
            continue
        row = {"probs": rec["probs"], "doc_hash": r.get("doc_hash"),
               "tuned": tuple(rec.get(k) for k in ("tuned_tau", "tuned_top_k", "tuned_embedding"))}
        if gold:
            row["gold"] = rec.get("gold")
        out.setdefault(r["filter"], {})[r["doc_id"]] = row
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
                f"{task} document {doc} (filter {TUNED_FILTER}): the record names configuration tau={tau!r}, "
                f"top_k={k!r}, label_embedding={emb!r}, which is not in the run's tuning grid {grid}; rejected")
        out.setdefault((float(tau), int(k), emb), []).append(doc)
    return out


def spot_check(results_path: Path, *, seed: int | None = None, splits: dict[str, str] | None = None,
               work_dir: Path | None = None, progress=print) -> SpotCheck:
    """Spot-check the validated run of ``results_path`` (see the module docstring). ``splits``: task -> the
    split validate_run checked the documents against (preferred to the run's own metadata).

    Returns a :class:`SpotCheck` (tier ``spot-checked``, or ``self-reported`` with the reason); raises
    SubmissionError naming the worst document when the probabilities differ beyond :data:`TOLERANCE`."""
    from semcal_eval.runs import RunError, locate_run, read_results

    from .evaluate import PINNED, lm_eval_command, run_lm_eval

    results = read_results(Path(results_path))
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    config = _dict(results.get("config"))
    try:
        pretrained, claim = claimed_model(config.get("model_args"))
    except NotCheckable as e:
        return SpotCheck("self-reported", {"reason": str(e)}, f"not spot-checked: {e}")
    semsoft_tasks, mc_tasks = _task_kinds()
    subtasks = _dict(results.get("group_subtasks"))
    tasks = sorted(t for t in results["results"] if not subtasks.get(t))
    run = locate_run(results_path, tasks)
    unchecked: dict[str, str] = {}
    checked: dict[str, int] = {}
    worst = {"diff": -1.0}
    tmp = Path(tempfile.mkdtemp(prefix="semcal-spotcheck-", dir=work_dir))
    try:
        for task in tasks:
            cfg = _dict(_dict(results.get("configs")).get(task))
            if task not in semsoft_tasks and task not in mc_tasks:
                unchecked[task] = ("only semsoft and multiple_choice (*_base) tasks are re-scored; generation "
                                   "(QA) tasks are not spot-checked")
                continue
            shots = _dict(results.get("n-shot")).get(task)
            if shots and not (isinstance(shots, int) and shots == 0):
                unchecked[task] = "few-shot contexts depend on the documents drawn before each one"
                continue
            if results.get("chat_template") or results.get("system_instruction"):
                unchecked[task] = "runs with a chat template or system instruction are not re-scored"
                continue
            try:
                sub_rows = _rows(run.samples_paths[task], None)
            except NotCheckable as e:
                unchecked[task] = str(e)
                continue
            filters = [f for f in sorted(sub_rows)
                       if f not in CROSS_DOCUMENT_FILTERS and f not in REFERENCE_FILTERS and f != TUNED_FILTER]
            if not filters:
                unchecked[task] = "no filter of this run is a per-document function of the model"
                continue
            ids = sample_doc_ids(list(sub_rows[filters[0]]), seed + sum(map(ord, task)))
            meta, split = _rescore_metadata(cfg, task in semsoft_tasks)
            grid = meta.pop("tune_grid", None)
            split = (splits or {}).get(task) or split
            jobs = [(filters, meta, ids, None)]  # (submitted filters, metadata, documents, compared with)
            if TUNED_FILTER in sub_rows and task in semsoft_tasks:
                tids = [d for d in ids if d in sub_rows[TUNED_FILTER]]
                for (tau, k, emb), docs in sorted(_tuned_configs(task, sub_rows[TUNED_FILTER], tids, grid).items()):
                    jobs.append(([TUNED_FILTER], {**meta, "tau": [tau], "top_k": k, "label_embedding": emb}, docs,
                                 "semsoft"))
            failed = None
            for j_no, (j_filters, j_meta, j_ids, compared_with) in enumerate(jobs):
                failed = None
                out = tmp / f"{task}-{j_no}"
                cmd = lm_eval_command(pretrained, [task], out, samples={task: j_ids}, split=split, metadata=j_meta,
                                      settings=PINNED)
                progress(f"spot check: re-scoring {len(j_ids)} of {len(sub_rows[filters[0]])} documents of {task} "
                         f"({', '.join(j_filters)}) with {pretrained} (seed {seed})")
                err = run_lm_eval(cmd, tmp / f"{task}-{j_no}.log")
                if err:
                    failed = f"re-scoring failed: {err}"
                    break
                try:
                    new_rows = _rows(locate_run(out, [task]).samples_paths[task], None)
                except (RunError, NotCheckable) as e:
                    failed = f"re-scoring wrote no usable samples: {e}"
                    break
                worst = _compare(task, j_filters, sub_rows, new_rows, j_ids, j_meta, split, worst, compared_with)
            if failed:
                unchecked[task] = failed
                continue
            checked[task] = len(ids)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _finish(checked, unchecked, worst, seed, claim, pretrained)


def _compare(task, filters, sub_rows, new_rows, ids, meta, split, worst, compared_with=None) -> dict:
    """Largest |submitted − re-scored| over ``filters`` × ``ids`` folded into ``worst``; SubmissionError for a
    missing filter/row or another document behind the same doc_id. ``compared_with``: the re-scored filter
    that must equal each submitted one (default: the same name)."""
    for f in filters:
        src = compared_with or f
        if src not in new_rows:
            raise SubmissionError(
                f"spot check: {task} filter {src} is not produced by the task with the run's own "
                f"hyper-parameters ({json.dumps(meta, sort_keys=True)}); rejected"
            )
        # lm-eval 0.4.13 logs the chosen documents under their own doc_id; should a version number
        # them 0..k-1 in document order instead, map by position.
        by_pos = set(new_rows[src]) != set(ids) and set(new_rows[src]) == set(range(len(ids)))
        for j, doc in enumerate(ids):
            s, n = sub_rows[f][doc], new_rows[src].get(j if by_pos else doc)
            if n is None:
                raise SubmissionError(f"spot check: re-scoring returned no row for {task} document {doc}")
            if s["doc_hash"] and n["doc_hash"] and s["doc_hash"] != n["doc_hash"]:
                raise SubmissionError(
                    f"spot check: {task} document {doc}: doc_hash {str(s['doc_hash'])[:12]} is not the "
                    f"dataset's ({str(n['doc_hash'])[:12]}) on split {split or 'default'}; rejected"
                )
            if len(s["probs"]) != len(n["probs"]):
                diff = math.inf
            else:
                diff = max(abs(float(a) - float(b)) for a, b in zip(s["probs"], n["probs"]))
            if diff > worst["diff"]:
                worst = {"diff": diff, "task": task, "doc_id": doc, "filter": f}
    return worst


def _finish(checked, unchecked, worst, seed, claim, pretrained) -> SpotCheck:
    from .evaluate import PINNED

    check = {"n_docs": sum(checked.values()), "docs_per_task": checked, "seed": seed, "tolerance": TOLERANCE,
             "model": claim, "rescored_with": pretrained, "backend": PINNED["backend"], "dtype": PINNED["dtype"],
             "device": PINNED["device"]}
    if checked:
        check["max_abs_diff"] = worst["diff"]
        check["worst_doc"] = {k: worst[k] for k in ("task", "doc_id", "filter")}
    if checked and not worst["diff"] <= TOLERANCE:
        raise SubmissionError(
            f"spot check failed: {worst['task']} document {worst['doc_id']} (filter {worst['filter']}): the "
            f"submitted probabilities differ from {claim}'s by {worst['diff']:.3g} (tolerance {TOLERANCE:g}; "
            f"{check['n_docs']} documents re-scored, seed {seed}); the run was not produced by the model its "
            "model_args name with the settings its task config records"
        )
    if unchecked:
        reason = "; ".join(f"{t}: {why}" for t, why in sorted(unchecked.items()))
        return SpotCheck("self-reported", {"reason": reason, "spot_check": check}, f"not spot-checked: {reason}")
    return SpotCheck("spot-checked", {"spot_check": check},
                     f"spot check passed: {check['n_docs']} documents re-scored with {pretrained}, max |diff| "
                     f"{worst['diff']:.2g} <= {TOLERANCE:g} (worst: {worst['task']} document {worst['doc_id']})")
