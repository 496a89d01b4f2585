"""``semcal-train`` (also ``semcal-eval train``): train → evaluate → submit, from a YAML config.

    semcal-train CONFIG.yaml [key.sub=value ...] [options]
    semcal-train --config CONFIG.yaml --set grpo.max_steps=200 --set reward.lambda_schedule=step
    semcal-train protocol [--config trainers/configs/protocol/paper.yaml] [--limit N] [--max-steps S]   (paper protocol)

Overrides are dotted keys of the config (trainers/config.py), values parsed as YAML. Example configs:
trainers/configs/{csr,csr_likelihood,csr_spread,rlvr,rlcr,rd,cpu_smoke}.yaml. Exit status 0 on success, 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from trainers.config import METHODS, TrainConfig


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="semcal-train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("positional", nargs="*", help="CONFIG.yaml and/or key.sub=value overrides")
    p.add_argument("--config", "-c", default=None, help="YAML config (see trainers/configs/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    p.add_argument("--method", choices=METHODS, help="shortcut for method=...")
    p.add_argument("--output-dir", help="shortcut for output_dir=...")
    p.add_argument("--max-steps", type=int, help="shortcut for grpo.max_steps=...")
    p.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                   help="resume from CHECKPOINT, or (no value) from the last checkpoint in output_dir if any")
    p.add_argument("--evaluate", dest="evaluate", action="store_true", default=None, help="run the QA evaluation after training")
    p.add_argument("--no-evaluate", dest="evaluate", action="store_false")
    p.add_argument("--submit", dest="submit", action="store_true", default=None, help="submit the evaluation to the leaderboard")
    p.add_argument("--no-submit", dest="submit", action="store_false")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    return p


def resolve(argv: list[str] | None = None) -> tuple[TrainConfig, argparse.Namespace]:
    """Parse arguments into a config, checked when built (:func:`trainers.config.load_config`)."""
    from trainers.config import check_data_source, check_warmup, load_config

    args = _parser().parse_args(argv)
    config, overrides = args.config, []
    for item in args.positional:
        if "=" in item:
            overrides.append(item)
        elif config is None:
            config = item
        else:
            raise ValueError(f"unexpected argument {item!r}: give one CONFIG.yaml, then key=value overrides")
    overrides += args.overrides
    if args.method:
        overrides.append(f"method={args.method}")
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    if args.max_steps is not None:
        overrides.append(f"grpo.max_steps={args.max_steps}")
    if args.resume is not None:
        overrides.append(f"resume_from_checkpoint={args.resume}")
    if args.evaluate is not None:
        overrides.append(f"evaluate.enabled={str(args.evaluate).lower()}")
    if args.submit is not None:
        overrides.append(f"submit.enabled={str(args.submit).lower()}")
    cfg = load_config(config, overrides)
    check_data_source(cfg)  # e.g. msmarco on a mirror without its training split: stop before any model loads
    if cfg.evaluate.enabled:
        from trainers.pipeline import check_eval_tasks

        check_eval_tasks(cfg)  # before training: e.g. --method rlcr on csr.yaml's agreement tasks
    check_warmup(cfg)
    return cfg, args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["protocol"]:  # semcal-train protocol ...: the paper's protocol (trainers/protocol.py)
        from trainers.protocol import main as protocol_main

        return protocol_main(argv[1:])
    try:
        cfg, args = resolve(argv)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"semcal-train: error: {e}", file=sys.stderr)
        return 2
    if args.print_config:
        print(yaml.safe_dump(cfg.as_dict(), sort_keys=False), end="")
        return 0

    from trainers import pipeline
    from trainers.train import train

    try:
        result = train(cfg)
    except ValueError as e:  # configuration problems found while building the trainer (e.g. group layout)
        print(f"semcal-train: error: {e}", file=sys.stderr)
        return 2
    if result.get("model_dir") or result.get("adapter_dir"):
        print(f"semcal-train: saved {result.get('model_dir') or result.get('adapter_dir')}", flush=True)
    if not (cfg.evaluate.enabled and (result.get("model_dir") or result.get("adapter_dir"))):
        return 0  # non-zero ranks return here: only rank 0 saves, evaluates and submits
    eval_dir = pipeline.evaluate(cfg, result)
    if cfg.submit.enabled:
        rc = pipeline.submit(cfg, eval_dir)
        if rc not in (None, 0):
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
