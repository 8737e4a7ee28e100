"""tnmt's benchmarks, sorted by kind (benchmarks/README.md is the index); run from the repository root as
`python -m benchmarks.<kind>.<script>`, with tnmt importable (`pip install -e .` or PYTHONPATH=src)."""
