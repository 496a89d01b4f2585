"""The trainer's settings: typed, frozen, validated once when built; YAML loading and ``key=value`` overrides.

:class:`TrainConfig` is the whole configuration; its sections are typed dataclasses (the style of
:class:`semcal_eval.semsoft.spec.SemSoftParams` and of TRL's ``GRPOConfig``):

- ``method``: ``csr`` (the paper's reward) | ``csr_likelihood`` | ``csr_spread`` (semcal's CSR variants) |
  ``rlvr`` | ``rlcr`` | ``rd`` (Rewarding Doubt)
- ``model``: ``semcal:NAME`` (resolved by :func:`semcal_eval.models.resolve_pretrained`), a local folder or a hub id
- ``data`` (:class:`DataSettings`): which training questions and how prompts are written
- ``reward`` (:class:`RewardSettings`): score, agreement judge, ε, reading, bounded, empty answers, λ(t) schedule,
  group gathering — what :func:`trainers.rewards.calibration_reward` takes, checked here and nowhere else
- ``lora`` (:class:`LoraSettings`): optional LoRA through peft
- ``grpo``: a read-only mapping passed verbatim to :class:`trl.GRPOConfig` (any of its fields; TRL checks them,
  semcal checks ``num_generations`` and ``scale_rewards``); defaults :data:`GRPO_DEFAULTS`
- ``warmup_sft`` (:class:`WarmupSettings`), ``evaluate`` (:class:`EvaluateSettings`), ``submit``
  (:class:`SubmitSettings`): the rlcr/rd warm-up, the harness run and the leaderboard submission after training

Each field of a section is one row of a table: its type (the annotation), its default, and where needed
``choices`` or a ``check`` with what it requires (:func:`setting`). Building a section checks every row, so a bad
value fails when the config is built, with the key, the value and the fix in the message; the reward functions
take :class:`RewardSettings` and do not check it again.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Any, ClassVar

import yaml

__all__ = ["METHODS", "CSR_METHODS", "SCHEDULES", "READINGS", "SCORES", "EMPTY_ANSWERS", "AGREEMENT_WRONG",
           "SCALE_REWARDS", "GRPO_DEFAULTS", "FrozenDict", "setting", "DataSettings", "RewardSettings", "LoraSettings",
           "WarmupSettings", "EvaluateSettings", "SubmitSettings", "TrainConfig", "deep_merge", "apply_override",
           "load_config", "check_warmup", "check_data_source", "check_group_layout"]

#: The calibration methods and the reward design each name promises: the config may tune λ, ε, K, the judge,
#: but not swap the score under a method's name (:class:`TrainConfig` checks it).
CSR_METHODS = {
    "csr": {"score": "log", "reading": "pairwise"},  # the paper's pairwise BCE
    "csr_likelihood": {"score": "likelihood"},  # semcal: y·K/n_correct
    "csr_spread": {"score": "likelihood_spread"},  # semcal: that, minus a wrong rollout's agreement
}
METHODS = (*CSR_METHODS, "rlvr", "rlcr", "rd")
SCHEDULES = ("linear", "constant", "step")
READINGS = ("rollout", "pairwise")
SCORES = ("log", "brier", "likelihood", "likelihood_spread")
#: ``judge`` (the paper: J as the judge reads it, reflexive) and semcal's additions ``disagree``, ``worst``
EMPTY_ANSWERS = ("judge", "disagree", "worst")
#: how a *wrong* rollout's row of the agreement matrix is read: ``judge`` (the paper: the same J as every row) or
#: ``overlap`` (csr_spread: J or a shared content word, :func:`trainers.answer_match.overlap_matrix`)
AGREEMENT_WRONG = ("judge", "overlap")
#: TRL's ``scale_rewards`` values
SCALE_REWARDS = ("group", "batch", "none", True, False)

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+")


# ------------------------------------------------------------------------------------------------ the table


class FrozenDict(dict):
    """A mapping that refuses changes: the value of a frozen setting (``reward.judge_kwargs``, ``grpo``). Change
    a config by building a new one (:meth:`TrainConfig.override`), which checks it again."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("settings are frozen once built: make a new config with TrainConfig.override('key=value') "
                        "or TrainConfig.merged({...})")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore

    def __reduce__(self):  # pickle and deepcopy rebuild it from a plain dict (not key by key)
        return (type(self), (dict(self),))


