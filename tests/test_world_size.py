"""Results do not depend on the number of processes (data parallel, ``accelerate launch -m semcal_eval ...``).

lm-eval shards documents by rank (rank r of W gets r, r + W, ...), applies the filters on each shard and only
then gathers samples and metrics. The test runs ``goemotions_semsoft`` and ``nq_open_semagree`` on SmolLM2 in
one process and in two real processes (torch.distributed, gloo) and compares every per-document record and
every metric to 1e-6.

HFLM turns data parallel on only with more than one GPU, so on CPU the two processes *simulate* it: each
initialises the gloo process group and reports its shard through the model's own ``rank`` / ``world_size``
(the plumbing ``lm_eval.evaluator.evaluate`` shards instances and gathers results by); ``all_gather`` and
``barrier`` go through torch.distributed instead of accelerate. Sampled answers are drawn one request at a
time with a seed made of (doc_id, instance, repeat), so a question's K samples are the same whichever process
draws them (stock HF sampling draws from one RNG stream per process; see docs/MULTI_GPU.md). Odd limits make
the shards unequal, so lm-eval's padding requests are exercised too.

Run as a script, this file is one worker: ``python tests/test_world_size.py RANK WORLD PORT OUT``.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-6

#: task -> (limit, metadata); odd limits give shards of unequal size under two processes
CASES = {
    "goemotions_semsoft": (41, {"split": "validation"}),
    # the estimators' cross-fitted _iso rows need every document on one rank, so a data-parallel run turns them
    # off (the one-line error of semcal_eval.qa.task names this setting); every other row is compared
    "nq_open_semagree": (5, {"split": "validation", "num_samples": 3, "estimator_calibration": None}),
}


# ------------------------------------------------------------------------------------------------ the worker


def _worker(rank: int, world: int, port: int, out: Path) -> None:
    import torch

    torch.set_num_threads(1)
    import lm_eval
    import lm_eval.models  # noqa: F401  (lm-eval's registry first)
    import torch.distributed as dist
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR
    from semcal_eval.models import resolve_pretrained
    from semcal_eval.semsoft.backend import SemSoftLM

    class ShardLM(SemSoftLM):
        """hf-semsoft whose rank / world_size report this process's shard (HFLM's data parallel, on CPU)."""

        def all_gather(self, tensor):
            if self.world_size <= 1:
                return tensor
            t = tensor.reshape(1) if tensor.dim() == 0 else tensor
            parts = [torch.zeros_like(t) for _ in range(self.world_size)]
            dist.all_gather(parts, t)
            return torch.cat(parts)

        def barrier(self):
            if self.world_size > 1:
                dist.barrier()

        def generate_until(self, requests, disable_tqdm: bool = False):
            out, seen = [], {}
            for req in requests:  # a request with repeats=K comes K times in a row
                k = seen[id(req)] = seen.get(id(req), -1) + 1
                torch.manual_seed(1_000_003 * req.doc_id + 1_009 * req.idx + k)
                out += HFLM.generate_until(self, [req], disable_tqdm=True)
            return out

    # batch_size 1: a shard changes which documents share a padded batch, which moves float32 logits by ~1e-6
    # exactly as --batch_size does; one document per forward pass compares the harness path alone
    lm = ShardLM(pretrained=resolve_pretrained("semcal:smollm2-135m"), dtype="float32", device="cpu", batch_size=1)
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        lm._rank, lm._world_size = rank, world
    got = {}
    for task, (limit, meta) in CASES.items():
        tm = TaskManager(include_path=str(TASKS_DIR), metadata=meta)
        res = lm_eval.simple_evaluate(model=lm, tasks=[task], limit=limit, task_manager=tm, metadata=meta,
                                      log_samples=True, verbosity="ERROR")
        if rank == 0:
            metrics = {k: v for k, v in res["results"][task].items()
                       if "," in k and isinstance(v, (int, float)) and not isinstance(v, bool)}
            records: dict = {}
            for s in res["samples"][task]:
                # a row with no metrics (an estimator row whose inputs this backend path does not log) has no record
                records.setdefault(s["filter"], {})[str(s["doc_id"])] = {
                    "record": s[s["metrics"][0]] if s["metrics"] else None, "filtered_resps": s["filtered_resps"]}
            got[task] = {"metrics": metrics, "records": records}
        else:
            assert res is None
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        (out / f"world{world}.json").write_text(json.dumps(got, allow_nan=True, default=str))  # str(), as lm-eval logs resps


# ------------------------------------------------------------------------------------------------ the test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(world: int, out: Path) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, __file__, str(r), str(world), str(port), str(out)], env=env, cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for r in range(world)]
    errs = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        errs.append((p.returncode, err))
    for r, (rc, err) in enumerate(errs):
        assert rc == 0, f"world {world}, rank {r} failed:\n{err[-4000:]}"
    return json.loads((out / f"world{world}.json").read_text())


def _close(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a.startswith("{"):  # QA filters log JSON strings
        return _close(json.loads(a), json.loads(b))
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= TOL * max(1.0, abs(a))
    return a == b


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir, smollm2_path):
    tmp = tmp_path_factory.mktemp("world_size")
    return {w: _run(w, tmp) for w in (1, 2)}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(CASES))
def test_two_processes_give_the_same_records(runs, task):
    one, two = runs[1][task]["records"], runs[2][task]["records"]
    assert one.keys() == two.keys()
    limit = CASES[task][0]
    for flt, docs in one.items():
        assert set(docs) == set(two[flt]) == {str(i) for i in range(limit)}, f"{task}/{flt}: documents differ"
        for doc_id, entry in docs.items():
            assert _close(entry, two[flt][doc_id]), f"{task}/{flt}/doc {doc_id}: {entry} != {two[flt][doc_id]}"


def _is_ci(key: str) -> bool:
    return key.split(",")[0].endswith(("_ci_lo", "_ci_hi"))


@pytest.mark.slow
@pytest.mark.parametrize("task", list(CASES))
def test_two_processes_give_the_same_metrics(runs, task):
    one, two = runs[1][task]["metrics"], runs[2][task]["metrics"]
    assert one.keys() == two.keys()
    bad = {k: (one[k], two[k]) for k in one if not _is_ci(k) and not _close(one[k], two[k])}
    assert not bad, f"{task}: metrics differ between 1 and 2 processes: {bad}"


@pytest.mark.slow
@pytest.mark.parametrize("task", list(CASES))
def test_two_processes_give_the_same_confidence_intervals(runs, task):
    one, two = runs[1][task]["metrics"], runs[2][task]["metrics"]
    bad = {k: (one[k], two[k]) for k in one if _is_ci(k) and not _close(one[k], two[k])}
    assert not bad, f"{task}: CIs differ between 1 and 2 processes: {bad}"


@pytest.mark.slow
def test_crossfit_rows_are_fitted_on_all_documents(runs):
    """The two folds of the cross-fitted rows are the documents' doc_id parity, over all 41 documents."""
    recs = runs[2]["goemotions_semsoft"]["records"]["semsoft_ts"]
    # filtered_resps are logged with str(), as lm-eval does: the row's compact JSON
    folds = {int(d): json.loads(e["filtered_resps"][0])["fold"] for d, e in recs.items()}
    assert folds == {d: d % 2 for d in range(41)}
    temps = {f: {e["record"]["temperature"] for d, e in recs.items() if int(d) % 2 == f} for f in (0, 1)}
    assert all(len(t) == 1 for t in temps.values()), "one temperature per fold, shared by both ranks"


