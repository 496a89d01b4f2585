"""GoEmotions: the 28 labels in hub order, the local ``emotions.txt`` check, and single/multi-label subsets."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

GOEMOTIONS_LABELS: tuple[str, ...] = (
    "admiration", "amusement", "anger", "annoyance", "approval", "caring", "confusion",
    "curiosity", "desire", "disappointment", "disapproval", "disgust", "embarrassment",
    "excitement", "fear", "gratitude", "grief", "joy", "love", "nervousness", "optimism",
    "pride", "realization", "relief", "remorse", "sadness", "surprise", "neutral",
)  # fmt: skip
GOEMOTIONS_NEUTRAL = GOEMOTIONS_LABELS.index("neutral")


def check_emotions_file(folder: Path) -> None:
    """Raise if ``<folder>/emotions.txt`` (when present) lists labels other than :data:`GOEMOTIONS_LABELS` in
    that order: the raw ``.tsv`` files store label ids, which index this list."""
    emo = folder / "emotions.txt"
    if emo.is_file():
        names = tuple(line.strip() for line in emo.read_text(encoding="utf-8").splitlines() if line.strip())
        if names != GOEMOTIONS_LABELS:
            raise ValueError(
                f"{emo} lists labels {names}, which differ from the 28 GoEmotions labels in hub order "
                f"{GOEMOTIONS_LABELS}; the label ids in the .tsv files would be misread."
            )


def goemotions_label_names() -> list[str]:
    """The 28 GoEmotions labels in id order (27 emotions, then ``neutral`` = 27)."""
    return list(GOEMOTIONS_LABELS)


def single_label(ds: Dataset) -> Dataset:
    """GoEmotions rows with exactly one gold label (the usual single-label evaluation subset)."""
    return ds.filter(lambda labels: [len(x) == 1 for x in labels], input_columns="labels", batched=True)


def multi_label(ds: Dataset) -> Dataset:
    """GoEmotions rows with two or more gold labels."""
    return ds.filter(lambda labels: [len(x) > 1 for x in labels], input_columns="labels", batched=True)


def goemotions_label_counts(ds: Dataset) -> list[int]:
    """Occurrences of each of the 28 labels over ``ds`` (a multi-label row counts once per label);
    divide by the sum for a class prior."""
    import numpy as np

    flat = [x for labels in ds["labels"] for x in labels]
    return np.bincount(np.asarray(flat, dtype=np.int64), minlength=len(GOEMOTIONS_LABELS)).tolist()
