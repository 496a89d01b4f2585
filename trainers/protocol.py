"""The CSR paper's protocol as one command: train every method on HotpotQA only, evaluate each checkpoint on
HotpotQA (in distribution) and TriviaQA, NQ-Open and MS MARCO (out of distribution), and tabulate.

    semcal-train protocol [--config trainers/configs/protocol/paper.yaml] [--limit N] [--max-steps S] [--out DIR]
    (also: semcal-eval train protocol ..., python -m trainers.protocol ...)

**Training questions.** The local HotpotQA training file (``r1searcher_stage_2.jsonl``) mixes HotpotQA with
2WikiMultihopQA and has no source field, so it is not used. The protocol trains on a fixed, disjoint part of the
local HotpotQA dev file instead (:func:`training_rows`): raw rows ``TRAIN_START`` = 2,000 to the end (1,700
rows, 1,699 usable questions, of the 3,700-question local file, all of them HotpotQA by provenance). Evaluation reads the dev file's
first ``limit`` usable questions, so ``limit`` may not exceed the 2,000 questions before row 2,000:
the two sets share no question (checked by text at run time and in tests/test_trainer_protocol.py).

**Runs** (``runs`` of the protocol config): each is a method config of ``trainers/configs`` plus overrides,
then the config's ``common`` overrides, then the run's own ``set``; ``train: false`` evaluates the base model
with the method's prompt (the "before" row). Defaults: csr, rlvr, rlcr, rd and the ablations K (``csr_k8``)
and λ schedule (``csr_linear``).

**Evaluation**: each run on its own tasks (:data:`trainers.pipeline.EVAL_MODE`: csr/rlvr ``*_semagree``, rlcr
``*_rlcr``, rd ``*_rd``), one lm-eval process per run over all four sets. MS MARCO's local mirror holds no
question text, so its rows come from ``eval.msmarco_data_dir`` (the test fixture by default) through a data
folder of links the protocol builds. Per set and run: accuracy, ECE (10 equal-width bins), Brier and AUROC
with 95 % bootstrap CIs (:func:`semcal_eval.core.metric_table.compute_all`), the confidence parse rate
(rlcr/rd), and the mean completion tokens of the greedy answer (the model's tokenizer on the text it
generated, the stop string excluded); CSR : RLCR and CSR : RD token ratios. Writes ``OUT/protocol.json``
(every number and, per set, the (confidence, correct, tokens) triples they are computed from) and
``OUT/protocol.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "trainers" / "configs"
TRAIN_START = 2000
EVAL_SETS = ("hotpotqa", "triviaqa", "nq_open", "msmarco")
SUFFIX = {"agreement": "semagree", "rlcr": "rlcr", "rd": "rd"}
FILTER = {"agreement": "judge_f1", "rlcr": "rlcr", "rd": "rd"}
COLUMNS = ("acc", "ece_uw10", "brier_conf", "auroc_conf")
DEFAULT_CONFIG = CONFIGS / "protocol" / "paper.yaml"

__all__ = ["TRAIN_START", "EVAL_SETS", "training_rows", "eval_questions", "load_protocol", "run_config",
           "evaluate_run", "summarise", "format_markdown", "main"]


class ProtocolError(ValueError):
    """A protocol setting that cannot give a valid comparison (the message names the fix)."""


# ------------------------------------------------------------------------------------------------ questions


def _usable(rows, start: int = 0, stop: int | None = None) -> list[tuple[int, str]]:
    from semcal_eval.data.fields import qa_example

    out = []
    for i in range(start, len(rows) if stop is None else min(stop, len(rows))):
        ex = qa_example("hotpotqa", rows[i])
        if ex is not None:
            out.append((i, ex[0]))
    return out


def _norm(q: str) -> str:
    return " ".join(q.lower().split())


def training_rows(data_dir: str | None = None):
    """The protocol's HotpotQA training rows: local dev rows [TRAIN_START, end), in the hub schema."""
    from semcal_eval.data import load

    rows = load("hotpotqa", split="validation", data_dir=data_dir)
    if len(rows) <= TRAIN_START:
        raise ProtocolError(f"the HotpotQA dev split has {len(rows)} rows; the protocol trains on rows "
                            f"{TRAIN_START}.. and needs more (the local mirror holds 3,700)")
    return rows.select(range(TRAIN_START, len(rows)))