def test_too_few_documents_skip_the_crossfit_rows_on_every_rank_before_the_model_runs(data_dir, caplog):
    """The count is the run's documents, not the rank's shard (41 in all, 20 or 21 per rank): with 39 every rank
    says in one line, before the model pass, that the cross-fitted rows are skipped (issue 32 item 8)."""
    import logging

    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR

    meta = {"split": "validation"}
    task = TaskManager(include_path=str(TASKS_DIR), metadata=meta).load(["goemotions_semsoft"])["tasks"]["goemotions_semsoft"]
    for rank in (0, 1):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="semcal_eval.semsoft.task"):
            task.build_all_requests(limit=39, rank=rank, world_size=2)
        lines = [r.getMessage() for r in caplog.records if r.name == "semcal_eval.semsoft.task"]
        assert len(lines) == 1 and "constrained_ts, semsoft_ts skipped" in lines[0] and "got 39" in lines[0], lines
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="semcal_eval.semsoft.task"):
        task.build_all_requests(limit=41, rank=1, world_size=2)  # 20 on this rank, 41 in the run: fine
    assert not [r for r in caplog.records if r.name == "semcal_eval.semsoft.task"]
    tune = task.tuning_instances
    assert len(task.instances) == 20 + len(tune) and task.instances[20:] == tune
    assert {i.doc_id for i in task.instances[:20]} == set(range(1, 41, 2))
    # and the semsoft_tuned row's 41 tuning documents (validation documents 41..81) are sharded the same way,
    # under lm-eval's own doc_ids (their places among the tuning documents)
    assert len(tune) == 20 and {i.doc_id for i in tune} == set(range(1, 41, 2))


