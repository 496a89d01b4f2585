"""After training: evaluate the saved model on the QA tasks with lm-eval, then submit to the leaderboard.

Both steps run the ``semcal-eval`` CLI in a subprocess (``python -m semcal_eval ...``), exactly the command a
user would type, so the checkpoint is evaluated with no conversion: ``--model hf --model_args
pretrained=OUTPUT/final`` (or ``pretrained=BASE,peft=OUTPUT/final_adapter`` with ``lora.merge_on_save: false``).

Each method is evaluated on the tasks that match its training (``evaluate.tasks`` of its config): csr and rlvr on
the agreement tasks (``*_semagree``: answer line, stop at a newline), rlcr on the ``*_rlcr`` tasks (RLCR's prompt
and tags, stop at EOS only, the training token budget: :func:`eval_gen_kwargs`).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

from trainers.config import TrainConfig


def model_args(cfg: TrainConfig, paths: dict) -> str:
    """lm-eval ``--model_args`` for the trained model."""
    dtype = "float32" if cfg.grpo.get("use_cpu") or not cfg.grpo.get("bf16") else "bfloat16"
    if paths.get("model_dir"):
        return f"pretrained={paths['model_dir']},dtype={dtype}"
    if paths.get("adapter_dir"):
        return f"pretrained={paths['base_model']},peft={paths['adapter_dir']},dtype={dtype}"
    raise ValueError("training produced neither OUTPUT/final nor OUTPUT/final_adapter; nothing to evaluate")


#: The QA tasks' mode (their YAML's ``metadata.mode``) that scores each training method as it was trained.
EVAL_MODE = {"csr": "agreement", "csr_likelihood": "agreement", "csr_spread": "agreement", "rlvr": "agreement",
             "rlcr": "rlcr", "rd": "rd"}


def _task_list(cfg: TrainConfig) -> list[str]:
    return [str(t) for t in cfg.evaluate.tasks]


def qa_tasks() -> dict[str, tuple[str, str]]:
    """``{task: (mode, qa_dataset)}`` of every semcal QA task, read from the task YAMLs (mode ``agreement``
    when the YAML names none)."""
    from semcal_eval import TASKS_DIR
    from semcal_eval.harness.task_yaml import iter_task_configs

    return {c["task"]: ((c.get("metadata") or {}).get("mode") or "agreement",
                        (c.get("dataset_kwargs") or {}).get("qa_dataset"))
            for _, c in iter_task_configs(TASKS_DIR) if "QATask" in str(c.get("class", ""))}


def check_eval_tasks(cfg: TrainConfig) -> None:
    """Raise ``ValueError`` if ``evaluate.tasks`` names a semcal QA task of another mode than the method's
    (:data:`EVAL_MODE`): an RLCR model on the agreement tasks is scored on its ``<think>`` line and its
    confidence is never read; a csr/rlvr model on the ``*_rlcr`` tasks has no tags to read. Names that are not
    semcal QA tasks (tags, other tasks) are not checked. The message names the matching task of each dataset.
    """
    want = EVAL_MODE[cfg.method]
    tasks = qa_tasks()
    bad = [t for t in _task_list(cfg) if t in tasks and tasks[t][0] != want]
    if bad:
        fix = []
        for t in bad:
            same = sorted((n for n, (m, ds) in tasks.items() if m == want and ds == tasks[t][1]), key=len)
            fix += same[:1]
        raise ValueError(
            f"evaluate.tasks {bad} are {sorted({tasks[t][0] for t in bad})} tasks, but a {cfg.method} model is "
            f"evaluated on the {want!r} tasks, which match its training: --set 'evaluate.tasks=[{', '.join(fix)}]' "
            "(or --no-evaluate and run semcal-eval yourself)"
        )


def eval_gen_kwargs(cfg: TrainConfig) -> str | None:
    """lm-eval ``--gen_kwargs`` that give the evaluation the run's own generation budget, or None.

    rlcr: ``max_gen_toks=<grpo.max_completion_length>``, so an RLCR completion is evaluated with the room it was
    trained with even when the run overrides the budget (the ``*_rlcr`` tasks default to rlcr.yaml's 256; the
    QA tasks apply ``max_gen_toks`` to every request and log when it differs from their YAML). csr/rlvr: None
    (their answers end at the first newline, well inside the tasks' 32 tokens).
    """
    if cfg.method != "rlcr":
        return None
    n = cfg.grpo.get("max_completion_length")
    return f"max_gen_toks={int(n)}" if n else None


def eval_command(cfg: TrainConfig, paths: dict) -> list[str]:
    """The ``semcal-eval`` command that evaluates the trained model on ``evaluate.tasks``."""
    e = cfg.evaluate
    tasks = _task_list(cfg)
    if not tasks:
        raise ValueError("evaluate.enabled is true but evaluate.tasks is empty (e.g. [hotpotqa_semagree, nq_open_semagree])")
    out = Path(cfg.output_dir) / "eval"
    cmd = [sys.executable, "-m", "semcal_eval", "--model", "hf", "--model_args", model_args(cfg, paths),
           "--tasks", ",".join(tasks), "--output_path", str(out), "--log_samples",
           "--batch_size", str(e.batch_size)]
    if e.limit:
        cmd += ["--limit", str(e.limit)]
    if cfg.grpo.get("use_cpu"):
        cmd += ["--device", "cpu"]
    if e.metadata:
        cmd += ["--metadata", json.dumps(dict(e.metadata))]
    extra = [str(a) for a in e.extra_args]
    gen = eval_gen_kwargs(cfg)
    if gen and not any(a == "--gen_kwargs" or a.startswith("--gen_kwargs=") for a in extra):
        cmd += ["--gen_kwargs", gen]  # evaluate.extra_args may set its own
    cmd += extra
    return cmd


def evaluate(cfg: TrainConfig, paths: dict) -> Path:
    """Run the QA tasks on the trained model; return lm-eval's ``--output_path``."""
    cmd = eval_command(cfg, paths)
    print("semcal-train: evaluating:", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return Path(cfg.output_dir) / "eval"


def board_available() -> bool:
    """True when ``semcal-eval board submit`` exists (the leaderboard package is importable)."""
    return importlib.util.find_spec("leaderboards") is not None and importlib.util.find_spec("leaderboards.cli") is not None


def submit(cfg: TrainConfig, eval_dir: Path) -> int | None:
    """``semcal-eval board submit EVAL_DIR --model-name NAME --method METHOD``; None when there is no board."""
    if not board_available():
        print("semcal-train: leaderboard not available (`semcal-eval board submit` is missing); skipping submission")
        return None
    name = cfg.submit.name or f"{Path(cfg.model.replace('semcal:', '')).name}-{cfg.method}"
    cmd = [sys.executable, "-m", "semcal_eval", "board", "submit", str(eval_dir), "--model-name", name,
           "--method", cfg.method]
    if cfg.submit.db:
        cmd += ["--db", str(cfg.submit.db)]
    print("semcal-train: submitting:", shlex.join(cmd), flush=True)
    return subprocess.run(cmd).returncode
