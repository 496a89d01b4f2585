"""lm-eval glue of the QA calibration tasks (tasks/{nq_open,triviaqa,hotpotqa,msmarco}, one shared template in
tasks/qa_common): the data hook, the two filters and the task class.

One document's path: :func:`load` (rows of ``semcal_eval.data`` with ``qa_question`` / ``qa_golds`` from
:mod:`semcal_eval.data.fields`) → :class:`QATask` builds one greedy and one K-sample ``generate_until``
request → :class:`JudgeFilter` clusters them (:func:`semcal_eval.qa.agreement.score_question`), or
:class:`VerbalizedFilter` parses a stated confidence (modes ``verbalized`` and ``rlcr``) →
:meth:`QATask.process_results` returns the one confidence record
(:func:`semcal_eval.core.records.confidence_record`) under every metric name → the metric table
(:mod:`semcal_eval.harness.aggregations`).

Settings come from the task's ``metadata`` (the YAML's, merged with ``--metadata``; the CLI wins), see
:class:`semcal_eval.qa.settings.QASettings`. This module imports lm-eval; the pure QA functions live in
:mod:`semcal_eval.qa`.
"""

from __future__ import annotations

import json
import logging
from copy import deepcopy

from datasets import Dataset, DatasetDict
from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from lm_eval.api.task import ConfigurableTask

from semcal_eval.core.metric_table import METRICS, RANK_METRICS, base_metric
from semcal_eval.core.records import confidence_record
from semcal_eval.data import EVAL_KEY, QA_FIELDS, make_lm_eval_loader, qa_fields, qa_golds, qa_question
from semcal_eval.harness import aggregations  # noqa: F401  (registers the semcal_* aggregations the YAMLs name)
from semcal_eval.harness.base import check_aggregations, metric_values, process_results_marker
from semcal_eval.harness.lm_eval_compat import metric_names

from . import estimators as EST
from .agreement import agreement_matrix, score_question
from .answers import EmptyGoldError, best_f1, clean_answer, exact_match
from .judge_card import results_card
from .labels import DEFAULT_CORRECTNESS, grade_record, grader_name
from .judges import get_judge
from .prompts import qa_doc_to_text
from .settings import RECORD_FIELDS, QASettings
from .verbalized import RD_BINS, parse_rd, parse_rlcr, parse_verbalized

__all__ = [
    "QASettings",
    "SAMPLING_KEYS",
    "qa_docs",
    "load",
    "qa_doc_to_target",
    "JudgeFilter",
    "EstimatorFilter",
    "VerbalizedFilter",
    "QATask",
]

log = logging.getLogger(__name__)

#: generation keys that set the *sampling* of the K answers; ``--gen_kwargs`` may not change them.
SAMPLING_KEYS = ("do_sample", "temperature", "top_p", "top_k", "min_p", "typical_p", "num_beams",
                 "num_return_sequences", "repetition_penalty")

#: The fields of the one confidence record each mode fills (the modes' table: semcal_eval.qa.settings)
_RECORD_FIELDS = RECORD_FIELDS


# ----------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------


def qa_docs(name: str, dataset: Dataset) -> Dataset:
    """The scorable QA documents of ``dataset`` (rows of QA dataset ``name`` in the hub schema).

    Adds ``qa_question`` = :func:`semcal_eval.data.fields.qa_question` and ``qa_golds`` =
    :func:`semcal_eval.data.fields.qa_golds` (the one table of question fields, gold extraction and
    unanswerable markers) to every row. Rows without a usable gold answer (an empty list, only empty strings,
    or only unanswerable markers such as MS MARCO's "No Answer Present.") or without question text cannot be
    scored for correctness: they are dropped and the count is logged as a warning, never silently. None left
    raises :class:`~semcal_eval.qa.answers.EmptyGoldError`.
    """
    qa_fields(name)  # a clear error for a name that is not a QA dataset, before touching the rows

    def add(row):
        return {"qa_question": qa_question(name, row), "qa_golds": qa_golds(name, row)}

    ds = dataset.map(add)
    kept = ds.filter(lambda d: len(d["qa_golds"]) > 0 and bool(d["qa_question"]))
    dropped = len(ds) - len(kept)
    if dropped:
        log.warning("%s: dropped %d of %d questions without a usable gold answer or question text "
                    "(unanswerable/empty; they cannot be scored)", name, dropped, len(ds))
    if len(kept) == 0:
        raise EmptyGoldError(
            f"{name}: none of the {len(ds)} questions has a usable gold answer (semcal_eval.data.fields.qa_golds); "
            "check the split (--metadata '{\"split\": ...}') and the data source (SEMCAL_DATA_DIR / data_dir)"
        )
    return kept


