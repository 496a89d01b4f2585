"""Put a `train: false` base row evaluated on more questions beside a protocol's runs, read back at their limit.

    python benchmarks/protocol_add_base.py RUNS_OUT BASE_OUT RESULT_STEM
    (benchmarks/results/protocol_smollm2_24steps: RUNS_OUT = the 24-question protocol, BASE_OUT = a base-only one)
"""
import json
import sys
from pathlib import Path
from transformers import AutoTokenizer
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trainers import protocol as PR
src, base_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
rep = json.loads((src / "protocol.json").read_text())
lim = int(rep["protocol"]["eval"]["limit"])
base_rep = json.loads((base_dir / "protocol.json").read_text())
base = base_rep["runs"]["base"]
tok = AutoTokenizer.from_pretrained(base["model_dir"])  # a `train: false` run's model_dir is the base model
base["sets"] = PR.read_eval(base_dir / "base" / "eval", base["method"], rep["protocol"]["eval"]["sets"], tok, limit=lim)
base["note"] = (f"evaluated on {base_rep['protocol']['eval']['limit']} questions per set, read back at the first "
                f"{lim}")
rep["runs"] = {"base": base, **rep["runs"]}
rep["token_ratios"] = PR.summarise(rep["runs"])
out.parent.mkdir(parents=True, exist_ok=True)
out.with_suffix(".json").write_text(json.dumps(rep, indent=1, default=str))
out.with_suffix(".md").write_text(PR.format_markdown(rep))
print(out.with_suffix(".md").read_text())
