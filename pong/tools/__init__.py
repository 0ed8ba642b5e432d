"""What to do with a run's files: watch a policy play, export, plot, compare."""