def setting(default: Any, doc: str = "", *, choices: tuple = (), check: tuple[Callable, str] | None = None,
            written: bool = True):
    """One row of a settings table: the default, what it means, its ``choices`` or a ``check`` (a predicate and
    what it requires, e.g. ``(lambda v: 0 < v < 0.5, "lie in the open interval (0, 0.5)")``). ``written=False``:
    left out of :meth:`TrainConfig.as_dict` while it holds its default (optional keys a config rarely sets)."""
    meta = {"doc": doc, "choices": choices, "check": check, "written": written}
    if isinstance(default, dict):
        return field(default_factory=lambda: FrozenDict(default), metadata=meta)
    return field(default=default, metadata=meta)


def _kinds(hint) -> tuple:
    """The accepted Python types of an annotation (``float | None`` → (float, NoneType))."""
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        return tuple(k for h in typing.get_args(hint) for k in _kinds(h))
    return (typing.get_origin(hint) or hint,)


@functools.cache
def _table(cls) -> tuple:
    """(name, accepted types, metadata, default) of each scalar field of a settings class."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in fields(cls):
        if f.metadata.get("section"):
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        rows.append((f.name, _kinds(hints[f.name]), f.metadata, default))
    return tuple(rows)


def _coerce(where: str, value: Any, kinds: tuple, default: Any) -> Any:
    """``value`` as one of ``kinds``, or a ValueError naming the key, the value and the fix."""
    fix = f"e.g. {where}={_yaml(default)}"
    if value is None:
        if type(None) in kinds:
            return None
        raise ValueError(f"{where} must be set (got null): {fix}")
    if bool in kinds and isinstance(value, bool):
        return value
    if float in kinds and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        value = float(value)  # YAML 1.1 reads 1e-2 as a string; numbers written that way are meant as floats
    if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{where}={value!r} must be a finite number: {fix}")
        return float(value)
    if int in kinds and isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if str in kinds and isinstance(value, str):
        return value
    if tuple in kinds:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]  # "a, b" on the command line
        if isinstance(value, (list, tuple)):
            return tuple(value)
    if Mapping in kinds and isinstance(value, Mapping):
        return FrozenDict(value)
    words = {type(None): "null", tuple: "a list", Mapping: "a mapping", bool: "true/false", int: "an integer",
             float: "a number", str: "a string"}
    names = " or ".join(words.get(k, k.__name__) for k in kinds)
    raise ValueError(f"{where}={value!r} must be {names}: {fix}")


def _yaml(v: Any) -> str:
    return yaml.safe_dump(_plain(v), default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def _plain(v: Any) -> Any:
    """A setting's value as plain YAML/JSON data: tuples → lists, read-only mappings → dicts."""
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return copy.deepcopy(v)


