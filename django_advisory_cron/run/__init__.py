"""One run from claim to finish: the run row, the runner, jobs."""
