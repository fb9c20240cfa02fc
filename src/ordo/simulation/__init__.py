"""The simulation harness that proves G1-G3.

Writers with skewed clocks and late tag writes append while live queries read, and a checker
compares what the queries delivered with the journal.
"""
