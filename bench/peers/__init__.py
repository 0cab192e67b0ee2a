"""Job definitions for each benchmarked system; see bench/README.md."""
