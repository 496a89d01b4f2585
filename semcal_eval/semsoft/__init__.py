"""Semantic Softmax: the math (scoring), the ``hf-semsoft`` backend, the lm-eval task and its filters."""