def eval_questions(limit: int, data_dir: str | None = None) -> list[str]:
    """The HotpotQA questions the evaluation reads: the first ``limit`` usable dev questions, in order (as the
    QA task does with ``--limit``). Raises :class:`ProtocolError` when they would reach the training rows."""
    from semcal_eval.data import load

    rows = load("hotpotqa", split="validation", data_dir=data_dir)
    before = _usable(rows, 0, TRAIN_START)
    if limit > len(before):
        raise ProtocolError(f"eval.limit={limit} reaches the protocol's HotpotQA training rows (dev rows "
                            f"{TRAIN_START}..): use --limit {len(before)} or less")
    return [q for _, q in before[:limit]]


def check_disjoint(train_questions: list[str], eval_qs: list[str]) -> None:
    shared = {_norm(q) for q in train_questions} & {_norm(q) for q in eval_qs}
    if shared:
        raise ProtocolError(f"{len(shared)} training questions are also evaluation questions, e.g. {sorted(shared)[0]!r}")


# ------------------------------------------------------------------------------------------------ config


def load_protocol(path: str | Path | None = None, limit: int | None = None, max_steps: int | None = None,
                  runs: list[str] | None = None, sets: list[str] | None = None) -> dict:
    """The protocol config (YAML: ``runs``, ``common``, ``train``, ``eval``) with the command line's knobs."""
    p = Path(path) if path else DEFAULT_CONFIG
    if not p.is_file():
        raise FileNotFoundError(f"protocol config {p} not found (example: {DEFAULT_CONFIG.relative_to(ROOT)})")
    proto = yaml.safe_load(p.read_text()) or {}
    unknown = set(proto) - {"runs", "common", "train", "eval"}
    if unknown:
        raise ProtocolError(f"unknown protocol keys {sorted(unknown)}; known: runs, common, train, eval")
    proto.setdefault("common", [])
    proto.setdefault("train", {})
    ev = proto.setdefault("eval", {})
    ev.setdefault("sets", list(EVAL_SETS))
    ev.setdefault("limit", 1000)
    ev.setdefault("num_samples", 10)
    ev.setdefault("batch_size", 8)
    ev.setdefault("msmarco_data_dir", "tests/fixtures")
    if limit is not None:
        ev["limit"] = int(limit)
    if max_steps is not None:
        proto["common"] = list(proto["common"]) + [f"grpo.max_steps={int(max_steps)}"]
    if sets:
        ev["sets"] = list(sets)
    bad = [s for s in ev["sets"] if s not in EVAL_SETS]
    if bad:
        raise ProtocolError(f"eval.sets {bad} unknown; choose from {', '.join(EVAL_SETS)}")
    if not proto.get("runs"):
        raise ProtocolError("the protocol config names no runs (runs: {csr: {config: csr.yaml}, ...})")
    if runs:
        missing = [r for r in runs if r not in proto["runs"]]
        if missing:
            raise ProtocolError(f"--runs {missing} are not in the protocol config's runs {sorted(proto['runs'])}")
        proto["runs"] = {k: v for k, v in proto["runs"].items() if k in runs}
    return proto


def run_config(proto: dict, name: str, out: Path) -> dict:
    """The trainer config of run ``name``: its method config ← ``common`` ← the run's ``set``, output in OUT/name."""
    from trainers.config import load_config, validate

    spec = proto["runs"][name] or {}
    cfg_path = CONFIGS / spec.get("config", f"{name}.yaml")
    overrides = [*proto["common"], *(spec.get("set") or []), f"output_dir={out / name}",
                 "evaluate.enabled=false", "submit.enabled=false"]
    cfg = load_config(cfg_path, overrides)
    validate(cfg)
    return cfg


# ------------------------------------------------------------------------------------------------ evaluation


