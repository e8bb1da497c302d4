"""Traces: a turn's spans made into the trace it stores (``build``), and the stored
traces read and pruned (``reading``)."""
