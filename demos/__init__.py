"""The experiments of the two chapters (seeds 000 and 001), reproduced with minitensor.

python -m demos                 run every demo, with a progress bar and a summary table
python -m demos NAME [NAME...]  run some
python -m demos --quick         shrink the training runs (what the tests use)
python demos/NAME.py            one demo as a script (MINITENSOR_QUICK=1 for the quick run);
                                in Jupyter or VS Code its # %% cells run one by one
"""

DEMOS = [
    "soft_lookup",
    "scaling",
    "alignment",
    "causal_self_attention",
    "multihead",
    "attention_cost",
    "positional",
    "model_size",
    "adding_problem",
    "efficient_attention",
    "kv_cache",
    "vit_patches",
    "stacking",
    "pre_vs_post_norm",
    "instabilities",
]