def _data_dir(proto: dict, out: Path) -> Path:
    """A data folder of links: every set from $SEMCAL_DATA_DIR, MS MARCO from ``eval.msmarco_data_dir``."""
    src = Path(os.environ.get("SEMCAL_DATA_DIR") or ROOT.parent / "shared" / "data")
    d = out / "_data"
    d.mkdir(parents=True, exist_ok=True)
    for s in proto["eval"]["sets"]:
        target = (ROOT / proto["eval"]["msmarco_data_dir"] / s) if s == "msmarco" else src / s
        if not target.exists():
            raise ProtocolError(f"no data for {s}: {target} does not exist (set SEMCAL_DATA_DIR or eval.msmarco_data_dir)")
        link = d / s
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target.resolve())
    return d


def _mode(method: str) -> str:
    from trainers.pipeline import EVAL_MODE

    return EVAL_MODE[method]


def eval_command(cfg: dict, model_dir: str, proto: dict, out_dir: Path) -> list[str]:
    ev = proto["eval"]
    mode = _mode(cfg["method"])
    tasks = [f"{s}_{SUFFIX[mode]}" for s in ev["sets"]]
    meta = {"split": "validation", "num_samples": int(ev["num_samples"]), "estimators": [],
            "estimator_calibration": None}
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf-semsoft",
           "--model_args", f"pretrained={model_dir},dtype=float32", "--tasks", ",".join(tasks),
           "--limit", str(int(ev["limit"])), "--batch_size", str(int(ev["batch_size"])), "--device", "cpu",
           "--output_path", str(out_dir), "--log_samples", "--seed", str(int(cfg["seed"])),
           "--metadata", json.dumps(meta)]
    if mode != "agreement":  # the verbalised methods are read at their training budget
        cmd += ["--gen_kwargs", f"max_gen_toks={int(cfg['grpo']['max_completion_length'])}"]
    return cmd


def _tokens(tok, text: str) -> int:
    return len(tok(text, add_special_tokens=False)["input_ids"])


def read_eval(out_dir: Path, method: str, sets: list[str], tok, limit: int | None = None) -> dict:
    """Per set: metrics with CIs, parse rate and mean tokens, from the run's samples files (``limit``: only the
    first ``limit`` documents, to put a run evaluated on more questions beside the others)."""
    from semcal_eval.core import metric_table as T
    from semcal_eval.runs import find_results, read_samples

    mode = _mode(method)
    res = find_results(out_dir)
    stamp = res.stem[len("results_"):]
    got = {}
    for s in sets:
        task = f"{s}_{SUFFIX[mode]}"
        rows = [r for r in read_samples(res.with_name(f"samples_{task}_{stamp}.jsonl")) if r.get("filter") == FILTER[mode]]
        items, triples = [], []
        for r in sorted(rows, key=lambda r: r["doc_id"])[:limit]:
            item = next(r[m] for m in r["metrics"] if isinstance(r.get(m), dict))
            text = r["resps"][0][0] if r["resps"] and r["resps"][0] else ""
            n = _tokens(tok, text)
            items.append(item)
            triples.append([float(item["conf"]), int(item["correct"]), n])
        m = T.compute_all(items, COLUMNS, ci_names=COLUMNS) if items else {}
        row = {"task": task, "n": len(items), "n_correct": int(sum(t[1] for t in triples)),
               "mean_tokens": (sum(t[2] for t in triples) / len(triples)) if triples else float("nan"),
               "items": triples}
        for c in COLUMNS:
            row[c] = [m.get(c, float("nan")), m.get(f"{c}_ci_lo"), m.get(f"{c}_ci_hi")]
        if mode != "agreement":
            row["parse_rate"] = sum(bool(it.get("conf_parsed")) for it in items) / max(len(items), 1)
        got[s] = row
    return got


