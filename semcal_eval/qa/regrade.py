"""``semcal-eval regrade RUN_DIR``: a plain lm-eval QA run graded again by a judge that agrees with people.

lm-eval's ``nq_open`` and ``triviaqa`` (and most ``generate_until`` QA tasks) grade by exact match, which refuses
most correct answers that are not written exactly like a gold alias ("The capital is Paris."). This verb reads an
lm-eval output folder of a ``--log_samples`` run, and for every ``generate_until`` task in it grades each logged
answer (the filtered response's first line, as the QA tasks read it) against the document's gold answers
(``target``: a list of aliases or one string) with semcal's judges, beside lm-eval's own per-document metrics:

* ``learned`` (default; :mod:`semcal_eval.qa.learned`) and ``cover`` (lexical, no model);
* per task: lm-eval's metric means, each judge's accuracy, the judge card and the accuracy corrected for the judge's
  measured errors (:mod:`semcal_eval.qa.judge_card`);
* per document (``regrade_<task>.jsonl`` beside the results): doc_id, answer, golds, lm-eval's metrics, each
  judge's verdict, the learned judge's P(correct) and version, so the table is recomputable from the records.

Writes ``regrade.md`` and ``regrade.json`` beside the results file and prints the table.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
from pathlib import Path

from semcal_eval.runs import RunError, find_results, iter_samples, read_results

from .answers import clean_answer
from .stock import golds_of

__all__ = ["RegradeError", "regrade_run", "main"]

def _task_metrics(config: dict) -> list[str]:
    """The metrics the task's own config names (its ``metric_list``): lm-eval logs each per document."""
    return [m["metric"] for m in config.get("metric_list") or [] if isinstance(m, dict)
            and isinstance(m.get("metric"), str)]


class RegradeError(ValueError):
    """A run that cannot be regraded (the message names the fix)."""


def _question(doc: dict, field: str | None, task: str) -> str:
    for f in ((field,) if field else ("question", "query", "problem", "input")):
        v = doc.get(f) if isinstance(doc, dict) else None
        if isinstance(v, str) and v.strip():
            return v
    if field:
        raise RegradeError(f"{task}: documents have no text field {field!r}; name the question column with "
                           "--question-field")
    raise RegradeError(f"{task}: documents have no 'question' field; name the question column with --question-field")


def _golds(row: dict, config: dict) -> list[str]:
    """The document's gold aliases: the doc field its ``doc_to_target`` names (a list stays a list), else the
    logged ``target``, which lm-eval writes as text (a list as its Python repr, read back with literal_eval)."""
    field, doc = config.get("doc_to_target"), row.get("doc")
    if isinstance(field, str) and isinstance(doc, dict) and field in doc:
        return golds_of(doc[field])
    target = row.get("target")
    if isinstance(target, str) and target.strip().startswith("["):
        try:
            value = ast.literal_eval(target.strip())
        except (ValueError, SyntaxError):
            value = target
        if isinstance(value, list):
            return golds_of(value)
    return golds_of(target)


def _answer(row: dict) -> str:
    r = row.get("filtered_resps")
    while isinstance(r, list) and r:
        r = r[0]
    return clean_answer(r if isinstance(r, str) else "")