def load(qa_dataset: str | None = None, **kwargs) -> DatasetDict:
    """The QA tasks' ``custom_dataset`` hook: ``{"eval": qa_docs(qa_dataset, <evaluated split>)}``.

    lm-eval 0.4.13 calls it as ``custom_dataset(**metadata, **dataset_kwargs)``; the template's families set
    ``dataset_kwargs: {qa_dataset: <name>}`` and the other keys (``split``, ``data_dir``, unrelated metadata)
    go to :func:`semcal_eval.data.make_lm_eval_loader`. Only the evaluated split is returned, prepared: the
    QA tasks are zero-shot (their three examples are fixed in the prompt), so no other split is read by them.
    """
    if qa_dataset is None:
        raise ValueError(
            "QA task: no dataset named. A QA task YAML includes ../qa_common/_qa_template_yaml and sets "
            f"`dataset_kwargs: {{qa_dataset: <name>}}` with <name> one of {sorted(QA_FIELDS)}"
        )
    qa_fields(qa_dataset)
    splits = make_lm_eval_loader(qa_dataset)(**kwargs)
    return DatasetDict({EVAL_KEY: qa_docs(qa_dataset, splits[EVAL_KEY])})


def qa_doc_to_target(doc: dict) -> str:
    """The first gold alias (lm-eval logs it as the sample's ``target``; scoring uses every alias)."""
    return doc["qa_golds"][0]


# ----------------------------------------------------------------------------------------------------------
# Filters
# ----------------------------------------------------------------------------------------------------------


def _pairs_by_doc(resps: list, docs: list, per_doc: int) -> list[tuple[int, dict]]:
    """Start index and doc of each document's ``per_doc`` consecutive instances (their construction order)."""
    if len(resps) % per_doc:
        raise RuntimeError(f"QA filter: {len(resps)} instances is not a multiple of {per_doc} per question; "
                           "the QA filters only work on tasks built by semcal_eval.qa.task.QATask")
    out = []
    for i in range(0, len(resps), per_doc):
        if any(docs[i + j] is not docs[i] and docs[i + j] != docs[i] for j in range(per_doc)):
            raise RuntimeError("QA filter: a question's greedy and sampled instances are not adjacent; "
                               "the QA filters only work on tasks built by semcal_eval.qa.task.QATask")
        out.append((i, docs[i]))
    return out


class JudgeFilter(Filter):
    """Cluster each question's greedy answer and K samples with one judge (one filter per judge).

    Output per question: the greedy answer (for the greedy instance) and the
    :func:`~semcal_eval.qa.agreement.score_question` record as a JSON string (for the sampled instance),
    which lm-eval logs in ``filtered_resps``.
    """

    def __init__(self, judge: str = "cover", correctness: str = DEFAULT_CORRECTNESS, threshold: float = 0.5,
                 num_samples: int | None = None, cluster_greedy: bool = True, log_token_logprobs: bool = False,
                 **judge_kwargs):
        self.judge = get_judge(judge, **judge_kwargs)
        self.correctness, self.threshold = correctness, float(threshold)
        # lm-eval pads a data-parallel rank's last request with extra responses (evaluator.py,
        # padding_requests): only the first K are the question's samples
        self.num_samples = num_samples
        self.cluster_greedy, self.log_token_logprobs = bool(cluster_greedy), bool(log_token_logprobs)

    def apply(self, resps, docs):
        resps, docs = list(resps), list(docs)
        out: list = []
        for i, doc in _pairs_by_doc(resps, docs, 2):
            greedy = clean_answer(resps[i][0])
            raw_samples = list(resps[i + 1][: self.num_samples])
            samples = [clean_answer(s) for s in raw_samples]
            seq_lp, why = sample_seq_logprobs(raw_samples)
            rec = score_question(doc["qa_question"], greedy, samples, doc["qa_golds"], self.judge,
                                 threshold=self.threshold, correctness=self.correctness, seq_logprobs=seq_lp,
                                 cluster_greedy=self.cluster_greedy, no_logprobs_reason=why)
            rec["rouge_l"] = EST.quality_rouge_l(greedy, doc["qa_golds"])  # the continuous quality (PRR-ROUGE-L)
            if self.log_token_logprobs:
                rec.update(token_logprob_fields(resps[i][0], raw_samples))
            # a JSON string: lm-eval logs filtered_resps with str(), and JSON stays machine-readable
            out += [greedy, json.dumps(rec, ensure_ascii=False)]
        return out