def evaluate_run(cfg: dict, model_dir: str, proto: dict, out: Path, name: str, tok) -> dict:
    eval_dir = out / name / "eval"
    cmd = eval_command(cfg, model_dir, proto, eval_dir)
    env = {**os.environ, "SEMCAL_DATA_DIR": str(_data_dir(proto, out)), "PYTHONPATH": str(ROOT)}
    print(f"[protocol] {name}: evaluating on {', '.join(proto['eval']['sets'])}", flush=True)
    (out / name).mkdir(parents=True, exist_ok=True)  # a `train: false` run has no training folder
    with open(out / name / "eval.log", "w") as log:
        subprocess.run(cmd, check=True, env=env, stdout=log, stderr=subprocess.STDOUT)
    return read_eval(eval_dir, cfg["method"], proto["eval"]["sets"], tok)


# ------------------------------------------------------------------------------------------------ tables


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(a) and not math.isnan(b) else float("nan")


def summarise(results: dict) -> dict:
    """CSR : RLCR and CSR : RD mean-token ratios per set and pooled (all sets' completions together)."""
    ratios = {}
    for other in ("rlcr", "rd"):
        if "csr" not in results or other not in results:
            continue
        per = {s: _ratio(results["csr"]["sets"][s]["mean_tokens"], results[other]["sets"][s]["mean_tokens"])
               for s in results["csr"]["sets"] if s in results[other]["sets"]}

        def pooled(run):
            t = [x[2] for s in per for x in results[run]["sets"][s]["items"]]
            return sum(t) / len(t) if t else float("nan")

        per["pooled"] = _ratio(pooled("csr"), pooled(other))
        ratios[f"csr:{other}"] = per
    return ratios


def _cell(v) -> str:
    if v[0] is None or (isinstance(v[0], float) and math.isnan(v[0])):
        return "n/a"
    if v[1] is None or (isinstance(v[1], float) and math.isnan(v[1])):
        return f"{v[0]:.3f}"
    return f"{v[0]:.3f} [{v[1]:.2f}, {v[2]:.2f}]"


