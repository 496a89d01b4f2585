"""Issue 43, items 3 and 5: identity that cannot be aliased, each attack of the probe a regression test.

* Weight aliases: a symlink to the catalogue's cache folder, an extra ``training_args.bin``, a changed safetensors
  header byte, a copy, a re-save as ``pytorch_model.bin`` — generated over a grammar of such aliases on a real
  safetensors folder — all resolve to one weights key (one attempt cap); a changed tensor value does not.
* Impersonation: weights in a folder named ``HuggingFaceTB/SmolLM2-135M-Instruct`` (or a look-alike of it) are
  shown under that name only when their tensors are the catalogue's; otherwise the name is labelled as the
  submitter's. The real catalogue folder behind any path is shown as the catalogue model.
* The submitter is shown on every entry (index, Markdown, CSV, entry page); the self-reported quota refuses with
  one clear line and stores nothing.

Real files, real SQLite, the real catalogue install of SmolLM2-135M (``semcal-eval models install smollm2-135m``).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import struct
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

import board_fixtures as S
from leaderboards import cli, identity, spotcheck
from leaderboards import db as DB
from leaderboards.registry import load_registry
from leaderboards.site import render
from semcal_eval.models import CATALOGUE, ModelNotInstalledError, model_path

CLS = "semcal_synth_cls"
SMOL = CATALOGUE["smollm2-135m"]


def _smol() -> Path:
    try:
        return model_path("smollm2-135m")
    except ModelNotInstalledError as e:
        pytest.skip(str(e))


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"model.embed.weight": torch.randn(16, 8, generator=g), "model.norm.weight": torch.ones(8),
            "lm_head.weight": torch.randn(16, 8, generator=g).to(torch.bfloat16), "step": torch.tensor([3])}


def _folder(root: Path, tensors: dict | None = None, metadata: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    save_file(tensors or _tensors(), str(root / "model.safetensors"), metadata=metadata or {"format": "pt"})
    return root


def _rewrite_header(path: Path, edit) -> None:
    """Rewrite a safetensors file's header JSON with ``edit(header) -> bytes`` (padded to 8 bytes, as the format
    allows); the tensor bytes are copied unchanged."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    new = edit(header)
    new += b" " * (-len(new) % 8)
    path.unlink()  # a copy may share the inode through a hard link: write a new file
    path.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])


# ------------------------------------------------------------------ aliases: one key (generative)
_ALIASES = ["symlink", "copy", "training_args", "readme", "extra_safetensors", "metadata", "key_order", "padding",
            "as_bin", "file_symlinks", "nested_link"]


def _alias(kind: str, src: Path, dest: Path) -> Path:
    """``dest``: ``src``'s weights under one alias the probe used (or a variant of one)."""
    if kind == "symlink":
        dest.symlink_to(src, target_is_directory=True)
        return dest
    if kind == "nested_link":  # a symlink to a symlink, spelled with a trailing "/."
        (dest.parent / (dest.name + "-hop")).symlink_to(src, target_is_directory=True)
        dest.symlink_to(dest.parent / (dest.name + "-hop"), target_is_directory=True)
        return Path(f"{dest}/.")
    if kind == "file_symlinks":  # a folder of links to each file
        dest.mkdir()
        for f in src.iterdir():
            (dest / f.name).symlink_to(f)
        return dest
    shutil.copytree(src, dest)
    st_file = dest / "model.safetensors"
    if not st_file.exists() and kind in ("metadata", "key_order", "padding", "as_bin"):
        return dest  # already re-saved as pytorch_model.bin: nothing of a header to edit
    if kind == "training_args":
        (dest / "training_args.bin").write_bytes(b"")  # the probe's extra empty file
        torch.save({"learning_rate": 1e-5, "seed": 7}, dest / "optimizer.pt")
    elif kind == "readme":
        (dest / "README.md").write_text("my model")
    elif kind == "extra_safetensors":  # a file the loader never reads: model.safetensors is loaded
        save_file({"x": torch.randn(3)}, str(dest / "model-backup.safetensors"))
    elif kind == "metadata":  # one header byte: the metadata the loader ignores
        _rewrite_header(st_file, lambda h: json.dumps({**h, "__metadata__": {"format": "pt", "note": "x"}}).encode())
    elif kind == "key_order":
        _rewrite_header(st_file, lambda h: json.dumps(dict(reversed(list(h.items())))).encode())
    elif kind == "padding":
        _rewrite_header(st_file, lambda h: json.dumps(h, indent=1).encode() + b"        ")
    elif kind == "as_bin":  # the same state dict as PyTorch's pickle format
        from safetensors.torch import load_file

        torch.save(load_file(str(st_file)), dest / "pytorch_model.bin")
        st_file.unlink()
    return dest


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return _folder(tmp_path_factory.mktemp("weights") / "run" / "checkpoint-1")