class _Section:
    """Base of the settings sections: ``__post_init__`` checks every row of the class's table, once."""

    SECTION: ClassVar[str] = ""

    def _where(self, name: str) -> str:
        return f"{self.SECTION}.{name}" if self.SECTION else name

    def __post_init__(self):
        for name, kinds, meta, default in _table(type(self)):
            where = self._where(name)
            value = _coerce(where, getattr(self, name), kinds, default)
            if meta["choices"] and value not in meta["choices"]:
                raise ValueError(f"{where}={value!r} is not one of {', '.join(map(str, meta['choices']))}: "
                                 f"e.g. {where}={_yaml(default)}")
            if meta["check"] and value is not None and not meta["check"][0](value):
                raise ValueError(f"{where}={_yaml(value)} must {meta['check'][1]}: e.g. {where}={_yaml(default)}")
            object.__setattr__(self, name, value)

    @classmethod
    def from_mapping(cls, d: Any):
        """Build the section from a mapping of its keys (missing keys take the defaults); unknown keys are an
        error that lists the known ones."""
        name = cls.SECTION or "top-level config"
        if d is None:
            d = {}
        if not isinstance(d, Mapping):
            raise ValueError(f"{name} must be a mapping of its keys, got {d!r}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown {cls.SECTION or 'config'} keys {unknown}; known: {sorted(known)}")
        return cls(**d)

    @classmethod
    def from_attrs(cls, obj: Any):
        """The section built from the attributes of ``obj`` named like its keys (the others take the defaults),
        e.g. a research design that carries reward options."""
        return cls(**{f.name: getattr(obj, f.name) for f in fields(cls) if hasattr(obj, f.name)})

    def as_dict(self) -> dict:
        """Every key as plain YAML data (keys with ``written=False`` only when set): ``from_mapping`` of it is
        ``self``."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, _Section):
                out[f.name] = v.as_dict()
            elif f.metadata.get("written", True) or v != _table_default(type(self), f.name):
                out[f.name] = _plain(v)
        return out


def _table_default(cls, name: str) -> Any:
    return next(d for n, _, _, d in _table(cls) if n == name)


def _at_least(n: int) -> tuple[Callable, str]:
    return (lambda v: v >= n, f"be >= {n}")


_UNIT = (lambda v: 0.0 <= v <= 1.0, "lie in [0, 1] (a fraction of max_steps)")


# ------------------------------------------------------------------------------------------------ sections


@dataclass(frozen=True)
class DataSettings(_Section):
    """Which training questions and how their prompts are written (:func:`trainers.data.build_dataset`)."""

    SECTION: ClassVar[str] = "data"
    dataset: str = setting("hotpotqa", "a QA dataset of semcal_eval.data.fields.QA_FIELDS")
    split: str = setting("train")
    data_dir: str | None = setting(None, "None: $SEMCAL_DATA_DIR, else the hub; 'hub' forces the hub")
    limit: int | None = setting(None, "the first N usable rows after a seeded shuffle; None = all", check=_at_least(1))
    shuffle_seed: int | None = setting(0, "the seed of the shuffle before data.limit; None: the split's order")
    prompt_style: str = setting("plain", "plain text, or chat (the tokenizer's chat template)",
                                choices=("plain", "chat"))
    # None: the QA tasks' own prompt (semcal_eval.qa.qa_doc_to_text), so training and evaluation match.
    prompt_template: str | None = setting(None, "a format string with {question}; None: the QA tasks' prompt",
                                          check=(lambda v: "{question}" in v, "contain the placeholder {question}"))
    # csr/rlvr: stop sampling at the first newline, as the QA tasks do (until "\n"); rlcr never stops there.
    stop_at_newline: bool = setting(True)

    def __post_init__(self):
        super().__post_init__()
        # The dataset decides where the question and the golds are (semcal_eval.data.fields); an unknown name
        # would otherwise fail only after the model is loaded. (Imported here: it imports `datasets`.)
        from semcal_eval.data.fields import qa_fields

        qa_fields(self.dataset)


@dataclass(frozen=True)
class RewardSettings(_Section):
    """The CSR calibration reward's options (:func:`trainers.rewards.calibration_reward`); the defaults are the
    paper's reward (method ``csr``): r_cal = −mean_{i≠j} BCE(J(C_j,C_i), J(C_j,C*)) in nats with
    a = clip(J, ε, 1 − ε), λ linear from 0 to 0.1. semcal's variants (csr_likelihood, csr_spread) set their own
    score in their YAML; :data:`CSR_METHODS` says which score each method name promises."""

    SECTION: ClassVar[str] = "reward"
    judge: str = setting("cover", "J for agreement between rollouts; correctness is always semcal_eval.qa.grading")
    judge_kwargs: Mapping = setting({}, "keyword arguments of semcal_eval.qa.judges.get_judge")
    eps: float = setting(1e-3, "the BCE's one free constant: agreement clipped to [ε, 1 − ε]",
                         check=(lambda v: 0.0 < v < 0.5, "lie in the open interval (0, 0.5) (p is clipped to "
                                                          "[eps, 1 - eps])"))
    reading: str = setting("pairwise", "each partner's agreement scored (pairwise) or their mean (rollout)",
                           choices=READINGS)
    bounded: bool = setting(False, "True: r_cal / log(1/ε) ∈ [−1, 0] (then λ is on that scale)")
    empty_answer: str = setting("judge", "judge: the paper's J as read (reflexive); semcal's disagree, worst",
                                choices=EMPTY_ANSWERS)
    agreement_wrong: str = setting("judge", "overlap: wrong rows also agree on a shared content word (csr_spread)",
                                   choices=AGREEMENT_WRONG)
    lambda_schedule: str = setting("linear", "λ(t), non-decreasing in t = step / max_steps", choices=SCHEDULES)
    # 0.1 < 1/log(1/ε) keeps every correct rollout above every wrong one under the raw BCE at ε = 10⁻³ (worst
    # correct: 1 + 0.1·log ε = 0.31 > best wrong: ≈ 0) — docs/TRAINING.md
    lambda_max: float = setting(0.1, "λ at the end of training")
    lambda_min: float = setting(0.0, "λ at step 0", check=_at_least(0))
    lambda_step_fraction: float = setting(0.5, "the step schedule's switch point", check=_UNIT)
    gather_groups: bool = setting(False, "assemble groups across ranks (needed when a rank's batch splits one)")
    score: str = setting("log", "the calibration score (trainers.rewards.group_calibration_scores)", choices=SCORES)

    def __post_init__(self):
        super().__post_init__()
        if self.lambda_max < self.lambda_min:
            raise ValueError(
                f"the λ schedule must be non-decreasing: need reward.lambda_min <= reward.lambda_max, got "
                f"lambda_min={self.lambda_min}, lambda_max={self.lambda_max}")


@dataclass(frozen=True)
class LoraSettings(_Section):
    """Optional LoRA through peft (:func:`trainers.train.lora_config`)."""

    SECTION: ClassVar[str] = "lora"
    enabled: bool = setting(False)
    r: int = setting(16, check=_at_least(1))
    alpha: int = setting(32, check=_at_least(1))
    dropout: float = setting(0.0, check=(lambda v: 0.0 <= v < 1.0, "lie in [0, 1)"))
    target_modules: tuple[str, ...] = setting(("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj",
                                               "gate_proj"))
    merge_on_save: bool = setting(True, "also write a merged full model to OUTPUT/final for `pretrained=DIR`")


@dataclass(frozen=True)
class WarmupSettings(_Section):
    """Supervised warm-up before GRPO for rlcr/rd (trainers/warmup.py): the base model's greedy answers in the
    method's format; confidence = the share of ``num_samples`` sampled answers that agree with the greedy one,
    passed through a Platt map of share → correctness fitted on the warm-up questions, so the target is
    calibrated: the base rate where the model's agreement carries no signal."""

    SECTION: ClassVar[str] = "warmup_sft"
    enabled: bool = setting(False)
    limit: int | None = setting(256, "training questions used (the first of the shuffled training set); "
                                     "None or 0: all")
    steps: int = setting(40, check=_at_least(1))
    learning_rate: float = setting(5.0e-5, check=(lambda v: v > 0, "be > 0"))
    batch_size: int = setting(8, check=_at_least(1))
    num_samples: int = setting(4, check=_at_least(1))
    max_answer_tokens: int = setting(16, check=_at_least(1))


