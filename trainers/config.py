"""Training configuration: defaults, YAML loading, ``--set key=value`` overrides and up-front validation.

A config is a nested dict. Top-level sections:

- ``method``: ``csr`` (the paper's reward) | ``csr_likelihood`` | ``csr_spread`` (semcal's CSR variants) |
  ``rlvr`` | ``rlcr`` | ``rd`` (Rewarding Doubt)
- ``model``: ``semcal:NAME`` (resolved by :func:`semcal_eval.models.resolve_pretrained`), a local folder or a hub id
- ``data``: which training questions and how prompts are written
- ``reward``: score, agreement judge, ε, reading, bounded, empty answers, λ(t) schedule, group gathering
- ``lora``: optional LoRA through peft
- ``grpo``: passed verbatim to :class:`trl.GRPOConfig` (any of its fields)
- ``evaluate`` / ``submit``: the harness run and leaderboard submission after training
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import yaml

from trainers.rewards import (
    AGREEMENT_WRONG,
    CSR_METHODS,
    DEFAULT_EMPTY_ANSWER,
    DEFAULT_EPS,
    DEFAULT_JUDGE,
    DEFAULT_LAMBDA_MAX,
    DEFAULT_READING,
    EMPTY_ANSWERS,
    SCORES,
    validate_calibration_args,
)

METHODS = (*CSR_METHODS, "rlvr", "rlcr", "rd")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")

DEFAULTS: dict[str, Any] = {
    "method": "csr",
    "model": "semcal:smollm2-135m",
    "output_dir": "runs/csr",
    "seed": 42,
    "resume_from_checkpoint": None,
    "data": {
        "dataset": "hotpotqa",  # a QA dataset of semcal_eval.data.fields.QA_FIELDS
        "split": "train",
        "data_dir": None,  # None: $SEMCAL_DATA_DIR, else the hub; "hub" forces the hub (semcal_eval.data.load)
        "limit": None,  # the first N usable rows after a seeded shuffle; None = all
        "shuffle_seed": 0,
        "prompt_style": "plain",  # plain text prompt, or "chat" (conversational, the tokenizer's chat template)
        # None: the QA tasks' own prompt (semcal_eval.qa.qa_doc_to_text), so training and evaluation match.
        "prompt_template": None,
        # csr/rlvr: stop sampling at the first newline, as the QA tasks do (until "\n"); rlcr never stops there.
        "stop_at_newline": True,
    },
    # The paper's CSR reward (method csr): r = r_RLVR + λ(t)·r_cal, r_cal = −mean_{i≠j} BCE(J(C_j,C_i), J(C_j,C*))
    # in nats with a = clip(J, ε, 1 − ε); λ linear from 0. semcal's variants (csr_likelihood, csr_spread) set
    # their own score in their YAML; trainers.rewards.CSR_METHODS says which score each method name promises.
    "reward": {
        "judge": DEFAULT_JUDGE,  # J for agreement between rollouts; correctness is always semcal_eval.qa.grading
        "judge_kwargs": {},
        "eps": DEFAULT_EPS,  # the BCE's one free constant: agreement clipped to [ε, 1 − ε]
        "reading": DEFAULT_READING,
        "bounded": False,  # True: r_cal / log(1/ε) ∈ [−1, 0] (then λ is on that scale)
        "empty_answer": DEFAULT_EMPTY_ANSWER,  # "judge": the paper's J as read (reflexive); semcal's "disagree", "worst"
        "agreement_wrong": "judge",  # "overlap": wrong rows also agree on a shared content word (csr_spread)
        "lambda_schedule": "linear",
        "lambda_max": DEFAULT_LAMBDA_MAX,
        "lambda_min": 0.0,
        "lambda_step_fraction": 0.5,
        "gather_groups": False,
        "score": "log",
    },
    "lora": {
        "enabled": False,
        "r": 16,
        "alpha": 32,
        "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"],
        "merge_on_save": True,  # also write a merged full model to OUTPUT/final for `pretrained=DIR`
    },
    "grpo": {
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 32,
        "max_steps": 100,
        "learning_rate": 1e-5,
        "temperature": 1.0,
        "beta": 0.0,
        # "none": advantages r − group mean, on the fixed scale of the correctness reward's range [0, 1], so
        # CSR = RLVR at λ = 0 and λ(t)·r_cal grows with λ in every generation batch. TRL's default "group"
        # divides each group by its own std (λ cancels in all-right/all-wrong groups); "batch" divides by the
        # batch std, which in a batch with no correct answer is made of λ·r_cal alone (λ cancels again; issue 22,
        # docs/TRAINING.md). Adam makes a constant reward scale irrelevant to the step size.
        "scale_rewards": "none",
        "logging_steps": 1,
        "save_steps": 50,
        "save_total_limit": 3,
        "report_to": [],  # metrics.jsonl is always written; [tensorboard] needs `pip install -e .[train]`
        "use_cpu": False,
        "bf16": False,
        "fp16": False,
        "activation_checkpointing": False,  # (TRL defaults gradient_checkpointing to True; the new name wins)
        "shuffle_dataset": True,
    },
    # Supervised warm-up before GRPO for rlcr/rd (trainers/warmup.py): the base model's greedy answers in the
    # method's format; confidence = the share of num_samples sampled answers that agree with the greedy one, passed
    # through a Platt map of share → correctness fitted on the warm-up questions (trainers/warmup.py), so the
    # target is calibrated: the base rate where the model's agreement carries no signal.
    "warmup_sft": {
        "enabled": False,
        "limit": 256,  # training questions used (the first of the shuffled training set)
        "steps": 40,
        "learning_rate": 5.0e-5,
        "batch_size": 8,
        "num_samples": 4,
        "max_answer_tokens": 16,
    },
    "evaluate": {
        "enabled": False,
        "tasks": [],
        "limit": None,
        "batch_size": 8,
        "extra_args": [],
    },
    "submit": {"enabled": False, "name": None},
}


def deep_merge(base: dict, update: dict) -> dict:
    """Recursive dict merge; ``update`` wins, nested dicts merge key by key."""
    out = copy.deepcopy(base)
    for k, v in (update or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def apply_override(cfg: dict, assignment: str) -> dict:
    """Apply one ``dotted.key=value`` override; the value is parsed as YAML (``2`` → int, ``[a, b]`` → list,
    ``null`` → None, ``true`` → bool).

    >>> apply_override({"grpo": {"max_steps": 100}}, "grpo.max_steps=2")
    {'grpo': {'max_steps': 2}}
    >>> apply_override({}, "reward.eps=1e-2")["reward"]["eps"]
    0.01
    """
    if "=" not in assignment:
        raise ValueError(f"override {assignment!r} must look like key.sub=value (e.g. grpo.max_steps=2)")
    key, raw = assignment.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ValueError(f"override {assignment!r} has an empty key")
    value = yaml.safe_load(raw) if raw.strip() else None
    # YAML 1.1 reads 1e-2 as a string; numbers written that way are meant as floats.
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        value = float(value)
    out = copy.deepcopy(cfg)
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part, {}), dict):
            raise ValueError(f"override {assignment!r}: {part!r} is not a section")
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def _floatify(section: dict, keys: tuple[str, ...]) -> None:
    for k in keys:
        v = section.get(k)
        if isinstance(v, str):
            try:
                section[k] = float(v)
            except ValueError:
                pass


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> dict:
    """Defaults ← YAML file (may name a ``base:`` file relative to itself) ← ``key=value`` overrides."""
    cfg = copy.deepcopy(DEFAULTS)
    if path is not None:
        cfg = deep_merge(cfg, _read_yaml(Path(path)))
    for o in overrides or []:
        cfg = apply_override(cfg, o)
    _floatify(cfg["reward"], ("eps", "lambda_max", "lambda_min", "lambda_step_fraction"))
    _floatify(cfg["warmup_sft"], ("learning_rate",))
    _floatify(cfg["grpo"], ("learning_rate", "temperature", "beta", "weight_decay", "max_grad_norm"))
    return cfg


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} not found (example configs: trainers/configs/*.yaml)")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a mapping at the top level")
    base = data.pop("base", None)
    if base:
        data = deep_merge(_read_yaml((path.parent / base).resolve()), data)
    return data


def validate(cfg: dict) -> None:
    """Check the options that would otherwise fail late (or silently) inside TRL."""
    unknown = set(cfg) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    if cfg["method"] not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {cfg['method']!r}")
    r = cfg["reward"]
    unknown = set(r) - set(DEFAULTS["reward"])
    if unknown:
        raise ValueError(f"unknown reward keys {sorted(unknown)}; known: {sorted(DEFAULTS['reward'])}")
    K = cfg["grpo"].get("num_generations")
    validate_calibration_args(
        K, r["eps"], r["reading"], r["lambda_schedule"], r["lambda_max"], r["lambda_min"], r["lambda_step_fraction"]
    )
    if r["score"] not in SCORES:
        raise ValueError(f"reward.score must be one of {', '.join(SCORES)}, got {r['score']!r}")
    if r["empty_answer"] not in EMPTY_ANSWERS:
        raise ValueError(f"reward.empty_answer must be one of {', '.join(EMPTY_ANSWERS)}, got {r['empty_answer']!r}")
    if r["agreement_wrong"] not in AGREEMENT_WRONG:
        raise ValueError(
            f"reward.agreement_wrong must be one of {', '.join(AGREEMENT_WRONG)}, got {r['agreement_wrong']!r}")
    if not isinstance(r["bounded"], bool):
        raise ValueError(f"reward.bounded must be true or false, got {r['bounded']!r}")
    promised = CSR_METHODS.get(cfg["method"], {})
    for key, want in promised.items():
        if r[key] != want:
            other = [m for m, d in CSR_METHODS.items() if d.get(key) == r[key]]
            hint = f"use method: {other[0]}" if other else "give the design a method name of its own"
            raise ValueError(
                f"method {cfg['method']!r} promises reward.{key}={want!r}, got {r[key]!r}: a method's name says "
                f"which reward it trains; {hint} (trainers.rewards.CSR_METHODS)")
    scale = cfg["grpo"].get("scale_rewards", "group")
    if scale not in ("group", "batch", "none", True, False):
        raise ValueError(
            f"grpo.scale_rewards must be 'none' (the default here), 'batch', 'group' or true/false, got {scale!r}"
        )
    w = cfg.get("warmup_sft") or {}
    unknown = set(w) - set(DEFAULTS["warmup_sft"])
    if unknown:
        raise ValueError(f"unknown warmup_sft keys {sorted(unknown)}; known: {sorted(DEFAULTS['warmup_sft'])}")
    if w.get("enabled") and (int(w["steps"]) < 1 or int(w["num_samples"]) < 1 or int(w["batch_size"]) < 1):
        raise ValueError("warmup_sft.steps, num_samples and batch_size must be >= 1")
    unknown = set(cfg["data"]) - set(DEFAULTS["data"])
    if unknown:
        raise ValueError(f"unknown data keys {sorted(unknown)}; known: {sorted(DEFAULTS['data'])}")
    # The dataset decides where the question and the golds are (semcal_eval.data.fields); an unknown name
    # would otherwise fail only after the model is loaded. (Imported here: it imports `datasets`.)
    from semcal_eval.data.fields import qa_fields

    qa_fields(cfg["data"]["dataset"])
    if cfg["data"]["prompt_style"] not in ("plain", "chat"):
        raise ValueError(f"data.prompt_style must be 'plain' or 'chat', got {cfg['data']['prompt_style']!r}")
    tpl = cfg["data"].get("prompt_template")
    if tpl is not None and "{question}" not in tpl:
        raise ValueError("data.prompt_template must contain the placeholder {question}")


def check_warmup(cfg: dict) -> None:
    """Raise if ``warmup_sft`` is enabled for a method without an output format to learn (csr, rlvr). Separate
    from :func:`validate` so that a method switched on the command line first hears about its evaluation tasks."""
    if (cfg.get("warmup_sft") or {}).get("enabled") and cfg["method"] not in ("rlcr", "rd"):
        raise ValueError(f"warmup_sft teaches the rlcr/rd output format; method {cfg['method']!r} has none: "
                         "set warmup_sft.enabled=false")


def check_data_source(cfg: dict) -> None:
    """With a local data mirror, the training split must be there; raise naming the fix if it is not.

    Called before anything is loaded when the training set comes from the config (the hub is only asked at
    build time): MS MARCO's mirror, for one, holds only the dev answers, so ``data.dataset: msmarco`` must fail
    here, not after the model has loaded. Not part of :func:`validate`, which also checks configs whose
    training rows are passed in directly."""
    from semcal_eval.data import local_splits, resolve_data_dir

    d = cfg["data"]
    root = resolve_data_dir(d.get("data_dir"))
    if root is None:
        return
    have = local_splits(d["dataset"], d.get("data_dir"))
    if d["split"] not in have:
        raise ValueError(
            f"data.split={d['split']!r} of {d['dataset']} is not in the local data mirror ({root}/{d['dataset']} "
            f"has {'the splits ' + ', '.join(have) if have else 'no usable split'}). "
            f"{'Choose one of those, s' if have else 'S'}et data.data_dir: hub to read the hub, or place a "
            f"hub-schema {d['split']}.jsonl there."
        )


def check_group_layout(args: Any, gather_groups: bool, method: str) -> None:
    """Raise if a rank's generation batch would split a group of K rollouts and groups are not gathered.

    TRL 1.16 hands each rank ``per_device_train_batch_size × steps_per_generation`` consecutive rows of the
    sampler's stream, in which each prompt's K rollouts are consecutive; the global generation batch is that
    times ``num_processes`` (TRL itself checks that the global batch is a multiple of K). A group spans two
    ranks exactly when the per-rank count is not a multiple of K. Only the CSR calibration reward reads
    whole groups; RLVR and RLCR score completions one at a time.
    """
    K = args.num_generations
    local = args.per_device_train_batch_size * args.steps_per_generation
    if method in CSR_METHODS and local % K != 0 and not gather_groups:
        raise ValueError(
            f"per_device_train_batch_size × steps_per_generation = {args.per_device_train_batch_size} × "
            f"{args.steps_per_generation} = {local} is not a multiple of num_generations = {K}, so each rank "
            f"holds part of a group ({args.world_size} processes) and the CSR calibration reward cannot see "
            f"whole groups. Fix: make it a multiple of {K}, or set reward.gather_groups=true."
        )