#: why conf_likelihood is absent when the samples carry no token log-probs (the record says so)
NO_SAMPLE_LOGPROBS = ("the backend returned no token log-probs for the samples (stock hf, a cached --use_cache "
                      "response, min_new_tokens > 0, or a sampling setting the shared-prefix path does not serve): "
                      "run on --model hf-semsoft for the likelihood-weighted confidence")


def sample_seq_logprobs(raw_samples) -> tuple[list[float] | None, str | None]:
    """The samples' sequence log-likelihoods Σ_t ln p(s_t | s_<t, x) from the responses' token log-probs
    (:class:`semcal_eval.harness.sampling.GeneratedText`), or (None, why) when any sample has none.

    The raw (not :func:`clean_answer`-ed) response carries them; the sum covers the generated tokens up to and
    including the stop token, the sequence the model actually produced."""
    lps = [getattr(r, "token_logprobs", None) for r in raw_samples]
    if not lps or any(not lp for lp in lps):
        return None, NO_SAMPLE_LOGPROBS
    return [float(sum(lp)) for lp in lps], None


def token_logprob_fields(greedy_resp, raw_samples) -> dict:
    """The opt-in per-token fields (metadata ``log_token_logprobs``): ``greedy_token_logprobs``,
    ``greedy_token_entropies`` and ``sample_token_logprobs`` (one list per sample; [] where the backend gave
    none), each value rounded to 6 decimals (ln p to 1e-6: far below any estimator's resolution, and about half
    the bytes of a full float repr)."""
    def r(xs):
        return [round(float(x), 6) for x in (xs or ())]

    return {"greedy_token_logprobs": r(getattr(greedy_resp, "token_logprobs", None)),
            "greedy_token_entropies": r(getattr(greedy_resp, "token_entropies", None)),
            "sample_token_logprobs": [r(getattr(x, "token_logprobs", None)) for x in raw_samples]}