@given(chain=st.lists(st.sampled_from(_ALIASES), min_size=1, max_size=3),
       revision=st.sampled_from(["", ",revision=r1", ",revision=main", ",trust_remote_code=True"]),
       slash=st.sampled_from(["", "/", "/."]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_alias_of_the_same_tensors_is_one_weights_key(base, tmp_path_factory, chain, revision, slash):
    """Aliases chained (a symlink to a copy with an extra training_args.bin and a re-padded header, ...), spelled
    in model_args as a submitter writes them: the claimed model resolves to one key, the base folder's."""
    want = identity.weights_key(str(base))
    cur, tmp = base, tmp_path_factory.mktemp("alias")
    for i, kind in enumerate(chain):
        cur = _alias(kind, Path(os.path.realpath(cur)) if kind not in ("symlink", "nested_link") else cur,
                     tmp / f"a{i}")
    pretrained, _ = spotcheck.claimed_model(f"pretrained={str(cur).rstrip('/')}{slash}{revision},dtype=float32")
    assert identity.weights_key(pretrained) == want, chain


@pytest.mark.parametrize("edit", ["value", "dtype", "shape", "name", "drop"])
def test_other_tensors_are_other_weights(base, tmp_path, edit):
    """The key is of the tensors: one changed value, dtype, shape or name, or a tensor left out, is another key
    (the key can fail)."""
    t = _tensors()
    if edit == "value":
        t["model.norm.weight"] = t["model.norm.weight"].clone()
        t["model.norm.weight"][3] = 1.0000001
    elif edit == "dtype":
        t["model.norm.weight"] = t["model.norm.weight"].to(torch.float16)
    elif edit == "shape":
        t["model.embed.weight"] = t["model.embed.weight"].reshape(8, 16)
    elif edit == "name":
        t["model.norm2.weight"] = t.pop("model.norm.weight")
    else:
        t.pop("step")
    assert identity.weights_key(str(_folder(tmp_path / "m", t))) != identity.weights_key(str(base))


def test_a_tensor_byte_changed_in_place_is_other_weights(base, tmp_path):
    copy = _alias("copy", base, tmp_path / "c")
    raw = bytearray((copy / "model.safetensors").read_bytes())
    raw[-1] ^= 1  # the last byte of the last tensor's data
    (copy / "model.safetensors").write_bytes(bytes(raw))
    assert identity.weights_key(str(copy)) != identity.weights_key(str(base))


def test_the_catalogue_folder_under_any_alias_is_the_catalogue_key(tmp_path):
    """The probe's three re-rolls on the real SmolLM2-135M install: a symlink to the catalogue's cache folder, a
    folder of its files plus an empty training_args.bin, a copy with one metadata byte of the safetensors header
    changed. Each resolves to the key of ``semcal:smollm2-135m`` (one cap), computed from the tensors of the
    board's own install."""
    smol = _smol()
    want = identity.weights_key("semcal:smollm2-135m")
    assert want == identity.known_weights("smollm2-135m") and want.startswith(identity.TENSORS_PREFIX)
    link = tmp_path / "my-model"
    link.symlink_to(smol, target_is_directory=True)
    extra = _alias("file_symlinks", smol, tmp_path / "with-args")
    (extra / "training_args.bin").write_bytes(b"")
    header = tmp_path / "header"
    header.mkdir()
    for f in smol.iterdir():
        if f.name != "model.safetensors":
            (header / f.name).symlink_to(f)
    shutil.copyfile(smol / "model.safetensors", header / "model.safetensors")
    _rewrite_header(header / "model.safetensors",
                    lambda h: json.dumps({**h, "__metadata__": {"format": "pq"}}).encode())
    for folder in (link, extra, header):
        pretrained, _ = spotcheck.claimed_model(f"pretrained={folder},dtype=float32")
        assert identity.weights_key(pretrained) == want, folder


# ------------------------------------------------------------------ impersonation
def _named(root: Path, name: str, weights_of: Path) -> Path:
    """A folder at ``root/name`` holding the files of ``weights_of`` (links: no copy of the weights)."""
    dest = root / name
    dest.mkdir(parents=True)
    for f in weights_of.iterdir():
        (dest / f.name).symlink_to(f)
    return dest


@pytest.mark.parametrize("name", [SMOL.hf_name, SMOL.hf_name.lower(), "HuggingFaceTB/SmoILM2-135M-Instruct",
                                  "models/SmolLM2-135M-Instruct", f"cache/{SMOL.key}", "x/smollm2-135m"])
def test_other_weights_under_a_catalogue_name_are_labelled_the_submitters(base, tmp_path, name):
    """The probe's Gemma-as-SmolLM2 (here another model's tensors) in a folder named like the catalogue model, in
    any spelling or look-alike: shown with the unverified label and kept under its own id; the same name over
    the catalogue's own tensors is shown as the catalogue model."""
    smol = _smol()
    fake = _named(tmp_path / "fake", name, base)
    model_id, _, shown = identity.model_identity(f"pretrained={fake},dtype=float32")
    assert shown.endswith(identity.UNVERIFIED) and model_id == str(fake) and not model_id.startswith("semcal:")
    real = _named(tmp_path / "real", name, smol)
    model_id, rev, shown = identity.model_identity(f"pretrained={real},dtype=float32")
    assert (model_id, rev, shown) == ("semcal:smollm2-135m", SMOL.sha256[:12], SMOL.hf_name)


def test_names_the_board_cannot_check_are_never_shown_as_the_catalogue_model():
    """A hub name, or a folder that is not on the board's machine, cannot be matched to the catalogue's tensors:
    labelled. ``semcal:NAME`` and its cache folder elsewhere are the board's own names (the board loads its own
    install for them, as the spot check does), and a name that claims
    no catalogue model is shown as written (the site says whose it is)."""
    for claim in (SMOL.hf_name, "/nowhere/HuggingFaceTB/SmolLM2-135M-Instruct", "google/gemma-3-270m"):
        assert identity.model_identity(f"pretrained={claim}")[2].endswith(identity.UNVERIFIED), claim
    assert identity.model_identity("pretrained=semcal:smollm2-135m")[2] == SMOL.hf_name
    # the catalogue's cache folder on another machine: re-scored with the board's install, like semcal:NAME
    assert identity.model_identity(f"pretrained=/home/u/.cache/semcal/models/{SMOL.key}")[::2] == (
        "semcal:smollm2-135m", SMOL.hf_name)
    assert identity.model_identity("pretrained=/runs/exp1/checkpoint-9")[::2] == ("/runs/exp1/checkpoint-9",
                                                                                  "exp1/checkpoint-9")


# ------------------------------------------------------------------ the submitter on every entry; the quota
@pytest.fixture
def board(tmp_path, monkeypatch):
    tasks = S.write_synth_tasks(tmp_path / "tasks")
    monkeypatch.setenv("SEMCAL_BOARD_TASKS_DIR", str(tasks))
    monkeypatch.delenv("SEMCAL_BOARD_TOKEN", raising=False)
    db_path = tmp_path / "b.sqlite"
    metrics = load_registry(tasks)[CLS].metrics

    def submit(name: str, model: str, seed: int, token: str | None = None) -> int:
        run = tmp_path / "runs" / name
        S.write_run(run, CLS, {"constrained": S.cls_items(60, seed=seed)}, metrics, model_name=model)
        args = ["submit", str(run), "--method", "base", "--no-spot-check", "--tasks-dir", str(tasks), "--db",
                str(db_path)]
        if token:
            (tmp_path / f"{name}.token").write_text(token)
            args += ["--token-file", str(tmp_path / f"{name}.token")]
        return cli.main(args)

    return {"db": db_path, "submit": submit, "tmp": tmp_path}


def test_the_submitter_is_shown_on_every_entry(board, base, capsys):
    con = DB.connect(board["db"])
    token = DB.add_submitter(con, "alice")
    con.close()
    fake = _named(board["tmp"] / "fake", SMOL.hf_name, base)
    assert board["submit"]("a", "runs/alice-model", 1, token) == 0
    assert board["submit"]("b", "runs/anon-model", 2) == 0
    assert board["submit"]("c", str(fake), 3, token) == 0
    site = board["tmp"] / "site"
    con = DB.connect(board["db"])
    render(DB.load_entries(con), site)
    stored = {r[0]: r[1:] for r in con.execute("SELECT model_name, submitter, model_id FROM submissions")}
    con.close()
    impostor = "HuggingFaceTB/SmolLM2-135M-Instruct" + identity.UNVERIFIED
    assert stored == {"runs/alice-model": ("alice", "runs/alice-model"),
                      "runs/anon-model": ("anonymous", "runs/anon-model"),
                      impostor: ("alice", str(fake))}
    html = (site / "index.html").read_text()
    assert html.count('<td class="submitter" data-v="alice">alice') == 2
    assert html.count('<td class="submitter" data-v="anonymous">anonymous') == 1
    assert html.count("model named by the submitter") == 3
    rows = list(csv.DictReader((site / "leaderboard.csv").open()))
    assert {r["submitter"] for r in rows if r["is_reference"] == "True"} == {"board"}
    assert {r["model_name"]: r["submitter"] for r in rows if r["is_reference"] == "False"} == {
        "runs/alice-model": "alice", "runs/anon-model": "anonymous", impostor: "alice"}
    md = (site / "leaderboard.md").read_text()
    assert "| runs/alice-model | alice |" in md and "| runs/anon-model | anonymous |" in md
    pages = [p.read_text() for p in (site / "entries").glob("*.html")]
    assert sum("submitted by alice" in p for p in pages) == 2 and sum("submitted by anonymous" in p for p in pages) == 1
    assert all("<th scope=\"row\">submitter</th>" in p for p in pages)


def test_the_self_reported_quota_refuses_with_one_line_and_stores_nothing(board, capsys):
    con = DB.connect(board["db"])
    token = DB.add_submitter(con, "bob")
    con.close()
    assert cli.main(["quota", "--self-reported", "1", "--submitter", "anonymous", "--db", str(board["db"])]) == 0
    assert board["submit"]("a1", "m/a1", 1) == 0
    capsys.readouterr()
    assert board["submit"]("a2", "m/a2", 2) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "self-reported quota" in err and "anonymous" in err and "quota is 1" in err
    assert "board quota --self-reported" in err
    assert board["submit"]("b1", "m/b1", 3, token) == 0  # bob has the default quota
    con = DB.connect(board["db"])
    names = sorted(n for (n,) in con.execute("SELECT model_name FROM submissions"))
    assert names == ["m/a1", "m/b1"]
    assert (DB.self_reported_used(con, "anonymous"), DB.self_reported_quota(con, "anonymous")) == (1, 1)
    assert DB.self_reported_quota(con, "bob") == DB.SELF_REPORTED_QUOTA
    con.close()
    assert cli.main(["quota", "--self-reported", "2", "--submitter", "anonymous", "--db", str(board["db"])]) == 0
    assert board["submit"]("a2", "m/a2", 2) == 0  # raised by the operator: accepted
    assert cli.main(["quota", "--self-reported", "-3", "--db", str(board["db"])]) == 2
