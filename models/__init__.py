"""Models built by hand from minitensor ops: layer norm, attention, positions, the transformer,
recurrent baselines and the ViT patch embedding. Each can load its PyTorch counterpart's weights."""