@dataclass(frozen=True)
class EvaluateSettings(_Section):
    """The QA evaluation after training (:mod:`trainers.pipeline`)."""

    SECTION: ClassVar[str] = "evaluate"
    enabled: bool = setting(False)
    tasks: tuple[str, ...] = setting((), "lm-eval task names (a list, or 'a, b' on the command line)")
    limit: int | None = setting(None, check=_at_least(1))
    batch_size: int = setting(8, check=_at_least(1))
    extra_args: tuple = setting((), "more semcal-eval arguments, verbatim")
    metadata: Mapping | None = setting(None, "semcal-eval --metadata", written=False)


@dataclass(frozen=True)
class SubmitSettings(_Section):
    """The leaderboard submission after the evaluation (:func:`trainers.pipeline.submit`)."""

    SECTION: ClassVar[str] = "submit"
    enabled: bool = setting(False)
    name: str | None = setting(None, "the board's model name; None: <model>-<method>")
    db: str | None = setting(None, "the board's database (semcal-eval board submit --db)", written=False)


#: ``grpo``'s defaults; the section is passed verbatim to :class:`trl.GRPOConfig`.
GRPO_DEFAULTS: Mapping[str, Any] = FrozenDict({
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
})
#: ``grpo`` keys that are numbers however YAML 1.1 read them ("1e-5" is a string there)
_GRPO_FLOATS = ("learning_rate", "temperature", "beta", "weight_decay", "max_grad_norm")

