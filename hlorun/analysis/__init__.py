"""What a compiled module and its run mean: the final kernels, instruction lineage
through the passes, kernel explanations, kernel-list differences between runs."""
