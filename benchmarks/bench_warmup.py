"""Parse rate of RLCR and RD on SmolLM2-135M: base model, after ``warmup_sft``, after a few GRPO steps; and the mean
completion tokens of all four methods' prompts (issue 22, item 5).

Held-out prompts: the first ``--eval N`` HotpotQA validation questions (never used for warm-up or GRPO, which
draw from the train split). Greedy decoding with each method's training prompt and stop (RLCR: EOS or the token
budget; RD, CSR, RLVR: the newline). CPU, fp32, LoRA for the GRPO steps.

    python benchmarks/bench_warmup.py [--eval 32] [--train 64] [--warmup-steps 30] [--grpo-steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _greedy(model, tok, prompts, max_new_tokens, stop_newline, batch=16):
    import torch

    from trainers.train import newline_token_ids

    tok.padding_side = "left"
    eos = [tok.eos_token_id] + (newline_token_ids(tok) if stop_newline else [])
    texts, ntoks = [], []
    model.eval()
    for s in range(0, len(prompts), batch):
        enc = tok(prompts[s : s + batch], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos,
                                 pad_token_id=tok.pad_token_id)
        for row in out[:, enc["input_ids"].shape[1]:]:
            ids = row.tolist()
            n = next((i + 1 for i, t in enumerate(ids) if t in eos), len(ids))
            ntoks.append(n)
            texts.append(tok.decode(ids[:n], skip_special_tokens=True))
    return texts, ntoks


def _rates(method, texts):
    from semcal_eval.qa.verbalized import parse_rd, parse_rlcr

    parse = parse_rlcr if method == "rlcr" else parse_rd
    p = [parse(t) for t in texts]
    return {"parsed": sum(x[2] is not None for x in p) / len(p), "format_ok": sum(bool(x[0]) for x in p) / len(p)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval", type=int, default=32)
    ap.add_argument("--train", type=int, default=64)
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--grpo-steps", type=int, default=4)
    ap.add_argument("--rlcr-tokens", type=int, default=128, help="RLCR generation budget here (rlcr.yaml: 256)")
    ap.add_argument("--out", default="runs/bench_warmup")
    ap.add_argument("--methods", default="rd,rlcr", help="which of rd, rlcr to measure (comma-separated)")
    ap.add_argument("--warmup-batch", type=int, default=8)
    args = ap.parse_args(argv)
    import torch

    torch.manual_seed(0)
    from semcal_eval.data import load
    from semcal_eval.data.fields import qa_example
    from trainers.config import load_config
    from trainers.data import make_prompt
    from trainers.train import build_trainer, load_model

    rows = load("hotpotqa", split="validation")
    qs = [e[0] for e in (qa_example("hotpotqa", r) for r in rows.select(range(args.eval * 2))) if e][: args.eval]
    t0 = time.perf_counter()
    report = {"eval_questions": len(qs), "train_questions": args.train, "warmup_steps": args.warmup_steps,
              "grpo_steps": args.grpo_steps, "rlcr_budget": args.rlcr_tokens}
    base_cfg = load_config(Path(__file__).resolve().parents[1] / "trainers/configs/csr.yaml",
                           ["grpo.use_cpu=true", "grpo.bf16=false"])
    model, tok, _ = load_model(base_cfg)
    for method in ("csr", "rlvr"):  # same prompt and stop: the base model's short answers
        _, n = _greedy(model, tok, [make_prompt(q, method) for q in qs], 32, True)
        report[f"{method}_tokens_base"] = sum(n) / len(n)
        print("PHASE", method, "tokens", report[f"{method}_tokens_base"], flush=True)
    del model
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        budget = args.rlcr_tokens if method == "rlcr" else 32
        cfg = load_config(Path(__file__).resolve().parents[1] / f"trainers/configs/{method}.yaml", [
            f"output_dir={args.out}/{method}", "grpo.use_cpu=true", "grpo.bf16=false", "lora.enabled=true",
            "lora.r=8", "lora.alpha=16", "grpo.num_generations=4", "grpo.per_device_train_batch_size=4",
            "grpo.gradient_accumulation_steps=1", f"grpo.max_steps={args.grpo_steps}", "grpo.save_steps=100000",
            f"grpo.max_completion_length={budget}", "grpo.learning_rate=1e-5", f"data.limit={args.train}",
            f"warmup_sft.limit={args.train}", f"warmup_sft.steps={args.warmup_steps}",
            f"warmup_sft.batch_size={args.warmup_batch}", "evaluate.enabled=false",
            "submit.enabled=false"])
        prompts = [make_prompt(q, method) for q in qs]
        stop_nl = method != "rlcr"
        m0, tok, _ = load_model(cfg)
        texts, n = _greedy(m0, tok, prompts, budget, stop_nl)
        report[f"{method}_base"] = {**_rates(method, texts), "tokens": sum(n) / len(n), "example": texts[0][:160]}
        print("PHASE", method, "base", json.dumps(report[f"{method}_base"]), flush=True)
        del m0
        trainer = build_trainer(cfg)  # runs warmup_sft first (rlcr.yaml / rd.yaml enable it)
        info = getattr(trainer.model, "_semcal_warmup", None) or getattr(
            getattr(trainer.model, "base_model", None), "_semcal_warmup", None)
        texts, n = _greedy(trainer.model, tok, prompts, budget, stop_nl)
        report[f"{method}_warmup"] = {**_rates(method, texts), "tokens": sum(n) / len(n), "example": texts[0][:160]}
        print("PHASE", method, "warmup", json.dumps(report[f"{method}_warmup"]), flush=True)
        if info:
            report[f"{method}_warmup"]["sft_loss_first_last"] = [info["loss"][0], info["loss"][-1]] if info["loss"] else None
            report[f"{method}_warmup"]["target_examples"] = info["targets"][:2]
        trainer.train()
        texts, n = _greedy(trainer.model, tok, prompts, budget, stop_nl)
        report[f"{method}_grpo"] = {**_rates(method, texts), "tokens": sum(n) / len(n), "example": texts[0][:160]}
        print("PHASE", method, "grpo", json.dumps(report[f"{method}_grpo"]), flush=True)
        from trainers.train import read_metrics

        fmt_key = "rewards/rlcr_format_reward/mean" if method == "rlcr" else "rd/format_frac"
        report[f"{method}_grpo"]["train_format_reward"] = [r.get(fmt_key) for r in read_metrics(cfg.output_dir)
                                                            if fmt_key in r]
        del trainer
        print(json.dumps({k: v for k, v in report.items() if k.startswith(method)}, indent=1), flush=True)
    report["seconds"] = time.perf_counter() - t0
    report["cpus"] = os.cpu_count()
    print(json.dumps(report, indent=1))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "report.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
