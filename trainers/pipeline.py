"""After training: evaluate the saved model on the QA tasks with lm-eval, then submit to the leaderboard.

Both steps run the ``semcal-eval`` CLI in a subprocess (``python -m semcal_eval ...``), exactly the command a
user would type, so the checkpoint is evaluated with no conversion: ``--model hf --model_args
pretrained=OUTPUT/final`` (or ``pretrained=BASE,peft=OUTPUT/final_adapter`` with ``lora.merge_on_save: false``).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path


def model_args(cfg: dict, paths: dict) -> str:
    """lm-eval ``--model_args`` for the trained model."""
    dtype = "float32" if cfg["grpo"].get("use_cpu") or not cfg["grpo"].get("bf16") else "bfloat16"
    if paths.get("model_dir"):
        return f"pretrained={paths['model_dir']},dtype={dtype}"
    if paths.get("adapter_dir"):
        return f"pretrained={paths['base_model']},peft={paths['adapter_dir']},dtype={dtype}"
    raise ValueError("training produced neither OUTPUT/final nor OUTPUT/final_adapter; nothing to evaluate")


def eval_command(cfg: dict, paths: dict) -> list[str]:
    e = cfg["evaluate"]
    tasks = e.get("tasks") or []
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    if not tasks:
        raise ValueError("evaluate.enabled is true but evaluate.tasks is empty (e.g. [hotpotqa_semagree, nq_open_semagree])")
    out = Path(cfg["output_dir"]) / "eval"
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf", "--model_args", model_args(cfg, paths),
           "--tasks", ",".join(tasks), "--output_path", str(out), "--log_samples",
           "--batch_size", str(e.get("batch_size") or 8)]
    if e.get("limit"):
        cmd += ["--limit", str(e["limit"])]
    if cfg["grpo"].get("use_cpu"):
        cmd += ["--device", "cpu"]
    if e.get("metadata"):
        cmd += ["--metadata", json.dumps(e["metadata"])]
    cmd += [str(a) for a in (e.get("extra_args") or [])]
    return cmd


def evaluate(cfg: dict, paths: dict) -> Path:
    """Run the QA tasks on the trained model; return lm-eval's ``--output_path``."""
    cmd = eval_command(cfg, paths)
    print("semcal-train: evaluating:", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return Path(cfg["output_dir"]) / "eval"


def board_available() -> bool:
    """True when ``semcal-eval board submit`` exists (the leaderboard package is importable)."""
    return importlib.util.find_spec("leaderboards") is not None and importlib.util.find_spec("leaderboards.cli") is not None


def submit(cfg: dict, eval_dir: Path) -> int | None:
    """``semcal-eval board submit EVAL_DIR --model-name NAME --method METHOD``; None when there is no board."""
    if not board_available():
        print("semcal-train: leaderboard not available (`semcal-eval board submit` is missing); skipping submission")
        return None
    name = cfg["submit"].get("name") or f"{Path(str(cfg['model']).replace('semcal:', '')).name}-{cfg['method']}"
    cmd = [sys.executable, "-m", "semcal_eval", "board", "submit", str(eval_dir), "--model-name", name,
           "--method", cfg["method"]]
    if cfg["submit"].get("db"):
        cmd += ["--db", str(cfg["submit"]["db"])]
    print("semcal-train: submitting:", shlex.join(cmd), flush=True)
    return subprocess.run(cmd).returncode
