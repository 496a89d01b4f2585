"""The trainer's configs (trainers/configs/*.yaml) against each other and against the evaluation they point at:

* every method is evaluated on the tasks that match its training (csr/rlvr: agreement, rlcr: the ``*_rlcr``
  tasks, with the training token budget);
* a rollout stops at the same tokens on the transformers path and on the vLLM path (``data.stop_at_newline``),
  and the vLLM configs sample exactly like the config they extend;
* ``final/`` is written through the trainer's own save path, which gathers DeepSpeed ZeRO-3's sharded weights
  (a faked ZeRO-3 engine on a tiny random model: the real ``Trainer.save_model`` code runs).
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from semcal_eval import TASKS_DIR  # noqa: E402
from trainers.config import load_config  # noqa: E402
from trainers.pipeline import EVAL_MODE, check_eval_tasks, eval_command, qa_tasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "trainers" / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
#: Keys that only a GPU run can build (bf16) or that need optional packages (tensorboard); no generation setting.
CPU = ["grpo.bf16=false", "grpo.report_to=[]"]


def _task_cfgs() -> dict[str, dict]:
    from semcal_eval.harness.task_yaml import iter_task_configs

    return {c["task"]: c for _, c in iter_task_configs(TASKS_DIR)}


def test_the_configs_are_the_expected_set():
    assert {p.stem for p in CONFIGS} == {"csr", "csr_likelihood", "csr_spread", "rlvr", "rlcr", "rd", "cpu_smoke",
                                         "vllm_colocate", "vllm_server"}


#: the configs that build on this CPU; the vLLM ones need `pip install trl[vllm]` and a GPU (README), so they are
#: not collected here rather than skipped
CPU_CONFIGS = [p for p in CONFIGS if not load_config(p).grpo.get("use_vllm")]


def test_only_the_vllm_configs_are_left_to_a_gpu():
    assert {p.stem for p in CONFIGS} - {p.stem for p in CPU_CONFIGS} == {"vllm_colocate", "vllm_server"}


@pytest.mark.parametrize("path", CPU_CONFIGS, ids=lambda p: p.stem)
def test_every_config_builds_without_optional_packages(path):
    """Issue 22, item 7: after the README's set-up (no tensorboard, no wandb) every shipped config builds its
    GRPOConfig; only bf16 (a GPU setting) is switched off here, and vLLM configs stop at TRL's vLLM check."""
    import importlib.util

    from trainers.train import build_grpo_config

    cfg = load_config(path, ["grpo.bf16=false", "grpo.use_cpu=true"])
    assert "tensorboard" not in (cfg.grpo["report_to"] or []) or importlib.util.find_spec("tensorboard")
    build_grpo_config(cfg)
    # asking for tensorboard without it installed fails with the one-line fix
    if importlib.util.find_spec("tensorboard") is None:
        with pytest.raises(ValueError, match=r"pip install tensorboard.*grpo.report_to=\[\]"):
            build_grpo_config(cfg.override("grpo.report_to=[tensorboard]"))


# ---------------------------------------------------------------- each method on its matching evaluation


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_each_config_evaluates_on_its_methods_tasks(path):
    cfg = load_config(path)
    tasks = qa_tasks()
    listed = cfg.evaluate.tasks
    assert listed
    want = EVAL_MODE[cfg.method]
    assert all(t in tasks and tasks[t][0] == want for t in listed), (path.stem, listed)
    check_eval_tasks(cfg)


def test_methods_are_compared_on_the_same_datasets():
    tasks = qa_tasks()
    by_method = {}
    for m in ("csr", "rlvr", "rlcr", "rd"):
        cfg = load_config(CONFIG_DIR / f"{m}.yaml")
        by_method[m] = sorted(tasks[t][1] for t in cfg.evaluate.tasks)
    assert by_method["csr"] == by_method["rlvr"] == by_method["rlcr"] == by_method["rd"] == ["hotpotqa", "nq_open"]
    assert load_config(CONFIG_DIR / "rlcr.yaml").evaluate.tasks == ("hotpotqa_rlcr", "nq_open_rlcr")