_SECTIONS = {"data": DataSettings, "reward": RewardSettings, "lora": LoraSettings, "warmup_sft": WarmupSettings,
             "evaluate": EvaluateSettings, "submit": SubmitSettings}


def _section(cls):
    return field(default_factory=cls, metadata={"section": True})


def _grpo(d: Any) -> Mapping[str, Any]:
    """The ``grpo`` mapping: :data:`GRPO_DEFAULTS` ← ``d``, numbers written as strings read as floats,
    ``num_generations`` and ``scale_rewards`` checked (TRL checks the rest when it builds its GRPOConfig)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"grpo must be a mapping of trl.GRPOConfig fields, got {d!r}")
    g = deep_merge(dict(GRPO_DEFAULTS), dict(d))
    for k in _GRPO_FLOATS:
        if isinstance(g.get(k), str) and _NUMBER.fullmatch(g[k].strip()):
            g[k] = float(g[k])
    K = g.get("num_generations")
    if isinstance(K, bool) or not isinstance(K, int) or K < 2:
        raise ValueError(f"grpo.num_generations (K) must be an integer >= 2: agreement with the other K-1 rollouts "
                         f"is undefined for K={K!r}. Set grpo.num_generations to 2 or more.")
    if g.get("scale_rewards", "group") not in SCALE_REWARDS:
        raise ValueError(f"grpo.scale_rewards must be 'none' (the default here), 'batch', 'group' or true/false, "
                         f"got {g['scale_rewards']!r}")
    return FrozenDict(g)


@dataclass(frozen=True)
class TrainConfig(_Section):
    """A whole training configuration, validated when built (:meth:`from_dict`, :func:`load_config`).

    Built from a nested mapping: field defaults ← YAML file ← ``key=value`` overrides. :meth:`as_dict` gives
    the resolved config back as plain data (what ``semcal_train.yaml`` and ``--print-config`` write)."""

    method: str = setting("csr", choices=METHODS)
    model: str = setting("semcal:smollm2-135m", "semcal:NAME, a local folder or a hub id")
    output_dir: str = setting("runs/csr")
    seed: int = setting(42)
    resume_from_checkpoint: bool | str | None = setting(None, "a checkpoint folder, true/auto/last, or None")
    data: DataSettings = _section(DataSettings)
    reward: RewardSettings = _section(RewardSettings)
    lora: LoraSettings = _section(LoraSettings)
    grpo: Mapping[str, Any] = field(default_factory=lambda: _grpo({}), metadata={"section": True})
    warmup_sft: WarmupSettings = _section(WarmupSettings)
    evaluate: EvaluateSettings = _section(EvaluateSettings)
    submit: SubmitSettings = _section(SubmitSettings)

    def __post_init__(self):
        super().__post_init__()
        for name, cls in _SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"TrainConfig.{name} must be a {cls.__name__}; build configs with "
                                "TrainConfig.from_dict or load_config")
        object.__setattr__(self, "grpo", _grpo(self.grpo))
        r = self.reward
        for key, want in CSR_METHODS.get(self.method, {}).items():
            if getattr(r, key) != want:
                other = [m for m, d in CSR_METHODS.items() if d.get(key) == getattr(r, key)]
                hint = f"use method: {other[0]}" if other else "give the design a method name of its own"
                raise ValueError(
                    f"method {self.method!r} promises reward.{key}={want!r}, got {getattr(r, key)!r}: a method's name "
                    f"says which reward it trains; {hint} (trainers.config.CSR_METHODS)")

    @classmethod
    def from_dict(cls, d: Mapping | None) -> TrainConfig:
        """Field defaults ← ``d`` (a nested mapping, e.g. a YAML file's); every key checked, errors name the fix."""
        d = dict(d or {})
        top = {k: v for k, v in d.items() if k not in _SECTIONS}
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(top) - set(known))
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; known: {sorted(known)}")
        sections = {k: c.from_mapping(d[k]) for k, c in _SECTIONS.items() if k in d}
        return cls(**top, **sections)

    def override(self, *assignments: str) -> TrainConfig:
        """A new config with ``dotted.key=value`` assignments applied (:func:`apply_override`) and checked."""
        return TrainConfig.from_dict(functools.reduce(apply_override, assignments, self.as_dict()))

    def merged(self, update: Mapping) -> TrainConfig:
        """A new config with the nested mapping ``update`` merged in (:func:`deep_merge`) and checked."""
        return TrainConfig.from_dict(deep_merge(self.as_dict(), dict(update)))

    def as_dict(self) -> dict:
        out = super().as_dict()
        out["grpo"] = _plain(self.grpo)
        return {k: out[k] for k in (f.name for f in fields(self))}


