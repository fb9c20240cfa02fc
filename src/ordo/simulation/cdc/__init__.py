"""The replica simulation that proves G6: mutations as N Cassandra replicas deliver them, a checker.

`replica_mutations` produces a workload's writes the way a CDC publisher on N replicas sees them:
every write once per replica that received it (duplicated), in each replica's own order
(reordered), with the write times of clients whose clocks are skewed, and with partial rows, cell
deletions, TTLs, row and partition deletions. `check` compares the materializer's messages and
table with the last-write-wins merge of every mutation.
"""

from ordo.simulation.cdc.checker import CdcReport, check
from ordo.simulation.cdc.replicas import SIMULATED_SCHEMA, ReplicaWorkload, replica_mutations

__all__ = ["SIMULATED_SCHEMA", "CdcReport", "ReplicaWorkload", "check", "replica_mutations"]
