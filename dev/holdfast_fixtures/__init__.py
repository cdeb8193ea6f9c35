"""Test and demo support that never ships: moto patches that give moto AWS's documented
semantics where it departs from them, and the models and proxies the benchmarks use."""