# ------------------------------------------------------------------------------------------------ loading


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
    """Apply one ``dotted.key=value`` override to a nested dict; the value is parsed as YAML (``2`` → int,
    ``[a, b]`` → list, ``null`` → None, ``true`` → bool).

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


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] | None = None) -> TrainConfig:
    """Defaults ← YAML file (may name a ``base:`` file relative to itself) ← ``key=value`` overrides, built and
    checked once as a :class:`TrainConfig`."""
    raw = _read_yaml(Path(path)) if path is not None else {}
    for o in overrides or []:
        raw = apply_override(raw, o)
    return TrainConfig.from_dict(raw)


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


# ------------------------------------------------------------------------------------------------ beyond the settings


def check_warmup(cfg: TrainConfig) -> None:
    """Raise if ``warmup_sft`` is enabled for a method without an output format to learn (csr, rlvr). Not part of
    building the config, so that a method switched on the command line first hears about its evaluation tasks
    (:func:`trainers.pipeline.check_eval_tasks`), the more common mistake."""
    if cfg.warmup_sft.enabled and cfg.method not in ("rlcr", "rd"):
        raise ValueError(f"warmup_sft teaches the rlcr/rd output format; method {cfg.method!r} has none: "
                         "set warmup_sft.enabled=false")


def check_data_source(cfg: TrainConfig) -> None:
    """With a local data mirror, the training split must be there; raise naming the fix if it is not.

    Called before anything is loaded when the training set comes from the config (the hub is only asked at
    build time): MS MARCO's mirror, for one, holds only the dev answers, so ``data.dataset: msmarco`` must fail
    here, not after the model has loaded. Not part of building the config, which also serves configs whose
    training rows are passed in directly."""
    from semcal_eval.data import local_splits, resolve_data_dir

    d = cfg.data
    root = resolve_data_dir(d.data_dir)
    if root is None:
        return
    have = local_splits(d.dataset, d.data_dir)
    if d.split not in have:
        raise ValueError(
            f"data.split={d.split!r} of {d.dataset} is not in the local data mirror ({root}/{d.dataset} "
            f"has {'the splits ' + ', '.join(have) if have else 'no usable split'}). "
            f"{'Choose one of those, s' if have else 'S'}et data.data_dir: hub to read the hub, or place a "
            f"hub-schema {d.split}.jsonl there."
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
