"""lm-eval glue shared by every task family: aggregations registered from the metric table, the base task,
stock multiple_choice variants scored with semcal metrics, task YAMLs read as data."""
