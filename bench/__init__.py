"""Benchmarks: each figure beside a floor measured in the same run.

``python -m bench.run`` runs every benchmark registered by a module of this
package (see :mod:`bench.registry`) and prints one table.
"""
