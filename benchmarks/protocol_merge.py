"""Merge the runs of several `semcal-train protocol` output folders that used the same protocol into one table.

    python benchmarks/protocol_merge.py RESULT_STEM OUT_1 OUT_2 ...

Why: on a shared 2-core machine the protocol's runs do not fit one sitting; each sitting runs a subset with
``--runs`` (same ``--config``, ``--limit``, ``--max-steps``, ``--fit-limit``, ``--train-limit``) into its own
folder. Runs are taken in the order given (a name seen twice keeps its first folder's run). The protocols must
agree on everything but ``runs``: evaluation (sets, limit, samples, prompts, post-hoc fit) and the common
training settings; a mismatch is refused with the key that differs, so a table never mixes protocols.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainers import protocol as PR  # noqa: E402


def _comparable(protocol: dict, key: str):
    """``protocol[key]``, less what depends on the sitting's ``--runs`` (the post-hoc rows' runs)."""
    value = protocol.get(key)
    if key == "eval" and isinstance(value, dict) and isinstance(value.get("posthoc"), dict):
        value = {**value, "posthoc": {k: v for k, v in value["posthoc"].items() if k != "runs"}}
    return value


def _same_protocol(a: dict, b: dict, where: str) -> None:
    for key in ("eval", "common"):
        if _comparable(a, key) != _comparable(b, key):
            raise SystemExit(f"protocol_merge: {where} used another protocol ({key!r} differs); "
                             "merge only folders run with the same config and size flags")


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        raise SystemExit(__doc__)
    stem, dirs = Path(argv[0]), [Path(d) for d in argv[1:]]
    reports = [json.loads((d / "protocol.json").read_text()) for d in dirs]
    merged = dict(reports[0])
    merged["runs"], merged["seconds"], specs = {}, 0.0, {}
    for d, rep in zip(dirs, reports):
        _same_protocol(reports[0]["protocol"], rep["protocol"], str(d))
        if rep["train"].get("questions") != reports[0]["train"].get("questions"):
            raise SystemExit(f"protocol_merge: {d} trained on another number of questions")
        for name, run in rep["runs"].items():
            if name not in merged["runs"]:
                merged["runs"][name] = {**run, "folder": str(d)}
                specs[name] = rep["protocol"]["runs"].get(name.split("+")[0])
        merged["seconds"] += float(rep.get("seconds") or 0.0)
    posthoc = dict(merged["protocol"]["eval"].get("posthoc") or {})
    posthoc["runs"] = sorted({r for rep in reports for r in (rep["protocol"]["eval"].get("posthoc") or {}).get("runs", [])})
    merged["protocol"] = {**merged["protocol"], "runs": specs, "eval": {**merged["protocol"]["eval"], "posthoc": posthoc}}
    merged["token_ratios"] = PR.summarise(merged["runs"])
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(merged, indent=1, default=str))
    stem.with_suffix(".md").write_text(PR.format_markdown(merged))
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