class EstimatorFilter(JudgeFilter):
    """One uncertainty estimator as a filter row (:mod:`semcal_eval.qa.estimators`, or ``"ptrue"``), read from
    the question's greedy answer and K samples (no new sampling): the greedy answer's token log-probs /
    entropies come with the response when the backend logs them (``hf-semsoft``'s shared-prefix path,
    :class:`semcal_eval.harness.sampling.GeneratedText`); the consistency rows use the judge's clusters and
    agreement matrix of the samples.

    Record (JSON, like :class:`JudgeFilter`'s): ``conf`` (the estimator's confidence in [0, 1], None when the
    evidence is missing), ``score`` (the paper's quantity), ``estimator``, ``probability`` (False: a ranking
    score, reported by AUROC / PRR / AUARC only), ``correct``, ``em``, ``f1``, ``greedy``. With ``calibrate``
    (``"isotonic"`` or ``"platt"``) ``conf`` is instead P(correct | score) from a map fitted on the other fold
    of the documents (position % 2, as the ``_ts`` rows), and ``probability`` is True.
    """

    def __init__(self, estimator: str = "msp", calibrate: str | None = None, ptrue_model: str | None = None,
                 ptrue_prompt: str = "semcal", **kwargs):
        super().__init__(**kwargs)
        self.ptrue_prompt = ptrue_prompt
        if estimator not in EST.ESTIMATORS and estimator != "ptrue":
            raise ValueError(f"EstimatorFilter: unknown estimator {estimator!r}; known: {[*EST.ESTIMATORS, 'ptrue']}")
        self.estimator, self.calibrate = estimator, calibrate
        self._warned: set = set()  # lm-eval builds the filter once per apply: one warning per row and run
        self._ptrue = None
        self.ptrue_model = ptrue_model or QASettings.ptrue_model

    def _one(self, doc, greedy_resp, sample_resps) -> dict:
        q, golds = doc["qa_question"], doc["qa_golds"]
        greedy = clean_answer(greedy_resp)
        samples = [clean_answer(x) for x in sample_resps[: self.num_samples]]
        f1 = best_f1(greedy, golds)
        rec = {"estimator": self.estimator, "greedy": greedy, "f1": f1, "em": exact_match(greedy, golds),
               **grade_record(self.correctness, greedy, golds, q, self.threshold, self.judge)}
        if self.estimator == "ptrue":
            if self._ptrue is None:
                from .ptrue import PTrue

                self._ptrue = PTrue(self.ptrue_model, style=self.ptrue_prompt)
            # polygraph's prompt puts the whole task prompt (its few-shot examples included) in {q}
            p = self._ptrue.score(qa_doc_to_text(doc) if self.ptrue_prompt == "polygraph" else q, greedy, samples)
            return {**rec, "conf": p, "score": p, "probability": self.ptrue_prompt == "semcal",
                    "ptrue_prompt": self.ptrue_prompt}
        est = EST.ESTIMATORS[self.estimator]
        ids = (score_question(q, greedy, samples, golds, self.judge, cluster_greedy=self.cluster_greedy)["cluster_ids"]
               if est.needs == "samples" else [])
        raw = list(sample_resps[: self.num_samples])
        s_lp = [list(getattr(x, "token_logprobs", None) or ()) for x in raw]
        ev = EST.Evidence(samples, ids, getattr(greedy_resp, "token_logprobs", None) or None,
                          getattr(greedy_resp, "token_entropies", None) or None,
                          matrix_fn=lambda: agreement_matrix(q, samples, self.judge),
                          sample_token_logprobs=s_lp if s_lp and all(s_lp) else None)
        out = EST.estimator_conf(self.estimator, ev)
        if out is None:
            if self.estimator not in self._warned:
                self._warned.add(self.estimator)
                log.warning("QA estimator %s: the backend returned no token log-probs/entropies for the greedy "
                            "answer, so this row has no metrics; run on --model hf-semsoft (shared_prefix=True) "
                            "without --use_cache, or drop it from --metadata estimators", self.estimator)
            return {**rec, "conf": None, "score": None, "probability": est.probability}
        return {**rec, "conf": out[1], "score": out[0], "probability": est.probability}

    def apply(self, resps, docs):
        resps, docs = list(resps), list(docs)
        pairs = _pairs_by_doc(resps, docs, 2)
        recs = [self._one(doc, resps[i][0], resps[i + 1]) for i, doc in pairs]
        if self.calibrate:
            recs = self._calibrated(recs)
        out: list = []
        for (i, _), rec in zip(pairs, recs):
            out += [rec["greedy"], json.dumps(rec, ensure_ascii=False)]
        return out

    def _calibrated(self, recs: list[dict]) -> list[dict]:
        from semcal_eval.harness.distributed import world

        if world()[1] > 1:
            raise ValueError(f"QA estimator row {self.estimator}_iso cross-fits over all documents, which one rank "
                             "of a data-parallel run does not have: set --metadata '{\"estimator_calibration\": null}'")
        have = [r for r in recs if r["conf"] is not None]
        if len(have) < 4:
            log.warning("QA estimator %s: %d documents with a score, too few to cross-fit a calibration map (≥ 4); "
                        "the calibrated row has no metrics", self.estimator, len(have))
            return [{**r, "conf": None} for r in recs]
        # increasing in the confidence (a monotone map of the score), so one orientation for every estimator
        cal = EST.crossfit_calibrate([r["conf"] for r in have], [r["correct"] for r in have], method=self.calibrate)
        it = iter(cal.tolist())
        return [{**r, "conf": next(it) if r["conf"] is not None else None, "probability": True,
                 "calibration": self.calibrate} for r in recs]


