"""What semcal's plain-``lm_eval`` plugin (docs/PLUGIN.md) costs, measured with the plugin on and off.

    python benchmarks/bench_plugin_startup.py [--runs 30] [--task-manager] [--python PYTHON]

``--python`` times another interpreter, e.g. a clean venv with only the wheel installed (no editable path, no
other ``.pth`` files), which isolates the hook: ``python -m venv /tmp/v && /tmp/v/bin/pip install --no-deps
dist/semcal_eval-*.whl`` and ``--python /tmp/v/bin/python`` (sections 1-2 only need the standard library).

1. Interpreter start-up, ``python -c pass``: the ``.pth`` file imports ``_semcal_eval_lm_eval_hook`` (stdlib
   only), which reads one environment variable and, unless it is off, puts one finder on ``sys.meta_path``.
   Reported: the hook's line of ``-X importtime`` (the whole cost of the plugin at start-up; the module is
   imported with the switch off too, to read it), and the median wall time of ``python -c pass`` with
   ``SEMCAL_LM_EVAL_PLUGIN=1`` vs ``=0`` (runs interleaved, so load on the machine hits both alike).
2. Every later import pays one ``name in WATCHED`` test in the finder: ``find_spec`` on an unwatched name,
   timed with ``timeit`` (minus the empty call).
3. ``import lm_eval.api.registry, lm_eval.tasks, lm_eval._cli`` (what the plugin acts on): median wall time on
   vs off, i.e. importing ``lm_eval.models``, reading semcal-eval's entry points and building the subclass.
4. ``--task-manager``: one ``TaskManager()`` on vs off (indexing semcal's task folder next to lm-eval's ~14k
   YAMLs; slow, so opt-in).

Nothing is asserted: the numbers depend on the machine. Needs semcal-eval installed (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def _env(on: bool) -> dict:
    return {**os.environ, "SEMCAL_LM_EVAL_PLUGIN": "1" if on else "0", "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1"}


PYTHON = sys.executable


def _wall(code: str, on: bool) -> float:
    t0 = time.perf_counter()
    subprocess.run([PYTHON, "-c", code], env=_env(on), check=True, capture_output=True)
    return time.perf_counter() - t0


def _interleaved(code: str, runs: int) -> tuple[float, float, float, float]:
    """Median and minimum wall time, plugin on and off (runs interleaved)."""
    on, off = [], []
    for _ in range(runs):
        on.append(_wall(code, True))
        off.append(_wall(code, False))
    return statistics.median(on), statistics.median(off), min(on), min(off)


def _hook_importtime_us(runs: int) -> tuple[float, float]:
    """Median self and cumulative time (µs) of the hook module's ``-X importtime`` line (plugin on)."""
    selfs, cums = [], []
    for _ in range(runs):
        err = subprocess.run([PYTHON, "-X", "importtime", "-c", "pass"], env=_env(True),
                             capture_output=True, text=True, check=True).stderr
        (hook,) = [ln for ln in err.splitlines() if ln.rstrip().endswith("_semcal_eval_lm_eval_hook")]
        self_us, cum_us = map(int, re.findall(r"\d+", hook)[:2])
        selfs.append(self_us)
        cums.append(cum_us)
    return statistics.median(selfs), statistics.median(cums)


_FINDER_CODE = """
import timeit
import _semcal_eval_lm_eval_hook as h
finder, n = h.LmEvalFinder(), 200_000
best = min(timeit.repeat(lambda: finder.find_spec("json.decoder"), number=n, repeat=5)) / n
empty = min(timeit.repeat(lambda: None, number=n, repeat=5)) / n
print(f"{(best - empty) * 1e9:.0f}")
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--task-manager", action="store_true", help="also time TaskManager() on vs off (slow)")
    ap.add_argument("--python", default=sys.executable, help="interpreter to time (default: this one)")
    a = ap.parse_args(argv)
    global PYTHON
    PYTHON = a.python

    self_us, cum_us = _hook_importtime_us(a.runs)
    print(f"start-up: the .pth's import of the hook (-X importtime, median of {a.runs}): self {self_us:.0f} µs, "
          f"cumulative {cum_us:.0f} µs (equal: it imports nothing that is not loaded already)")
    on, off, on_min, off_min = _interleaved("pass", a.runs)
    print(f"start-up: python -c pass, wall over {a.runs} runs: median on {on * 1e3:.1f} ms / off {off * 1e3:.1f} ms, "
          f"minimum on {on_min * 1e3:.1f} ms / off {off_min * 1e3:.1f} ms")

    ns = subprocess.run([PYTHON, "-c", _FINDER_CODE], env=_env(True), capture_output=True, text=True,
                        check=True).stdout.strip()
    print(f"later imports: the finder's look at a module it does not watch costs {ns} ns per import")

    try:
        subprocess.run([PYTHON, "-c", "import lm_eval"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("lm_eval is not importable by this interpreter: sections 3-4 skipped")
        return
    runs = max(3, a.runs // 6)
    on, off, on_min, off_min = _interleaved("import lm_eval.api.registry, lm_eval.tasks, lm_eval._cli", runs)
    print(f"import lm_eval.api.registry, .tasks, ._cli over {runs} runs: median on {on:.2f} s / off {off:.2f} s, "
          f"minimum on {on_min:.2f} s / off {off_min:.2f} s")

    if a.task_manager:
        code = "from lm_eval.tasks import TaskManager; TaskManager()"
        on, off, on_min, off_min = _interleaved(code, 2)
        print(f"TaskManager() over 2 runs: minimum on {on_min:.1f} s / off {off_min:.1f} s")


if __name__ == "__main__":
    main()