# ------------------------------------------------------------------------------------------------ no model


class _ShardView:
    """A task view over synthetic documents (gold = doc['y']) that knows its documents' doc_ids."""

    def __init__(self, ids):
        self.ids = list(ids)

    def gold(self, doc):
        return doc["y"]

    def doc_ids(self, docs):
        assert len(docs) == len(self.ids)
        return self.ids


class _FakeDist:
    """torch.distributed with two ranks whose all_gather_object returns both ranks' prepared objects."""

    def __init__(self, parts):
        self.parts = parts

    def get_world_size(self):
        return len(self.parts)

    def all_gather_object(self, out, obj):
        assert obj in self.parts
        out[:] = self.parts


def test_crossfit_on_a_shard_equals_the_one_process_fit(monkeypatch):
    """Each rank of two, given its shard (doc_ids r, r + 2, ...), returns exactly the one-process rows."""
    import numpy as np

    from semcal_eval.harness import distributed
    from semcal_eval.semsoft.filters import CrossfitTemperature
    from semcal_eval.semsoft.spec import SemSoftRow

    rng = np.random.default_rng(0)
    n = 61
    z = rng.normal(0, 2.0, size=(n, 4))
    y = [int(rng.choice(4, p=np.exp(v) / np.exp(v).sum())) for v in z]
    p = np.exp(2.5 * z) / np.exp(2.5 * z).sum(1, keepdims=True)  # overconfident by T = 2.5
    resps, docs = [SemSoftRow(row) for row in p], [{"y": v} for v in y]
    full = CrossfitTemperature(_ShardView(range(n))).apply(resps, docs)
    assert {o.fold for o in full[0::2]} == {0} and {o.fold for o in full[1::2]} == {1}
    assert all(1.8 < o.temperature < 3.5 and not o.at_bound for o in full)
    shards = [list(range(r, n, 2)) for r in (0, 1)]
    parts = [[(i, (resps[i].probs, y[i])) for i in shard] for shard in shards]
    monkeypatch.setattr(distributed, "_dist", lambda: _FakeDist(parts))
    for shard in shards:
        out = CrossfitTemperature(_ShardView(shard)).apply([resps[i] for i in shard], [docs[i] for i in shard])
        assert out == [full[i] for i in shard]
    # gather_rows keeps a document sent by two ranks once (tensor-parallel launches evaluate everything everywhere)
    monkeypatch.setattr(distributed, "_dist", lambda: _FakeDist([[(1, "a"), (0, "b")], [(0, "b"), (1, "a")]]))
    assert distributed.gather_rows([1, 0], ["a", "b"]) == ([0, 1], ["b", "a"])


def test_judge_filter_reads_only_the_k_samples_of_a_padded_request():
    """lm-eval pads a short shard by re-running its last request and appending the answers to it."""
    from semcal_eval.qa.task import JudgeFilter

    doc = {"qa_question": "capital of France?", "qa_golds": ["Paris"]}
    flt = JudgeFilter(judge="f1", num_samples=3)
    padded = flt.apply([["Paris"], ["Paris", "Lyon", "Nice", "Paris", "Paris", "Paris"]], [doc, doc])
    assert padded == flt.apply([["Paris"], ["Paris", "Lyon", "Nice"]], [doc, doc])
    assert json.loads(padded[1])["conf"] == pytest.approx(1 / 3)


if __name__ == "__main__":
    _worker(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))


@pytest.mark.slow
def test_tuned_row_sees_every_tuning_document_under_two_processes(runs):
    """The semsoft_tuned row's tuning documents are sharded like the evaluated ones and gathered: both runs
    choose on all 41 of them and choose the same configuration."""
    for w in (1, 2):
        recs = runs[w]["goemotions_semsoft"]["records"]["semsoft_tuned"]
        assert {e["record"]["tuned_n"] for e in recs.values()} == {41}
        assert {e["record"]["tuned_on"] for e in recs.values()} == {"validation"}
    pick = {w: {(e["record"]["tuned_embedding"], e["record"]["tuned_top_k"], e["record"]["tuned_tau"])
                for e in runs[w]["goemotions_semsoft"]["records"]["semsoft_tuned"].values()} for w in (1, 2)}
    assert pick[1] == pick[2] and len(pick[1]) == 1