def regrade_run(run: str | Path, question_field: str | None = None, graders=("learned", "cover")) -> dict:
    """Regrade every ``generate_until`` task of one run (module docstring); returns the summary dict."""
    from .grading import golds_for_grading, grade_cover
    from .labels import learned_judge
    from .judge_card import CardError, card_lines, corrected_accuracy

    results_path = find_results(run)
    data = read_results(results_path)
    date_id = results_path.stem[len("results_"):]
    configs = data.get("configs") or {}
    tasks = [t for t, c in configs.items() if isinstance(c, dict) and c.get("output_type") == "generate_until"]
    if not tasks:
        raise RegradeError(f"{results_path.name}: no generate_until task in this run (tasks: "
                           f"{', '.join(configs) or 'none'}); regrade reads QA runs with free-form answers")
    out: dict = {"results": results_path.name, "tasks": {}}
    for task in tasks:
        sp = results_path.with_name(f"samples_{task}_{date_id}.jsonl")
        if not sp.is_file():
            raise RegradeError(f"{sp.name} is missing next to {results_path.name}: regrading reads the logged "
                               "answers, so rerun lm-eval with --log_samples")
        rows = [r for r in iter_samples(sp)]
        lm_metrics = _task_metrics(configs[task])
        docs = []
        for r in rows:
            golds = _golds(r, configs[task])
            if not golds:
                raise RegradeError(f"{sp.name}:{r['_line']}: document {r.get('doc_id')} has no gold answer in its "
                                   "doc_to_target field or 'target'; regrade needs the gold aliases there")
            docs.append({"doc_id": r.get("doc_id"), "question": _question(r.get("doc"), question_field, task),
                         "answer": _answer(r), "golds": golds_for_grading(golds),
                         **{m: r[m] for m in lm_metrics if isinstance(r.get(m), (int, float))}})
        if "learned" in graders:
            lj = learned_judge()
            probs = lj.grade_probs([(d["answer"], d["golds"], d["question"]) for d in docs])
            for d, p in zip(docs, probs):
                d.update(learned=int(p >= 0.5), correct_p=round(float(p), 6), grader=lj.version)
        if "cover" in graders:
            for d in docs:
                d["cover"] = int(grade_cover(d["answer"], d["golds"], d["question"]))
        n = len(docs)
        row = {"n": n}
        for m in lm_metrics:
            vals = [d[m] for d in docs if m in d]
            if vals:
                row[f"lm_eval_{m}"] = sum(vals) / len(vals)
        for g in graders:
            row[g] = sum(d[g] for d in docs) / n if n else math.nan
        cards = {}
        for g in graders:
            name = docs[0]["grader"] if g == "learned" and docs else g
            try:
                cards[g] = {"lines": card_lines(name),
                            "corrected": corrected_accuracy([d["answer"] for d in docs], [d[g] for d in docs], name)}
            except CardError as e:
                cards[g] = {"lines": [str(e)], "corrected": None}
        row["cards"] = cards
        with open(results_path.with_name(f"regrade_{task}.jsonl"), "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        out["tasks"][task] = row
    results_path.with_name("regrade.json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    md = markdown(out)
    results_path.with_name("regrade.md").write_text(md, encoding="utf-8")
    return out


def markdown(out: dict) -> str:
    lines = [f"semcal regrade of `{out['results']}`: each answer graded again by semcal's judges (per-document "
             "records: regrade_<task>.jsonl).", ""]
    for task, row in out["tasks"].items():
        lm = [k for k in row if k.startswith("lm_eval_")]
        graders = [g for g in ("learned", "cover") if g in row]
        lines += [f"### {task} ({row['n']} documents)", "",
                  "| " + " | ".join(k.removeprefix("lm_eval_") + " (lm-eval)" for k in lm) + " | "
                  + " | ".join(f"{g} accuracy" for g in graders) + " | " + " | ".join(
                      f"{g} corrected" for g in graders) + " |",
                  "|" + "---|" * (len(lm) + 2 * len(graders))]
        cells = [f"{row[k]:.3f}" for k in lm] + [f"{row[g]:.3f}" for g in graders]
        for g in graders:
            c = row["cards"][g]["corrected"]
            cells.append("—" if not c or c.get("corrected") is None else
                         f"{c['corrected']:.3f} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]")
        lines += ["| " + " | ".join(cells) + " |", ""]
        for g in graders:
            lines += [f"* {x}" for x in row["cards"][g]["lines"]]
            c = row["cards"][g]["corrected"]
            if c and c.get("corrected") is None:
                lines.append(f"* {g}: no corrected accuracy ({c['why']})")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="semcal-eval regrade", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", metavar="RUN_DIR", help="an lm-eval --output_path folder of a --log_samples run")
    ap.add_argument("--question-field", default=None, help="the documents' question column (default: question)")
    ap.add_argument("--graders", default="learned,cover", help="comma-separated: learned, cover")
    a = ap.parse_args(argv)
    graders = tuple(g.strip() for g in a.graders.split(",") if g.strip())
    bad = [g for g in graders if g not in ("learned", "cover")]
    if bad or not graders:
        ap.exit(2, f"semcal-eval regrade: error: --graders takes learned and/or cover, got {a.graders!r}\n")
    try:
        out = regrade_run(a.run, a.question_field, graders)
    except (RegradeError, RunError, ValueError) as e:
        ap.exit(2, f"semcal-eval regrade: error: {e}\n")
    print(markdown(out))
    return 0
