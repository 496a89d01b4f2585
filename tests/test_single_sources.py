"""Facts the YAMLs repeat from the code (lm-eval reads a task's defaults from its YAML) are equal to the code's one
source: the Semantic Softmax defaults (semcal_eval.semsoft.spec.SemSoftParams), the Civil Comments band
(semcal_eval.data.civil_comments.civil_comments_subset) and the rows a semsoft task declares (semsoft/rows.py).
A YAML edited alone — or a default changed in the code alone — fails here, naming both places.

Issue 32: facts the library derives once and the apps call (their behaviour: tests/test_derived_once.py): the
cross-fitting folds (semcal_eval.core.crossfit), the reference predictors (semcal_eval.core.references), the gold
reader (semcal_eval.data.gold), the board's metric columns (semcal_eval.core.metric_table). A copy written again
in another module fails here, naming the module and line."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from semcal_eval import TASKS_DIR
from semcal_eval.data.civil_comments import civil_comments_subset
from semcal_eval.harness.task_yaml import iter_task_configs
from semcal_eval.semsoft.spec import SemSoftParams

CONFIGS = list(iter_task_configs(TASKS_DIR))
SEMSOFT = [(p, c) for p, c in CONFIGS if "SemSoftTask" in str(c.get("class", ""))]


def test_there_are_semsoft_tasks_to_check():
    assert len(SEMSOFT) >= 4  # goemotions + civil comments variants


@pytest.mark.parametrize("path,cfg", SEMSOFT, ids=[p.stem for p, _ in SEMSOFT])
def test_yaml_semsoft_defaults_equal_the_code(path, cfg):
    declared = (cfg.get("metadata") or {}).get("semsoft") or {}
    default = SemSoftParams()
    for key, value in declared.items():
        assert getattr(default, key) == value, (
            f"{path}: metadata.semsoft.{key} = {value!r} but SemSoftParams.{key} = {getattr(default, key)!r}; "
            "change the default in semcal_eval/semsoft/spec.py and the YAML together")


def test_yaml_band_equals_the_code():
    default = tuple(inspect.signature(civil_comments_subset).parameters["band"].default)
    bands = [(p, (c.get("metadata") or {}).get("band")) for p, c in CONFIGS if "band" in (c.get("metadata") or {})]
    assert bands, "no task declares the Civil Comments band"
    for path, band in bands:
        assert tuple(band) == default, f"{path}: band {band} but civil_comments_subset's default is {default}"



# -- issue 32: derived once, in semcal_eval ----------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _trees(*folders: str):
    """(path relative to the repository, parsed module) of every Python file under ``folders``."""
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path))


def _where(predicate, *folders: str) -> list[str]:
    return [f"{rel}:{node.lineno}" for rel, tree in _trees(*folders) for node in ast.walk(tree) if predicate(rel, node)]


def test_the_crossfit_folds_are_computed_in_one_module():
    """``<position> % 2`` (the fold of a document) only in semcal_eval/core/crossfit.py."""
    def fold_rule(rel, node):
        return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.right, ast.Constant)
                and node.right.value == 2 and rel != "semcal_eval/core/crossfit.py")

    assert _where(fold_rule, "semcal_eval", "leaderboards") == [], "call semcal_eval.core.crossfit instead"


def test_the_reference_predictors_are_composed_in_one_module():
    """The training-split predictors (semcal_eval.core.recalibration) are put together into the reference rows
    only by semcal_eval/core/references.py: the semsoft filter and the board call it."""
    from leaderboards.references import KINDS as BOARD_KINDS
    from semcal_eval.core.references import KINDS
    from semcal_eval.semsoft.rows import REFERENCES

    assert KINDS == REFERENCES == BOARD_KINDS
    names = {"prior_rate", "prior_predictor", "majority_predictor", "uniform_predictor"}

    def use(rel, node):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        return (isinstance(node, (ast.Attribute, ast.Name)) and name in names
                and rel not in ("semcal_eval/core/references.py", "semcal_eval/core/recalibration.py"))

    assert _where(use, "semcal_eval", "leaderboards") == [], "call semcal_eval.core.references instead"


def test_gold_labels_are_read_by_one_reader():
    """A task's ``doc_to_target`` is read as a gold label only by semcal_eval/data/gold.py (the board reads it
    besides only to hash it, as lm-eval logs ``target_hash``); no module keeps its own gold normaliser."""
    def reads_target(rel, node):
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "doc_to_target" and rel != "semcal_eval/data/gold.py")

    hashed = _line("leaderboards/dataset_check.py", "target_hash(self._task.doc_to_target")
    assert _where(reads_target, "semcal_eval/semsoft", "semcal_eval/core", "leaderboards") == [
        f"leaderboards/dataset_check.py:{hashed}"]
    copies = {"_norm_gold", "_gold_value", "_gold_key"}
    defs = _where(lambda rel, n: isinstance(n, ast.FunctionDef) and n.name in copies, "semcal_eval", "leaderboards")
    assert defs == []


def _line(rel: str, text: str) -> int:
    return next(i for i, line in enumerate((ROOT / rel).read_text().splitlines(), 1) if text in line)


def test_the_boards_metric_columns_are_the_metric_tables():
    from leaderboards import recompute
    from leaderboards.site import rows as site_rows
    from semcal_eval.core import metric_table as T

    assert recompute.NO_CI_ROLES is T.BOARD_NO_CI_ROLES and recompute.BOARD_EXTRAS is T.BOARD_EXTRAS
    assert site_rows.COLUMNS == tuple(T.ROLES["classification"])
    # recompute.py names no metric itself (docstrings aside)
    tree = ast.parse((ROOT / "leaderboards/recompute.py").read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    named = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and id(n) not in docstrings and n.value in T.HIGHER_IS_BETTER})
    assert named == [], f"leaderboards/recompute.py names metrics {named}: take them from metric_table"
    # each kind's headline metric of a role is stated once (ROLES): the headline, report and bins follow it
    for kind, roles in T.ROLES.items():
        assert roles["ece"] in T.HEADLINE[kind] and roles["ece"] in T.REPORT_COLUMNS[kind]
        assert T.ROLE_BINS[kind] == T.METRICS[roles["ece"]].n_bins
    assert T.RANK_METRICS == {m.name for m in T.METRICS.values() if m.rank}


#: Hand-written metric lists still in other areas' code, to be derived from the metric table by their owners:
#: (file, the literal's names). Listed here so that a new copy anywhere else fails.
KNOWN_METRIC_LITERALS = {
    ("semcal_eval/report.py", ("soft_brier", "brier_mc", "brier_conf")),  # markdown_table's Brier column
    ("semcal_eval/report.py", ("ece_uw15", "acc", "brier_mc")),  # the τ-sweep plot's columns
    ("semcal_eval/report.py", ("soft_ece", "soft_brier")),
}


def test_no_metric_list_is_written_outside_the_metric_table():
    """A literal tuple / list / set naming two or more metrics of the table in the library, the board or the
    trainers is a hand copy of a metric list: derive it from semcal_eval.core.metric_table (its ROLES and
    role_metrics, TASK_METRICS, REPORT_EXTRAS, TUNING_CRITERIA, ROLE_BINS) so that a metric is added in one
    place. Fitted parameters (tuned_*) are record fields, not metrics, and are not counted."""
    from semcal_eval.core import metric_table as T

    found = []
    for root in ("semcal_eval", "leaderboards", "trainers"):
        for path in sorted((ROOT / root).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == "semcal_eval/core/metric_table.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            exported = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)}
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Tuple, ast.List, ast.Set)) or id(node) in exported:
                    continue
                names = tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
                if len(names) == len(node.elts) and sum(n in T.METRICS for n in names) >= 2:
                    found.append((rel, node.lineno, names))
    new = [f"{rel}:{line}: {names}" for rel, line, names in found if (rel, names) not in KNOWN_METRIC_LITERALS]
    assert new == [], "hand-written metric lists; derive them from semcal_eval.core.metric_table:\n" + "\n".join(new)


def test_the_metric_lists_of_the_apps_are_the_tables():
    """The lists that used to be written by hand in each app are the table's views (the scan above keeps them so)."""
    from leaderboards import ranking
    from leaderboards.stages.dataset import SCORING_METADATA
    from semcal_eval import report
    from semcal_eval.core import metric_table as T
    from semcal_eval.qa.settings import QASettings
    from semcal_eval.semsoft import tuning
    from trainers import protocol

    assert ranking.ECE_BINS is T.ROLE_BINS and ranking.ECE_BINS == {"classification": 15, "confidence": 10}
    assert ranking.RANKED_HIGHER == {r for r in ranking.RANKED if T.METRICS[T.ROLES["confidence"][r]].higher_is_better}
    assert ranking.RANKED_HIGHER == {"prr"}
    # tune_by: one proper score per records (hard labels, annotator fractions), each a table metric with a loss
    assert tuning.CRITERIA == {"brier": ("brier_mc", "soft_brier"), "nll": ("nll", "soft_nll")}
    for hard, soft in tuning.CRITERIA.values():
        assert T.METRICS[hard].needs == "classification" and T.METRICS[soft].needs == "soft"
        assert not T.METRICS[hard].higher_is_better and T.METRICS[hard].loss is not None
    assert protocol.COLUMNS == T.role_metrics("confidence", ("acc", "ece", "brier", "auroc"))
    assert report.JUDGE_BAND_METRICS == T.role_metrics("confidence", ("auroc", "prr", "ece"))
    assert report.QA_EXTRA_COLUMNS == T.REPORT_EXTRAS["confidence"]
    # the board's scoring-only metadata: every typed setting of the task classes, and no key that selects documents
    assert {*SemSoftParams.keys(), *QASettings.keys(), "semsoft"} <= SCORING_METADATA
    assert not {"band", "min_annotators"} & SCORING_METADATA  # Civil Comments' subset settings
    typed = {*SemSoftParams.keys(), *QASettings.keys()}
    stale = sorted(SCORING_METADATA - typed - {"semsoft", "soft_field", "split", "data_dir", "version", "pretrained",
                                              "dtype", "config_source"})
    assert stale == [], f"SCORING_METADATA names keys no task reads: {stale}"


def test_one_normalised_target_and_public_validators():
    """The normalised multi-hot target is defined once (metrics.gold_target), and the record module validates
    through the metrics' public helpers, not their private ones."""
    defs = _where(lambda rel, n: isinstance(n, ast.FunctionDef) and n.name in ("_target", "gold_target"), "semcal_eval")
    assert len(defs) == 1 and defs[0].startswith("semcal_eval/core/metrics.py:")

    def private_metrics(rel, node):
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "M"
                and node.attr.startswith("_") and not node.attr.startswith("__"))

    assert _where(private_metrics, "semcal_eval/core", "leaderboards") == []
