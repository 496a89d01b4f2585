"""Build and run TRL's GRPOTrainer for ``csr``, ``rlvr`` or ``rlcr`` from a config dict (see trainers.config).

Outputs in ``output_dir``:

- ``checkpoint-N/``: TRL/transformers checkpoints (model or LoRA adapter, optimizer, scheduler, RNG, trainer
  state) plus ``semcal_train.yaml``; ``resume_from_checkpoint`` continues from one.
- ``final/``: the trained model as a plain HF folder (LoRA merged in), ``use_cache=True``: loads with
  ``lm_eval --model hf --model_args pretrained=OUTPUT/final``.
- ``final_adapter/`` (LoRA only): the adapter, for ``pretrained=BASE,peft=OUTPUT/final_adapter``.
- ``metrics.jsonl``: every log record of the run (rewards per function, λ, r_cal, loss, …), one per line.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import yaml

from trainers import rewards as R
from trainers.config import check_group_layout, validate
from trainers.data import build_dataset


def resolve_model(name: str) -> str:
    """``semcal:NAME`` → cached local folder (semcal_eval.models); anything else is returned unchanged."""
    if str(name).startswith("semcal:"):
        from semcal_eval.models import resolve_pretrained

        return resolve_pretrained(name)
    return str(name)


def build_reward_funcs(cfg: dict) -> tuple[list, list[float]]:
    """Reward functions and weights of a method. Each component is its own function so that TRL logs
    ``rewards/<function>/mean`` and ``/std`` for it at every logging step."""
    r = cfg["reward"]
    judge = dict(judge=r["judge"], judge_kwargs=r.get("judge_kwargs") or {})
    method = cfg["method"]
    if method == "rlvr":
        return [functools.partial(R.correctness_reward, **judge)], [1.0]
    if method == "csr":
        cal = functools.partial(
            R.calibration_reward,
            num_generations=cfg["grpo"]["num_generations"],
            eps=r["eps"],
            reading=r["reading"],
            lambda_schedule=r["lambda_schedule"],
            lambda_max=r["lambda_max"],
            lambda_min=r["lambda_min"],
            lambda_step_fraction=r["lambda_step_fraction"],
            gather_groups=bool(r["gather_groups"]),
            **judge,
        )
        # r = r_RLVR + λ(t)·r_cal: λ(t) is applied inside calibration_reward (it changes with the step).
        return [functools.partial(R.correctness_reward, **judge), cal], [1.0, 1.0]
    if method == "rlcr":
        return (
            [
                R.rlcr_format_reward,
                functools.partial(R.rlcr_correctness_reward, **judge),
                functools.partial(R.rlcr_brier_reward, **judge),
            ],
            [0.5, 0.5, 0.5],
        )
    raise ValueError(f"unknown method {method!r}")


def build_grpo_config(cfg: dict):
    from trl import GRPOConfig

    g = dict(cfg["grpo"])
    g.setdefault("seed", cfg["seed"])
    g["output_dir"] = cfg["output_dir"]
    report_to = g.get("report_to") or []
    report_to = [report_to] if isinstance(report_to, str) else list(report_to)
    for backend, module in (("tensorboard", "tensorboard"), ("wandb", "wandb")):
        if backend in report_to and importlib.util.find_spec(module) is None:
            raise ValueError(
                f"grpo.report_to includes {backend!r} but the {module} package is not installed: "
                f"`pip install {module}`, or drop it with --set grpo.report_to=[] (metrics.jsonl is always written)"
            )
    g["report_to"] = report_to or "none"
    _, weights = build_reward_funcs(cfg)
    g.setdefault("reward_weights", weights)
    args = GRPOConfig(**g)
    check_group_layout(args, bool(cfg["reward"]["gather_groups"]), cfg["method"])
    return args


def _dtype(cfg: dict):
    import torch

    g = cfg["grpo"]
    if g.get("use_cpu") or not (g.get("bf16") or g.get("fp16")):
        return torch.float32  # CPU: bf16 matmuls are ~270x slower than fp32
    return torch.bfloat16 if g.get("bf16") else torch.float16


def load_model(cfg: dict):
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    path = resolve_model(cfg["model"])
    set_seed(int(cfg["seed"]))
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=_dtype(cfg))
    # Checkpoints must generate with a KV cache once loaded in lm-eval; training does not checkpoint activations.
    model.config.use_cache = True
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.use_cache = True
    return model, tok, path


def lora_config(cfg: dict):
    lc = cfg["lora"]
    if not lc.get("enabled"):
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=int(lc["r"]),
        lora_alpha=int(lc["alpha"]),
        lora_dropout=float(lc["dropout"]),
        target_modules=list(lc["target_modules"]),
        task_type="CAUSAL_LM",
    )


def newline_token_ids(tok) -> list[int]:
    """Ids of every vocabulary token whose text contains a newline."""
    return [i for i in range(len(tok)) if "\n" in tok.decode([i])]


def _callbacks(cfg: dict, restore_generation: dict | None):
    from transformers import TrainerCallback

    out_dir = Path(cfg["output_dir"])

    class SemcalCallback(TrainerCallback):
        """Writes every log record to metrics.jsonl; into every checkpoint the resolved config, and the model's
        own generation settings (training stops sampling at a newline; a saved model must not)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                with open(out_dir / "metrics.jsonl", "a") as f:
                    f.write(json.dumps({"step": state.global_step, **logs}) + "\n")

        def on_save(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            ckpt = out_dir / f"checkpoint-{state.global_step}"
            if not ckpt.is_dir():
                return
            (ckpt / "semcal_train.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
            gen = ckpt / "generation_config.json"
            if restore_generation is not None and gen.is_file():
                data = json.loads(gen.read_text())
                data.update(restore_generation)
                gen.write_text(json.dumps(data, indent=2) + "\n")

    return [SemcalCallback()]


def _resume_arg(cfg: dict) -> Any:
    rc = cfg.get("resume_from_checkpoint")
    if rc in (None, False, "", "none"):
        return None
    if rc in (True, "auto", "last", "true"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(cfg["output_dir"]) if Path(cfg["output_dir"]).is_dir() else None
        if last is None and rc is not True:
            return None  # "auto": nothing to resume, start fresh
        if last is None:
            raise ValueError(f"resume_from_checkpoint=true but {cfg['output_dir']} holds no checkpoint-N folder")
        return last
    if not Path(rc).is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint: {rc} is not a checkpoint folder")
    return str(rc)


def build_trainer(cfg: dict, train_dataset=None, reward_funcs: list | None = None):
    """A ready GRPOTrainer for ``cfg``. ``train_dataset`` overrides ``cfg["data"]``; ``reward_funcs`` overrides
    the method's reward functions (same order and weights; the benchmark wraps them with timers)."""
    from trl import GRPOTrainer

    validate(cfg)
    out_dir = Path(cfg["output_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    args = build_grpo_config(cfg)
    (out_dir / "semcal_train.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    dataset = train_dataset if train_dataset is not None else build_dataset(cfg)
    model, tok, base_path = load_model(cfg)
    restore = None
    if cfg["data"].get("stop_at_newline", True) and cfg["method"] != "rlcr":
        # TRL treats every id in model.generation_config.eos_token_id as an end of sequence (stops and masks
        # after it), so the newline ends a rollout exactly where the QA tasks' `until: ["\n"]` ends an answer.
        eos = model.generation_config.eos_token_id
        restore = {"eos_token_id": eos}
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        model.generation_config.eos_token_id = eos + [i for i in newline_token_ids(tok) if i not in eos]
    funcs = reward_funcs if reward_funcs is not None else build_reward_funcs(cfg)[0]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=lora_config(cfg),
        callbacks=_callbacks(cfg, restore),
    )
    trainer._semcal = {"base_path": base_path, "tokenizer": tok, "restore_generation": restore}
    return trainer


def train(cfg: dict, train_dataset=None, trainer=None) -> dict:
    """Train one method; return paths and the train metrics. Resumes per ``cfg["resume_from_checkpoint"]``."""
    trainer = trainer or build_trainer(cfg, train_dataset)
    resume = _resume_arg(cfg)
    result = trainer.train(resume_from_checkpoint=resume)
    info = trainer._semcal
    paths = save_final(trainer, cfg, info["tokenizer"], info["restore_generation"])
    return {"output_dir": str(cfg["output_dir"]), "base_model": info["base_path"], **paths,
            "train_metrics": result.metrics, "resumed_from": resume}


def save_final(trainer, cfg: dict, tok, restore_generation: dict | None = None) -> dict:
    """Write ``final/`` (full weights, LoRA merged) and, for LoRA, ``final_adapter/``; both with use_cache=True."""
    out_dir = Path(cfg["output_dir"])
    if not trainer.is_world_process_zero():
        trainer.accelerator.wait_for_everyone()
        return {}
    model = trainer.accelerator.unwrap_model(trainer.model)
    for k, v in (restore_generation or {}).items():
        setattr(model.generation_config, k, v)
    paths: dict[str, str] = {}
    from accelerate.utils import is_peft_model

    if is_peft_model(model):
        adapter = out_dir / "final_adapter"
        model.save_pretrained(adapter)
        tok.save_pretrained(adapter)
        paths["adapter_dir"] = str(adapter)
        # The adapter records the base it was trained on, so `peft=DIR` also works without pretrained=.
        model = model.merge_and_unload() if cfg["lora"].get("merge_on_save", True) else None
    if model is not None:
        final = out_dir / "final"
        model.config.use_cache = True
        model.save_pretrained(final)
        tok.save_pretrained(final)
        paths["model_dir"] = str(final)
    trainer.accelerator.wait_for_everyone()
    return paths


def read_metrics(output_dir: str | os.PathLike) -> list[dict]:
    """The log records a run wrote to ``metrics.jsonl``."""
    p = Path(output_dir) / "metrics.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.is_file() else []
