"""The numeric core: metrics, the one metric table, the per-document record, recalibration. No lm-eval import."""
