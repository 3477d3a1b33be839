"""tierlog's benchmarks: every figure beside a baseline measured in the same run."""
