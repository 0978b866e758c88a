"""The GPU tier (`pytest -m gpu`, `make gpu`): the H100 suites end to end on a CUDA GPU."""
