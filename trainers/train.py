"""Build and run TRL's GRPOTrainer for ``csr``, ``rlvr`` or ``rlcr`` from a :class:`trainers.config.TrainConfig`.

Outputs in ``output_dir``:

- ``checkpoint-N/``: TRL/transformers checkpoints (model or LoRA adapter, optimizer, scheduler, RNG, trainer
  state) plus ``semcal_train.yaml``; ``resume_from_checkpoint`` continues from one.
- ``final/``: the trained model as a plain HF folder (LoRA merged in), ``use_cache=True``: loads with
  ``lm_eval --model hf --model_args pretrained=OUTPUT/final``. Written through the trainer's own save path
  (``Trainer.save_model``), which gathers DeepSpeed ZeRO-3's sharded weights.
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
from trainers.config import TrainConfig, check_data_source, check_group_layout, check_warmup
from trainers.data import build_dataset


def resolve_model(name: str) -> str:
    """``semcal:NAME`` → cached local folder (semcal_eval.models); anything else is returned unchanged."""
    if str(name).startswith("semcal:"):
        from semcal_eval.models import resolve_pretrained

        return resolve_pretrained(name)
    return str(name)


def build_reward_funcs(cfg: TrainConfig) -> tuple[list, list[float]]:
    """Reward functions and weights of a method. Each component is its own function so that TRL logs
    ``rewards/<function>/mean`` and ``/std`` for it at every logging step."""
    method = cfg.method
    if method == "rlvr":
        return [R.correctness_reward], [1.0]
    if method in R.CSR_METHODS:
        # the reward's options were checked when the config was built; the reward reads them as they are
        cal = functools.partial(R.calibration_reward, settings=cfg.reward, num_generations=cfg.grpo["num_generations"])
        # r = r_RLVR + λ(t)·r_cal: λ(t) is applied inside calibration_reward (it changes with the step).
        return [R.correctness_reward, cal], [1.0, 1.0]
    if method == "rlcr":
        return [R.rlcr_format_reward, R.rlcr_correctness_reward, R.rlcr_brier_reward], [0.5, 0.5, 0.5]
    if method == "rd":  # Rewarding Doubt: one reward, the normalised log score of the stated confidence bin
        return [R.rd_reward], [1.0]
    raise ValueError(f"unknown method {method!r}")


def build_grpo_config(cfg: TrainConfig):
    from trl import GRPOConfig

    g = dict(cfg.grpo)
    g.setdefault("seed", cfg.seed)
    g["output_dir"] = cfg.output_dir
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
    check_group_layout(args, cfg.reward.gather_groups, cfg.method)
    return args


def _dtype(cfg: TrainConfig):
    import torch

    g = cfg.grpo
    if g.get("use_cpu") or not (g.get("bf16") or g.get("fp16")):
        return torch.float32  # CPU: bf16 matmuls are ~270x slower than fp32
    return torch.bfloat16 if g.get("bf16") else torch.float16


def load_model(cfg: TrainConfig):
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    path = resolve_model(cfg.model)
    set_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=_dtype(cfg))
    # Checkpoints must generate with a KV cache once loaded in lm-eval; training does not checkpoint activations.
    model.config.use_cache = True
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.use_cache = True
    return model, tok, path


def lora_config(cfg: TrainConfig):
    lc = cfg.lora
    if not lc.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lc.r,
        lora_alpha=lc.alpha,
        lora_dropout=lc.dropout,
        target_modules=list(lc.target_modules),
        task_type="CAUSAL_LM",
    )


def newline_token_ids(tok) -> list[int]:
    """Ids of every vocabulary token whose text contains a newline."""
    return [i for i in range(len(tok)) if "\n" in tok.decode([i])]


def rollout_stop_ids(cfg: TrainConfig, tok) -> list[int]:
    """Token ids that end a rollout besides the model's own EOS: with ``data.stop_at_newline`` (csr, rlvr)
    every token that contains a newline, so that a rollout ends where the QA tasks' ``until: ["\\n"]`` ends an
    answer; none for rlcr (its four blocks span lines; it ends at EOS or ``max_completion_length``, as the
    ``*_rlcr`` tasks do)."""
    if cfg.method == "rlcr" or not cfg.data.stop_at_newline:
        return []
    return newline_token_ids(tok)


def apply_rollout_stops(cfg: TrainConfig, args, model, tok) -> dict | None:
    """Make both of TRL's generation paths stop at :func:`rollout_stop_ids`; return the model's own
    generation settings to restore in saved models (None when nothing changed).

    * transformers path: the ids join ``model.generation_config.eos_token_id``. TRL generates with them as EOS
      and masks every token after the first one, so nothing after the answer line is trained.
    * vLLM path (``grpo.use_vllm``): TRL reads neither the model's EOS ids nor masks after them, so the same ids
      go to vLLM as ``generation_kwargs["stop_token_ids"]`` (``SamplingParams`` in colocate mode, the request
      body in server mode), merged with any the config sets. vLLM still stops at the model's EOS by itself.
    """
    ids = rollout_stop_ids(cfg, tok)
    if not ids:
        return None
    eos = model.generation_config.eos_token_id
    restore = {"eos_token_id": eos}
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    model.generation_config.eos_token_id = eos + [i for i in ids if i not in eos]
    if getattr(args, "use_vllm", False):
        gk = dict(args.generation_kwargs or {})
        have = list(gk.get("stop_token_ids") or [])
        gk["stop_token_ids"] = have + [i for i in ids if i not in have]
        args.generation_kwargs = gk
    return restore


def _callbacks(cfg: TrainConfig, restore_generation: dict | None):
    from transformers import TrainerCallback

    out_dir = Path(cfg.output_dir)

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
            (ckpt / "semcal_train.yaml").write_text(yaml.safe_dump(cfg.as_dict(), sort_keys=False))
            gen = ckpt / "generation_config.json"
            if restore_generation is not None and gen.is_file():
                data = json.loads(gen.read_text())
                data.update(restore_generation)
                gen.write_text(json.dumps(data, indent=2) + "\n")

    return [SemcalCallback()]


def _resume_arg(cfg: TrainConfig) -> Any:
    rc = cfg.resume_from_checkpoint
    if rc in (None, False, "", "none"):
        return None
    if rc in (True, "auto", "last", "true"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(cfg.output_dir) if Path(cfg.output_dir).is_dir() else None
        if last is None and rc is not True:
            return None  # "auto": nothing to resume, start fresh
        if last is None:
            raise ValueError(f"resume_from_checkpoint=true but {cfg.output_dir} holds no checkpoint-N folder")
        return last
    if not Path(rc).is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint: {rc} is not a checkpoint folder")
    return str(rc)


def build_trainer(cfg: TrainConfig, train_dataset=None, reward_funcs: list | None = None):
    """A ready GRPOTrainer for ``cfg`` (checked when it was built). ``train_dataset`` overrides ``cfg.data``;
    ``reward_funcs`` overrides the method's reward functions (same order and weights; the benchmark wraps them
    with timers)."""
    from trl import GRPOTrainer

    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"build_trainer takes a TrainConfig (trainers.config.load_config), got {type(cfg).__name__}")
    check_warmup(cfg)
    if train_dataset is None:
        check_data_source(cfg)  # before any model is loaded
    out_dir = Path(cfg.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = build_grpo_config(cfg)
    (out_dir / "semcal_train.yaml").write_text(yaml.safe_dump(cfg.as_dict(), sort_keys=False))
    dataset = train_dataset if train_dataset is not None else build_dataset(cfg)
    model, tok, base_path = load_model(cfg)
    if cfg.warmup_sft.enabled:
        from trainers.warmup import run_warmup

        model = run_warmup(cfg, model, tok, dataset)  # rlcr/rd: learn the format before GRPO
        tok.padding_side = "left"
        if lora_config(cfg) is not None:
            # The warm-up changed the full weights; a LoRA adapter names its base model (peft reads
            # model.name_or_path), and OUTPUT/final merges the adapter onto that base read from disk. Without
            # this the saved model would be the untrained base plus GRPO's adapter: the warm-up lost.
            warm = out_dir / "warmup_sft" / "model"
            model.save_pretrained(warm)
            tok.save_pretrained(warm)
            model.name_or_path = base_path = str(warm)
    # the newline ends a rollout (csr/rlvr) on the transformers and the vLLM path alike
    restore = apply_rollout_stops(cfg, args, model, tok)
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


def train(cfg: TrainConfig, train_dataset=None, trainer=None) -> dict:
    """Train one method; return paths and the train metrics. Resumes per ``cfg.resume_from_checkpoint``."""
    trainer = trainer or build_trainer(cfg, train_dataset)
    resume = _resume_arg(cfg)
    result = trainer.train(resume_from_checkpoint=resume)
    info = trainer._semcal
    paths = save_final(trainer, cfg, info["tokenizer"], info["restore_generation"])
    return {"output_dir": str(cfg.output_dir), "base_model": info["base_path"], **paths,
            "train_metrics": result.metrics, "resumed_from": resume}


def save_final(trainer, cfg: TrainConfig, tok, restore_generation: dict | None = None) -> dict:
    """Write ``final/`` (full weights, LoRA merged) and, for LoRA, ``final_adapter/``; both with use_cache=True
    and the model's own generation settings (``restore_generation``: training's newline EOS ids not leaked).

    Call it on every process. The weights go through the trainer's own save path, ``Trainer.save_model``: under
    DeepSpeed ZeRO-3 it gathers the sharded parameters (``accelerator.get_state_dict``, a collective every rank
    must join; ``zero3_save_16bit_model: true`` in the accelerate config) and the main process writes them. A
    main-process ``model.save_pretrained`` would write that process's empty shards instead.

    LoRA: ``save_model`` writes the adapter to ``final_adapter/``; then, with ``lora.merge_on_save``, the main
    process loads the base model the adapter names from disk, merges the adapter and writes ``final/``
    (merging the live model would need its full weights on one process, which ZeRO-3 does not hold).

    Returns ``{"model_dir", "adapter_dir"}`` (those written) on the main process, ``{}`` on the others.
    """
    from accelerate.utils import is_peft_model

    out_dir = Path(cfg.output_dir)
    model = trainer.accelerator.unwrap_model(trainer.model)
    peft = is_peft_model(model)
    base = model.get_base_model() if peft else model
    target = out_dir / ("final_adapter" if peft else "final")
    # the saved config/generation_config are the model's own; the live model keeps training's settings
    saved = {k: getattr(base.generation_config, k) for k in restore_generation or {}}
    saved_cache = base.config.use_cache
    for k, v in (restore_generation or {}).items():
        setattr(base.generation_config, k, v)
    base.config.use_cache = True
    try:
        trainer.save_model(str(target))
    finally:
        for k, v in saved.items():
            setattr(base.generation_config, k, v)
        base.config.use_cache = saved_cache
    paths: dict[str, str] = {}
    if trainer.is_world_process_zero():
        if not peft:
            tok.save_pretrained(target)
            paths["model_dir"] = str(target)
        else:
            paths["adapter_dir"] = str(target)
            if cfg.lora.merge_on_save:
                paths["model_dir"] = str(merge_adapter(target, out_dir / "final", tok, _dtype(cfg)))
    trainer.accelerator.wait_for_everyone()
    return paths


def merge_adapter(adapter_dir: str | os.PathLike, final: str | os.PathLike, tok, dtype=None) -> Path:
    """Load the base model named in ``adapter_dir/adapter_config.json``, merge the LoRA adapter into it and
    save the plain HF folder ``final`` (use_cache=True, the base model's own generation settings)."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM

    base_path = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.config.use_cache = True
    if getattr(merged, "generation_config", None) is not None:
        merged.generation_config.use_cache = True
    merged.save_pretrained(final)
    tok.save_pretrained(final)
    return Path(final)


def read_metrics(output_dir: str | os.PathLike) -> list[dict]:
    """The log records a run wrote to ``metrics.jsonl``."""
    p = Path(output_dir) / "metrics.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.is_file() else []