class VerbalizedFilter(Filter):
    """Parse the answer and the stated confidence of each greedy generation
    (:func:`~semcal_eval.qa.verbalized.parse_verbalized`); correct by :func:`semcal_eval.qa.labels.correct_by`
    under ``correctness`` (default ``strict``, the grader of the training rewards; ``judge`` is read as ``strict``
    here, a stated-confidence row has no clustering judge).

    With ``rlcr=True`` (mode ``rlcr``) the generation is read by
    :func:`~semcal_eval.qa.verbalized.parse_rlcr`, the parser of the RLCR rewards (same answer and confidence),
    and the record also logs ``format_ok``, RLCR's format term."""

    def __init__(self, threshold: float = 0.5, missing_confidence: float = 0.5, rlcr: bool = False,
                 rd: bool = False, correctness: str = DEFAULT_CORRECTNESS, **_):
        self.threshold, self.missing, self.rlcr = float(threshold), float(missing_confidence), bool(rlcr)
        # no clustering judge here: "judge" reads as the default grader
        self.correctness = DEFAULT_CORRECTNESS if correctness == "judge" else correctness
        self.rd = bool(rd)  # mode rd: parse_rd, the parser of the RD reward (confidence bin c → c / 10)

    def apply(self, resps, docs):
        out = []
        for r, doc in zip(resps, docs):
            fmt = None
            if self.rlcr:
                fmt, answer, conf = parse_rlcr(r[0])
            elif self.rd:
                fmt, answer, conf = parse_rd(r[0])
                conf = None if conf is None else conf / RD_BINS
            else:
                answer, conf = parse_verbalized(r[0])
            f1 = best_f1(answer, doc["qa_golds"])
            rec = {
                "conf": self.missing if conf is None else conf,
                "conf_parsed": conf is not None,
                **grade_record(self.correctness, answer, doc["qa_golds"], doc["qa_question"], self.threshold),
                "em": exact_match(answer, doc["qa_golds"]),
                "f1": f1,
                "greedy": answer,
                "raw": r[0],
            }
            if fmt is not None:
                rec["format_ok"] = fmt
            out.append(json.dumps(rec, ensure_ascii=False))
        return out


# ----------------------------------------------------------------------------------------------------------
# Task
# ----------------------------------------------------------------------------------------------------------


def _metric_reads(m: str, record: dict) -> bool:
    """Whether metric ``m`` (a table metric or its CI) reads only fields ``record`` has."""
    metric = METRICS.get(base_metric(m))
    return metric is None or all(f in record for f in metric.view)


def _check_metrics(task: str | None, mode: str, metric_list: list | None) -> None:
    """Every metric of the YAML's metric_list reads fields that this mode's record has (checked when the task
    is built, not after the model pass)."""
    have = _RECORD_FIELDS[mode]
    for entry in metric_list or []:
        m = entry.get("metric") if isinstance(entry, dict) else None
        base = base_metric(m) if isinstance(m, str) else m
        metric = METRICS.get(base)
        if metric is None:
            continue  # not a table metric: check_aggregations / lm-eval name it
        if metric.needs != "any":
            raise ValueError(f"{task}: metric {m} needs {metric.needs} records, but a QA task logs confidence "
                             "records {conf, correct, ...}: drop it from metric_list")
        missing = [f for f in metric.view if f not in have]
        if missing:
            modes = [k for k, v in _RECORD_FIELDS.items() if all(f in v for f in metric.view)]
            raise ValueError(f"{task}: metric {m} reads the record field(s) {missing}, which mode {mode!r} does "
                             "not produce: drop it from metric_list" + (f", or use mode {modes[0]!r}" if modes else ""))