@pytest.mark.parametrize("name", ["csr", "rlvr", "rlcr", "rd"])
def test_evaluation_generates_like_training(name):
    """The tasks a method is evaluated on stop where its rollouts stop and have its training budget."""
    cfg = load_config(CONFIG_DIR / f"{name}.yaml")
    task_cfgs = _task_cfgs()
    for t in cfg.evaluate.tasks:
        gk = task_cfgs[t]["generation_kwargs"]
        assert gk["max_gen_toks"] == cfg.grpo["max_completion_length"], t
        if name == "rlcr":
            assert gk["until"] == []  # EOS only, as training (no stop string may cut the confidence tag)
        else:
            assert cfg.data.stop_at_newline and "\n" in gk["until"]  # the answer line, as training


def test_a_method_switched_on_the_command_line_must_switch_its_tasks(capsys):
    from trainers.cli import main

    csr = str(CONFIG_DIR / "csr.yaml")
    assert main([csr, "--method", "rlcr", "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "hotpotqa_semagree" in err and "evaluate.tasks=[hotpotqa_rlcr, nq_open_rlcr]" in err
    assert main([str(CONFIG_DIR / "rlcr.yaml"), "--method", "rlvr", "--print-config"]) == 2
    assert "evaluate.tasks=[hotpotqa_semagree, nq_open_semagree]" in capsys.readouterr().err
    assert main([csr, "--method", "rlcr", "--no-evaluate", "--print-config"]) == 0
    assert main([csr, "--method", "rlcr", "--set", "evaluate.tasks=[triviaqa_rlcr]", "--print-config"]) == 0
    # names that are not semcal QA tasks (tags, lm-eval's own tasks) are not judged
    check_eval_tasks(load_config(CONFIG_DIR / "rlcr.yaml", ["evaluate.tasks=[semcal_qa_rlcr, gsm8k]"]))


def test_rlcr_evaluation_gets_the_runs_own_budget():
    paths = {"model_dir": "/m"}
    cmd = eval_command(load_config(CONFIG_DIR / "rlcr.yaml"), paths)
    assert cmd[cmd.index("--gen_kwargs") + 1] == "max_gen_toks=256"
    cmd = eval_command(load_config(CONFIG_DIR / "rlcr.yaml", ["grpo.max_completion_length=512"]), paths)
    assert cmd[cmd.index("--gen_kwargs") + 1] == "max_gen_toks=512"
    cmd = eval_command(load_config(CONFIG_DIR / "rlcr.yaml", ["evaluate.extra_args=[--gen_kwargs, max_gen_toks=300]"]),
                       paths)
    assert cmd.count("--gen_kwargs") == 1 and cmd[cmd.index("--gen_kwargs") + 1] == "max_gen_toks=300"
    assert "--gen_kwargs" not in eval_command(load_config(CONFIG_DIR / "csr.yaml"), paths)


# ---------------------------------------------------------------- rollouts stop at the same place on both paths


def _eos_ids(v) -> list[int]:
    return [] if v is None else [v] if isinstance(v, int) else list(v)


@pytest.fixture(scope="module")
def model_files():
    """Tokenizer and generation config of the model the configs train (all name the same one)."""
    from transformers import AutoTokenizer, GenerationConfig

    from trainers.train import resolve_model

    names = {load_config(p).model for p in CONFIGS}
    assert len(names) == 1
    path = resolve_model(names.pop())
    return AutoTokenizer.from_pretrained(path), GenerationConfig.from_pretrained(path)


def _rollout_stops(cfg, tok, gen_config) -> tuple[set[int], object]:
    """The token ids that end a rollout on the path ``cfg`` generates with, after the trainer's stop set-up
    (trainers.train.apply_rollout_stops, as build_trainer runs it)."""
    from trainers.train import apply_rollout_stops, build_grpo_config

    args = build_grpo_config(cfg)
    model = SimpleNamespace(generation_config=copy.deepcopy(gen_config))
    apply_rollout_stops(cfg, args, model, tok)
    if args.use_vllm:
        # vLLM ends a sequence at the model's own EOS ids (generation_config.json) and at stop_token_ids
        extra = (args.generation_kwargs or {}).get("stop_token_ids", [])
        return set(_eos_ids(gen_config.eos_token_id)) | set(extra), args
    # TRL's transformers path: generation_config.eos_token_id plus the tokenizer's EOS (GRPOTrainer.eos_token_ids)
    return set(_eos_ids(model.generation_config.eos_token_id)) | {tok.eos_token_id}, args


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_rollouts_stop_at_the_same_tokens_on_both_paths(path, model_files):
    from trainers.train import newline_token_ids

    tok, gen = model_files
    cfg = load_config(path, CPU)
    stops, args = _rollout_stops(cfg, tok, gen)
    other, _ = _rollout_stops(load_config(path, CPU + [f"grpo.use_vllm={str(not args.use_vllm).lower()}"]), tok, gen)
    assert stops == other, path.stem
    eos = {tok.eos_token_id} | set(_eos_ids(gen.eos_token_id))
    if cfg.method == "rlcr":
        assert stops == eos  # RLCR's blocks span lines: EOS or the budget ends it, as its tasks
    else:
        assert stops == eos | set(newline_token_ids(tok))  # the answer line, as the tasks' until "\n"
        assert "\n" in tok.decode([min(stops - eos)])


def test_vllm_configs_sample_like_the_config_they_extend(model_files):
    tok, gen = model_files
    keys = ("num_generations", "max_completion_length", "temperature", "top_p", "top_k", "min_p",
            "repetition_penalty", "per_device_train_batch_size", "steps_per_generation", "beta", "loss_type")
    _, base = _rollout_stops(load_config(CONFIG_DIR / "csr.yaml", CPU), tok, gen)
    for name in ("vllm_colocate", "vllm_server"):
        stops, args = _rollout_stops(load_config(CONFIG_DIR / f"{name}.yaml", CPU), tok, gen)
        assert args.use_vllm
        assert {k: getattr(args, k) for k in keys} == {k: getattr(base, k) for k in keys}, name
        assert set(args.generation_kwargs) == {"stop_token_ids"}  # nothing else changes vLLM's sampling


def test_vllm_stop_ids_merge_with_the_configs_own(model_files):
    tok, gen = model_files
    _, args = _rollout_stops(load_config(CONFIG_DIR / "vllm_colocate.yaml",
                                         CPU + ["grpo.generation_kwargs={stop_token_ids: [5], seed: 1}"]), tok, gen)
    assert args.generation_kwargs["stop_token_ids"][0] == 5 and args.generation_kwargs["seed"] == 1
    assert len(args.generation_kwargs["stop_token_ids"]) == len(set(args.generation_kwargs["stop_token_ids"])) > 1
    _, args = _rollout_stops(load_config(CONFIG_DIR / "vllm_colocate.yaml", CPU + ["method=rlcr"]), tok, gen)
    assert args.generation_kwargs is None
    _, args = _rollout_stops(load_config(CONFIG_DIR / "vllm_server.yaml", CPU + ["data.stop_at_newline=false"]),
                             tok, gen)
    assert args.generation_kwargs is None


# ---------------------------------------------------------------- final/ through the trainer's own save path


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, smollm2_path):
    """A random 1-layer Llama with SmolLM2's tokenizer (fast to build and save)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(smollm2_path)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=512, tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id))
    model.generation_config.eos_token_id = tok.eos_token_id
    d = tmp_path_factory.mktemp("tiny") / "base"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _tiny_trainer(base: Path, out: Path, method: str, lora: bool):
    from datasets import Dataset

    from trainers.data import build_dataset
    from trainers.train import build_trainer

    cfg = load_config(CONFIG_DIR / "cpu_smoke.yaml", [
        f"model={base}", f"output_dir={out}", f"method={method}", f"lora.enabled={str(lora).lower()}",
        "lora.target_modules=[q_proj, v_proj]", "grpo.num_generations=2", "grpo.per_device_train_batch_size=2",
        "grpo.max_completion_length=4", "grpo.max_steps=1", "data.dataset=nq_open", "data.data_dir=hub"])
    rows = Dataset.from_dict({"id": ["0", "1"], "question": ["Capital of France?", "Capital of Italy?"],
                              "answer": [["Paris"], ["Rome"]]})
    return cfg, build_trainer(cfg, train_dataset=build_dataset(cfg, rows=rows))


def _fake_zero3(trainer, monkeypatch, rank: int) -> tuple[dict, list]:
    """Make ``trainer`` look like a DeepSpeed ZeRO-3 run seen from process ``rank``: the live parameters are
    this rank's (here: zeroed) shards, and ``accelerator.get_state_dict`` is the collective gather that returns
    the full weights. Returns the full weights and the list of gather calls."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # a trained adapter, so that merging changes the weights
    full = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gathers: list = []

    def get_state_dict(m, unwrap=True):
        gathers.append(m)
        return {k: v.clone() for k, v in full.items()}

    monkeypatch.setattr(trainer.accelerator, "get_state_dict", get_state_dict)
    monkeypatch.setattr(trainer, "is_deepspeed_enabled", True)
    engine = SimpleNamespace(config={"zero_optimization": {"stage": 3}})
    monkeypatch.setattr(trainer, "deepspeed", engine, raising=False)
    monkeypatch.setattr(trainer, "model_wrapped", SimpleNamespace(save_checkpoint=lambda save_dir: None))
    if rank:
        monkeypatch.setattr(trainer, "is_world_process_zero", lambda: False)
        monkeypatch.setattr(type(trainer.args), "should_save", property(lambda self: False))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # what a rank-0 save_pretrained would write
    return full, gathers


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_final_is_gathered_under_zero3(tiny_base, tmp_path, monkeypatch, lora):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, GenerationConfig

    from trainers.train import newline_token_ids, save_final

    cfg, trainer = _tiny_trainer(tiny_base, tmp_path, "csr", lora)
    tok = trainer._semcal["tokenizer"]
    # the transformers path ends rollouts at the newline tokens (TRL's eos ids)
    assert set(newline_token_ids(tok)) < set(trainer.eos_token_ids)
    model = trainer.accelerator.unwrap_model(trainer.model)
    full, gathers = _fake_zero3(trainer, monkeypatch, rank=0)
    expected = None
    if lora:
        with torch.no_grad():
            ref = copy.deepcopy(model)
            ref.load_state_dict(full)
            expected = {k: v.clone() for k, v in ref.merge_and_unload().state_dict().items()}
    else:
        expected = full
    live_eos = (model.get_base_model() if lora else model).generation_config.eos_token_id

    paths = save_final(trainer, cfg, tok, trainer._semcal["restore_generation"])

    assert len(gathers) == 1  # the trainer's own save path gathered the shards
    final = Path(paths["model_dir"])
    assert final == tmp_path / "final"
    if lora:
        assert Path(paths["adapter_dir"]) == tmp_path / "final_adapter"
        saved = load_file(str(tmp_path / "final_adapter" / "adapter_model.safetensors"))
        b = {k: v for k, v in saved.items() if "lora_B" in k}
        assert b and all(float(v.abs().sum()) > 0 for v in b.values())  # the gathered adapter, not zeros
    merged = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32).state_dict()
    for k, v in expected.items():
        if k in merged:
            torch.testing.assert_close(merged[k], v, atol=1e-6, rtol=0, msg=k)
    assert float(merged["model.layers.0.self_attn.q_proj.weight"].abs().sum()) > 0
    gc = GenerationConfig.from_pretrained(final)
    assert _eos_ids(gc.eos_token_id) == [tok.eos_token_id]  # the training newline stop is not saved
    assert AutoModelForCausalLM.from_pretrained(final).config.use_cache is True
    # the live model keeps training's settings
    assert (model.get_base_model() if lora else model).generation_config.eos_token_id == live_eos


def test_every_rank_joins_the_gather(tiny_base, tmp_path, monkeypatch):
    """ZeRO-3's gather is a collective: a non-main process must call the save too (and writes nothing)."""
    from trainers.train import save_final

    cfg, trainer = _tiny_trainer(tiny_base, tmp_path, "rlcr", lora=False)
    assert set(trainer.eos_token_ids) == {trainer._semcal["tokenizer"].eos_token_id}  # rlcr: EOS only
    _, gathers = _fake_zero3(trainer, monkeypatch, rank=1)
    waits = []
    monkeypatch.setattr(trainer.accelerator, "wait_for_everyone", lambda: waits.append(1))
    assert save_final(trainer, cfg, trainer._semcal["tokenizer"], trainer._semcal["restore_generation"]) == {}
    assert len(gathers) == 1 and waits
    assert not (tmp_path / "final").exists()
