"""The adapter for lm-eval's internals (semcal_eval/harness/lm_eval_compat.py), against the installed lm-eval.

One test per lm-eval name the adapter relies on: each exercises the real lm-eval object and, when lm-eval changes
it, fails with a message naming the lm-eval attribute and the adapter function to update. The last tests scan the
source tree so that no other module of semcal_eval/, leaderboards/ or tasks/ uses a private lm-eval name.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import warnings
from pathlib import Path

import pytest

from semcal_eval.harness import lm_eval_compat as compat

REPO = Path(__file__).resolve().parents[1]
ADAPTER = "semcal_eval/harness/lm_eval_compat.py"


def _fix(lm_eval_name: str, function: str) -> str:
    return (f"lm-eval changed {lm_eval_name}; update semcal_eval.harness.lm_eval_compat.{function} (and its test "
            "here) to the installed lm-eval")


# -- the command line: lm_eval._cli.HarnessCLI ------------------------------------------------------------------
def test_cli_module_is_lm_evals_and_the_hook_watches_it():
    import importlib.util

    assert importlib.util.find_spec(compat.CLI_MODULE) is not None, _fix(compat.CLI_MODULE, "CLI_MODULE")
    hook = (REPO / "_semcal_eval_lm_eval_hook.py").read_text()
    watched = ast.literal_eval(re.search(r"WATCHED = frozenset\((\{.*?\})\)", hook).group(1))
    assert compat.CLI_MODULE in watched, "_semcal_eval_lm_eval_hook.WATCHED must name compat.CLI_MODULE"


def test_harness_cli_parses_run_and_the_legacy_form():
    saved = list(sys.argv)
    try:
        cli, args = compat.parse_cli(["lm_eval", "run", "--model", "hf", "--tasks", "a,b", "--include_path", "/x"])
        _, legacy = compat.parse_cli(["lm_eval", "--model", "hf-semsoft", "--tasks", "a"])
    except (ImportError, AttributeError, TypeError) as e:
        pytest.fail(f"{_fix('lm_eval._cli.HarnessCLI', 'lm_eval_cli / parse_cli')}: {type(e).__name__}: {e}")
    assert sys.argv == saved, "parse_cli must restore sys.argv"
    got = (args.command, args.model, args.tasks, args.include_path, legacy.command, legacy.model)
    assert got == ("run", "hf", ["a", "b"], "/x", "run", "hf-semsoft"), _fix("HarnessCLI.parse_args", "parse_cli")
    params = list(inspect.signature(cli.execute).parameters)
    assert params == ["args"], _fix("HarnessCLI.execute(args)", "lm_eval_cli")
    with pytest.raises(SystemExit):  # argparse's own usage error, as lm-eval prints it
        compat.parse_cli(["lm_eval", "run", "--no-such-flag"])
    assert sys.argv == saved


# -- a task's instances and metrics: Task._instances, Task.instances, Task.aggregation() --------------------------
@pytest.fixture(scope="module")
def goemotions_base(data_dir):
    from lm_eval.tasks import TaskManager

    from semcal_eval import TASKS_DIR

    meta = {"split": "validation"}
    tm = TaskManager(include_path=str(TASKS_DIR), include_defaults=False, metadata=meta)
    return tm.load(["goemotions_base"])["tasks"]["goemotions_base"]


def test_set_task_instances_is_what_lm_eval_reads_back_and_filters(goemotions_base):
    task = goemotions_base
    task.build_all_requests(limit=2)
    insts = compat.task_instances(task)
    assert len(insts) > 2 and all(type(i).__name__ == "Instance" for i in insts), _fix("Task.instances",
                                                                                        "task_instances")
    keep = [i for i in insts if i.doc_id == 0]
    compat.set_task_instances(task, keep)
    assert task.instances == keep, _fix("Task._instances (behind the Task.instances property)", "set_task_instances")
    # lm-eval's own apply_filters must work on the list set here, and on nothing else
    for n, inst in enumerate(insts):
        inst.resps = [(-float(n), False)] if inst.doc_id == 0 else []
    task.apply_filters()
    assert all(i.filtered_resps for i in keep), _fix("ConfigurableTask.apply_filters over Task._instances",
                                                     "set_task_instances")
    assert not any(i.filtered_resps for i in insts if i.doc_id != 0), _fix("Task._instances", "set_task_instances")


def test_metric_names_are_the_metric_list_and_every_one_aggregates(goemotions_base):
    task = goemotions_base
    declared = [m["metric"] for m in task.config.metric_list]
    assert compat.metric_names(task) == declared, _fix("Task.aggregation() keys", "metric_names")
    assert compat.missing_aggregations(task) == [], _fix("Task.aggregation() values", "missing_aggregations")
    assert all(callable(f) for f in task.aggregation().values())


# -- the model: TemplateLM._encode_pair -----------------------------------------------------------------------------
def test_encode_pair_is_what_loglikelihood_tokenises_with(semsoft_lm):
    from lm_eval.api.model import TemplateLM

    assert "self._encode_pair(context, continuation)" in inspect.getsource(TemplateLM.loglikelihood), (
        _fix("TemplateLM.loglikelihood (no longer calls _encode_pair)", "encode_pair"))
    try:
        ctx, cont = compat.encode_pair(semsoft_lm, "The answer is", " yes")
    except (AttributeError, TypeError) as e:
        pytest.fail(f"{_fix('TemplateLM._encode_pair(context, continuation)', 'encode_pair')}: {e}")
    assert ctx == semsoft_lm.tok_encode("The answer is"), _fix("TemplateLM._encode_pair", "encode_pair")
    assert ctx + cont == semsoft_lm.tok_encode("The answer is yes"), _fix("TemplateLM._encode_pair", "encode_pair")
    # trailing spaces of the context move to the continuation (what lets a " label" score as one token)
    assert compat.encode_pair(semsoft_lm, "The answer is ", "yes") == (ctx, cont), (
        _fix("TemplateLM._encode_pair (trailing-space handling)", "encode_pair"))


# -- the samples file: the evaluator's doc_hash / target_hash -------------------------------------------------------
def test_doc_and_target_hash_are_what_lm_eval_logs(goemotions_base):
    import lm_eval

    out = lm_eval.simple_evaluate(model="dummy", tasks=[goemotions_base], limit=3, log_samples=True,
                                  verbosity="ERROR")
    samples = out["samples"]["goemotions_base"]
    assert len(samples) == 3
    for s in samples:
        doc = goemotions_base.eval_docs[s["doc_id"]]
        assert s["doc_hash"] == compat.doc_hash(doc), _fix("evaluator.evaluate's doc_hash", "doc_hash")
        assert s["target_hash"] == compat.target_hash(goemotions_base.doc_to_target(doc)), (
            _fix("evaluator.evaluate's target_hash", "target_hash"))


# -- nothing else touches lm-eval's private names ----------------------------------------------------------------------
#: semcal's own private attributes whose names happen to be lm-eval's too: (file, name) -> why it is semcal's
SEMCAL_OWNED = {
    ("semcal_eval/semsoft/filters.py", "_task"): "TaskView's own reference to its task",
    ("leaderboards/dataset_check.py", "_task"): "TaskDocs' own field holding the board's task",
    ("leaderboards/server.py", "_lock"): "the board server's own lock",
    ("semcal_eval/qa/task.py", "_gen_kwargs"): "QATask's own method",
}
_PRIVATE_PATH = re.compile(r"lm_eval(?:\.\w+)*\.(_[A-Za-z]\w*)")
_ATTR_CALLS = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def lm_eval_private_names() -> set[str]:
    """Every private name the installed lm-eval defines: module names, functions, classes and attributes it
    assigns (``self._x = ...``, ``_x = ...``)."""
    import lm_eval

    root = Path(lm_eval.__file__).parent
    names: set[str] = set()
    for f in root.rglob("*.py"):
        names.update(p for p in [*f.relative_to(root).parent.parts, f.stem] if _private(p))  # _cli/, _x.py
        try:
            with warnings.catch_warnings():  # lm-eval's own invalid escapes are not ours to report
                warnings.simplefilter("ignore")
                tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(n.name):
                names.add(n.name)
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and _private(n.attr):
                names.add(n.attr)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and _private(n.id):
                names.add(n.id)
    return names


def private_uses(source: str, private: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each use of a private lm-eval name in ``source``: an attribute ``x._name``, a
    ``getattr(x, "_name")`` (and set/has/del), an import of ``lm_eval...._module`` or of a private name from
    lm-eval, or a string that is a dotted private lm-eval path (``"lm_eval._cli"``)."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Attribute) and n.attr in private:
            out.append((n.lineno, n.attr))
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _ATTR_CALLS
              and len(n.args) > 1 and isinstance(n.args[1], ast.Constant) and n.args[1].value in private):
            out.append((n.lineno, n.args[1].value))
        elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "lm_eval":
            out += [(n.lineno, p) for p in [*n.module.split("."), *(a.name for a in n.names)] if _private(p)]
        elif isinstance(n, ast.Import):
            out += [(n.lineno, a.name) for a in n.names
                    if a.name.split(".")[0] == "lm_eval" and any(_private(p) for p in a.name.split("."))]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and _PRIVATE_PATH.fullmatch(n.value):
            out.append((n.lineno, n.value))
    return out


@pytest.fixture(scope="module")
def private_names() -> set[str]:
    names = lm_eval_private_names()
    # the names the adapter wraps must be among them, or the scan below could not see a use of them
    assert {"_instances", "_encode_pair", "_metric_fn_list", "_aggregation_list", "_cli"} <= names
    return names


def test_the_scan_finds_each_kind_of_use(private_names):
    src = ("from lm_eval._cli import HarnessCLI\nimport lm_eval._cli\nfrom lm_eval.api.task import _private\n"
           "task._instances = []\nx = getattr(task, '_metric_fn_list', None)\nm = 'lm_eval._cli'\n"
           "ok = task.instances\n")
    assert [line for line, _ in private_uses(src, private_names)] == [1, 2, 3, 4, 5, 6]


def test_no_lm_eval_private_name_outside_the_adapter(private_names):
    found = []
    for folder in ("semcal_eval", "leaderboards", "tasks"):
        for f in sorted((REPO / folder).rglob("*.py")):
            rel = f.relative_to(REPO).as_posix()
            if rel == ADAPTER:
                continue
            for line, name in private_uses(f.read_text(encoding="utf-8"), private_names):
                if (rel, name) not in SEMCAL_OWNED:
                    found.append(f"{rel}:{line}: {name}")
    assert not found, (
        "private lm-eval names used outside semcal_eval/harness/lm_eval_compat.py (wrap each in a function of the "
        "adapter, with a test here; or, if the name is semcal's own attribute, add it to SEMCAL_OWNED with why):\n"
        + "\n".join(found)
    )