class QATask(ConfigurableTask):
    """QA calibration by semantic agreement: per question one greedy answer (scored for correctness) and
    K sampled answers (``repeats=K`` on a second ``generate_until`` instance), clustered by each judge
    filter; or, with ``mode: verbalized`` (or ``rlcr``), one greedy answer with a stated confidence.

    Settings come from ``metadata`` (:class:`~semcal_eval.qa.settings.QASettings`, checked once here).
    ``--gen_kwargs`` may change ``until`` or ``max_gen_toks`` (applied to greedy and samples, with a warning)
    but not the sampling keys
    (:data:`SAMPLING_KEYS`): those raise, naming the ``--metadata`` keys to use instead.
    """

    def __init__(self, config: dict | None = None, **kwargs):
        config = dict(config or {})
        config.pop("class", None)  # TaskConfig rejects unknown keys
        self.qa = QASettings.from_metadata(config.get("metadata"))
        if int(config.get("repeats", 1) or 1) != 1:
            raise ValueError("QA task: set the number of samples with metadata num_samples, not repeats")
        # no metric_list in the YAML: the metric table's default for this mode, filled in as lm-eval fills an
        # output type's default (aggregations.config_layout: the same rule the board's registry reads YAMLs by)
        config["metric_list"] = aggregations.declared_metric_list({**config, "class": type(self)})
        _check_metrics(config.get("task"), self.qa.mode, config.get("metric_list"))
        config["filter_list"] = self._filters_from_settings(config.get("filter_list"))
        #: the correctness rules the filters grade by (one, unless judge_kwargs set another per judge)
        self._correctness = sorted({step.get("correctness", DEFAULT_CORRECTNESS) for fl in config["filter_list"]
                                    for step in fl["filter"]})
        config["process_results"] = process_results_marker
        super().__init__(config=config, **kwargs)
        check_aggregations(self)
        self._gen_snapshot = deepcopy(self.config.generation_kwargs or {})
        self._warned_gen = False

    def dump_config(self) -> dict:
        """lm-eval's dump of the config (what it writes under ``configs[task]`` in ``results_*.json``) plus
        ``judge_card``: how far the run's correctness labels can be trusted
        (:func:`semcal_eval.qa.judge_card.results_card` of the grader the records name), so a results file read
        without semcal still says it."""
        out = super().dump_config()
        graders = [grader_name(rule) for rule in self._correctness]
        out["judge_card"] = (results_card(graders[0]) if len(graders) == 1 else
                             {"grader": ", ".join(graders), "card": None,
                              "why": "the filters grade by several rules (judge_kwargs); each record names its grader"})
        return out

    def _filters_from_settings(self, filter_list):
        s = self.qa
        if s.stated:
            return [{"name": s.mode, "filter": [{
                "function": VerbalizedFilter, "threshold": s.correct_threshold, "correctness": s.correctness,
                "missing_confidence": s.missing_confidence, "rlcr": s.mode == "rlcr", "rd": s.mode == "rd"}]}]
        if s.judges is not None:
            filter_list = [{"name": f"judge_{'embed' if j == 'embedding' else j}",
                            "filter": [{"function": JudgeFilter, "judge": j}]} for j in s.judges]
        if not filter_list:
            filter_list = [{"name": "judge_f1", "filter": [{"function": JudgeFilter, "judge": "f1"}]}]
        filter_list = deepcopy(filter_list)
        for name in s.estimators:
            filter_list.append({"name": name, "filter": [{
                "function": EstimatorFilter, "judge": s.estimator_judge, "estimator": name,
                "ptrue_model": s.ptrue_model, "ptrue_prompt": s.ptrue_prompt}]})
            est = EST.ESTIMATORS.get(name)
            if est is not None and not est.probability and s.estimator_calibration:
                filter_list.append({"name": f"{name}_iso" if s.estimator_calibration == "isotonic" else
                                    f"{name}_platt", "filter": [{
                                        "function": EstimatorFilter, "judge": s.estimator_judge,
                                        "estimator": name, "calibrate": s.estimator_calibration}]})
        for fl in filter_list:
            steps = fl.get("filter") or []
            fn = steps[0].get("function") if len(steps) == 1 else None
            if not (isinstance(fn, type) and issubclass(fn, JudgeFilter)):
                raise ValueError(f"QA task: filter {fl.get('name')!r} must be exactly one "
                                 "semcal_eval.qa.task.JudgeFilter step (one judge per named filter)")
            step = steps[0]
            name = step.get("judge", "f1")
            step.update(s.judge_kwargs.get(name, {}))
            step.setdefault("correctness", s.correctness)
            step.setdefault("threshold", s.correct_threshold)
            step.setdefault("num_samples", s.num_samples)
            step.setdefault("cluster_greedy", s.cluster_greedy)
            if not (isinstance(fn, type) and issubclass(fn, EstimatorFilter)):
                step.setdefault("log_token_logprobs", s.log_token_logprobs)
        return filter_list

    def _gen_kwargs(self) -> tuple[dict, dict | None]:
        cur = dict(self.config.generation_kwargs or {})
        snap = self._gen_snapshot
        changed = sorted(k for k in set(cur) | set(snap) if cur.get(k) != snap.get(k))
        bad = [k for k in changed if k in SAMPLING_KEYS]
        if bad:
            raise ValueError(
                f"{self.config.task}: --gen_kwargs would change {bad}, which this QA task sets itself (one "
                "greedy answer plus K samples). Set sampling with --metadata, e.g. "
                f"'{{\"num_samples\": {self.qa.num_samples}, \"temperature\": {self.qa.temperature}, "
                f"\"top_p\": {self.qa.top_p}, \"sample_top_k\": {self.qa.sample_top_k}}}', and drop {bad} from "
                "--gen_kwargs."
            )
        if changed and not self._warned_gen:
            log.warning("%s: --gen_kwargs changed %s; applied to the greedy answer and to the samples",
                        self.config.task, {k: cur.get(k) for k in changed})
            self._warned_gen = True
        base = {k: v for k, v in cur.items() if k not in SAMPLING_KEYS}
        if self.qa.min_new_tokens > 0:
            # transformers' MinNewTokensLengthLogitsProcessor (EOS masked for the first n tokens), polygraph's
            # generation setting; an unknown key to the shared-prefix path, so stock HFLM generates these
            base["min_new_tokens"] = self.qa.min_new_tokens
        greedy = {**base, "do_sample": False}
        if self.qa.stated:
            return greedy, None
        sample = {**base, "do_sample": True, "temperature": self.qa.temperature,
                  "top_p": self.qa.top_p, "top_k": self.qa.sample_top_k}
        return greedy, sample

    def construct_requests(self, doc, ctx, **kwargs):
        task, doc_id, _ = kwargs["metadata"]
        greedy, sample = self._gen_kwargs()
        reqs = [Instance(request_type="generate_until", doc=doc, arguments=(ctx, greedy), idx=0,
                         metadata=(task, doc_id, 1))]
        if sample is not None:
            reqs.append(Instance(request_type="generate_until", doc=doc, arguments=(ctx, sample), idx=1,
                                 metadata=(task, doc_id, self.qa.num_samples)))
        return reqs

    def process_results(self, doc, results):
        """The one confidence record (:func:`semcal_eval.core.records.confidence_record`) under every metric
        name: ``conf`` (cluster share, or the stated confidence), ``correct``, ``em`` and ``conf_entropy``
        (agreement) or ``conf_parsed`` (verbalized, rlcr). The metric table reads each metric's view of it."""
        if "bypass" in metric_names(self):  # --predict_only
            return {"bypass": None}
        rec = results[-1]
        if isinstance(rec, str) and rec.startswith("{"):
            rec = json.loads(rec)
        if not isinstance(rec, dict) or "conf" not in rec:
            raise TypeError(
                f"{self.config.task}: process_results got {type(rec).__name__} results; every filter of a "
                "QA task must be a semcal_eval.qa.task.JudgeFilter (or VerbalizedFilter) step"
            )
        if "estimator" in rec:
            # an estimator row: no metrics without its evidence (warned by the filter); a ranking score gets
            # only the metrics that read the ranking (T.RANK_METRICS), a probability every metric of its fields
            if rec["conf"] is None:
                return {}
            record = confidence_record(rec["conf"], rec["correct"], em=rec["em"])
            keep = [m for m in metric_names(self)
                    if _metric_reads(m, record) and (rec["probability"] or base_metric(m) in RANK_METRICS)]
            return metric_values(keep, record)
        if self.qa.stated:
            record = confidence_record(rec["conf"], rec["correct"], em=rec["em"], conf_parsed=int(rec["conf_parsed"]))
        else:
            record = confidence_record(rec["conf"], rec["correct"], em=rec["em"], conf_entropy=rec["conf_entropy"])
        return metric_values(metric_names(self), record)