def format_markdown(report: dict) -> str:
    ev = report["protocol"]["eval"]
    lines = [f"# CSR protocol: trained on {report['train']['questions']} HotpotQA questions (dev rows "
             f"{TRAIN_START}..), evaluated on the first {ev['limit']} questions of each set (fewer where a set has "
             f"fewer), K = {ev['num_samples']} samples for the agreement confidence; 95 % bootstrap CIs", ""]
    for s in ev["sets"]:
        dist = "in distribution" if s == "hotpotqa" else "out of distribution"
        lines += [f"## {s} ({dist})", "",
                  "| run | method | steps | n | correct | acc | ECE (10 bins) | Brier | AUROC | parse rate | mean tokens |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in report["runs"].items():
            row = r["sets"][s]
            note = " (no correct answer: ECE and Brier only say how low the confidence is)" if row["n_correct"] == 0 else ""
            pr = f"{row['parse_rate']:.2f}" if "parse_rate" in row else "—"
            auroc = "n/a (one class)" if row["n_correct"] in (0, row["n"]) else _cell(row["auroc_conf"])
            lines.append(f"| {name}{note} | {r['method']} | {r['steps']} | {row['n']} | {row['n_correct']} | "
                         f"{_cell(row['acc'])} | {_cell(row['ece_uw10'])} | {_cell(row['brier_conf'])} | {auroc} | "
                         f"{pr} | {row['mean_tokens']:.1f} |")
        lines.append("")
    if report["token_ratios"]:
        lines += ["## Mean completion tokens, CSR : other", "", "| ratio | " + " | ".join(ev["sets"]) + " | pooled |",
                  "|---|" + "---|" * (len(ev["sets"]) + 1)]
        for k, per in report["token_ratios"].items():
            lines.append(f"| {k} | " + " | ".join(f"{per.get(s, float('nan')):.3f}" for s in ev["sets"])
                         + f" | {per['pooled']:.3f} |")
        lines.append("")
    lines.append(f"Wall time {report['seconds'] / 60:.1f} min on {os.cpu_count()} CPU(s). Runs: "
                 + "; ".join(f"{n}: {r['config_summary']}" for n, r in report["runs"].items()))
    return "\n".join(lines) + "\n"


def _summary(cfg: dict, trained: bool) -> str:
    g, r = cfg["grpo"], cfg["reward"]
    s = f"{cfg['method']}, K={g['num_generations']}, {g['max_steps']} steps" if trained else f"{cfg['method']}, base model"
    if cfg["method"] == "csr":
        s += f", score {r['score']}, λ {r['lambda_schedule']} to {r['lambda_max']}"
    if trained and (cfg.get("warmup_sft") or {}).get("enabled"):
        s += f", warm-up {cfg['warmup_sft']['steps']} steps"
    return s


# ------------------------------------------------------------------------------------------------ command


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcal-train protocol", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", "-c", default=None, help=f"protocol YAML (default {DEFAULT_CONFIG.relative_to(ROOT)})")
    p.add_argument("--limit", type=int, help="evaluation questions per set (the paper: 1000)")
    p.add_argument("--max-steps", type=int, help="GRPO steps of every run (overrides common)")
    p.add_argument("--train-limit", type=int, help="training questions (default: all 1,700)")
    p.add_argument("--runs", help="comma-separated subset of the config's runs")
    p.add_argument("--sets", help="comma-separated subset of hotpotqa,triviaqa,nq_open,msmarco")
    p.add_argument("--out", default="runs/protocol", help="output folder (protocol.json, protocol.md, one folder per run)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="trainer override for every run (after common)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    t0 = time.time()
    try:
        proto = load_protocol(a.config, a.limit, a.max_steps,
                              [x for x in (a.runs or "").split(",") if x] or None,
                              [x for x in (a.sets or "").split(",") if x] or None)
        proto["common"] = list(proto["common"]) + list(a.overrides)
        train_limit = a.train_limit if a.train_limit is not None else proto["train"].get("limit")
        if train_limit is not None:
            proto["common"].append(f"data.limit={int(train_limit)}")
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        cfgs = {n: run_config(proto, n, out) for n in proto["runs"]}
        eval_qs = eval_questions(int(proto["eval"]["limit"])) if "hotpotqa" in proto["eval"]["sets"] else []
        rows = training_rows()
    except (ProtocolError, ValueError, FileNotFoundError, KeyError) as e:
        print(f"semcal-train protocol: error: {e}", file=sys.stderr)
        return 2

    from transformers import AutoTokenizer

    from trainers.data import build_dataset
    from trainers.train import resolve_model, train

    report = {"protocol": proto, "runs": {}, "train": {}}
    tok = None
    for name, cfg in cfgs.items():
        spec = proto["runs"][name] or {}
        trained = spec.get("train", True)
        ds = build_dataset(cfg, rows=rows)
        check_disjoint(list(ds["question"]), eval_qs)  # before any model is trained
        report["train"]["questions"] = len(ds)
        tok = tok or AutoTokenizer.from_pretrained(resolve_model(cfg["model"]))
        t = time.time()
        if trained:
            print(f"[protocol] {name}: training ({_summary(cfg, True)}) on {len(ds)} HotpotQA questions", flush=True)
            res = train(cfg, train_dataset=ds)
            model_dir = res.get("model_dir")
            if not model_dir:
                raise ProtocolError(f"run {name} saved no merged model (set lora.merge_on_save: true)")
        else:
            model_dir = resolve_model(cfg["model"])
        train_s = time.time() - t
        sets = evaluate_run(cfg, model_dir, proto, out, name, tok)
        report["runs"][name] = {"method": cfg["method"], "steps": cfg["grpo"]["max_steps"] if trained else 0,
                                "trained": trained, "model_dir": str(model_dir), "train_s": train_s,
                                "eval_s": time.time() - t - train_s, "config_summary": _summary(cfg, trained),
                                "sets": sets}
        report["token_ratios"] = summarise(report["runs"])
        report["seconds"] = time.time() - t0
        (out / "protocol.json").write_text(json.dumps(report, indent=1, default=str))
        (out / "protocol.md").write_text(format_markdown(report))
        print(f"[protocol] {name}: done in {time.time() - t:.0f} s", flush=True)
    print((out / "protocol.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
