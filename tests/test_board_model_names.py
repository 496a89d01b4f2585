"""Issue 42: the board's one model name → catalogue entry rule (:func:`leaderboards.identity.catalogue_entry`),
read by the site's identity, the spot check and ``board evaluate``; and its one ``pid_alive``. No model is loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from leaderboards import evaluate, identity, spotcheck
from leaderboards.errors import SubmissionError
from leaderboards.processes import pid_alive
from semcal_eval.models import CATALOGUE

SMOL = CATALOGUE["smollm2-135m"]


@pytest.mark.parametrize("claim, how", [
    ("semcal:smollm2-135m", identity.PREFIXED),
    ("smollm2-135m", identity.NAME),
    (f"/elsewhere/{SMOL.key}", identity.CACHE_FOLDER),
    (f"/elsewhere/{SMOL.key}/", identity.CACHE_FOLDER),
    (f"C:\\models\\{SMOL.key}", identity.CACHE_FOLDER),
    ("HuggingFaceTB/SmolLM2-135M-Instruct", identity.LOOKALIKE),
    ("/x/HuggingFaceTB/SmoILM2-135M-Instruct", identity.LOOKALIKE),  # capital I for l
    ("~/models/SMOLLM2-135M", identity.LOOKALIKE),
])
def test_each_spelling_of_a_catalogue_model_names_its_entry_and_how(claim, how):
    assert identity.catalogue_entry(claim) == (SMOL, how)


@pytest.mark.parametrize("claim", ["semcal:no-such-model", "gpt2", "/models/run/checkpoint-30", "", "semcal:"])
def test_other_names_name_no_entry(claim):
    assert identity.catalogue_entry(claim) is None


def test_evaluate_and_the_spot_check_read_the_same_rule():
    """`board evaluate` takes the catalogue's own names; a look-alike is neither evaluated nor spot-checked as the
    board's install (its weights may be anything)."""
    assert evaluate.resolve_model("smollm2-135m") == ("semcal:smollm2-135m", SMOL.hf_name)
    assert evaluate.resolve_model("semcal:smollm2-135m") == ("semcal:smollm2-135m", SMOL.hf_name)
    with pytest.raises(SubmissionError, match="neither a catalogue model"):
        evaluate.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(spotcheck.NotCheckable, match="neither a semcal catalogue model nor a model folder"):
        spotcheck.claimed_model("pretrained=HuggingFaceTB/SmolLM2-135M-Instruct,dtype=float32")
    with pytest.raises(spotcheck.NotCheckable, match="is not in the catalogue"):
        spotcheck.claimed_model("pretrained=semcal:no-such-model,dtype=float32")
    # the site shows a look-alike claim as the submitter's, never as the catalogue model
    assert identity.model_identity("pretrained=HuggingFaceTB/SmoILM2-135M-Instruct")[2].endswith(identity.UNVERIFIED)


def test_pid_alive_tells_a_running_process_from_a_finished_one():
    assert pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    assert not pid_alive(child.pid)
