"""A small contrastive-learning package: the loss a data-parallel trainer calls."""
