"""Index management: which folders may be indexed, who may change an index (its owner), when a
registered index is reindexed on its own, and the tickets and phases of the builds clients ask for."""

from __future__ import annotations

from cluster.sync.claims import CLUSTER_CALLER, IndexCaller
from cluster.sync.manager import IndexManager, IndexReader, JobRunner, folder_signature, reindex_entrypoint
from cluster.sync.roots import NEVER_INDEXED, admit_folder, confine, indexable_folder
from cluster.sync.tickets import BuildPhase, BuildReport, BuildTicket, phase_of
from cluster.sync.watch import SyncWatch

__all__ = [
    "CLUSTER_CALLER",
    "NEVER_INDEXED",
    "BuildPhase",
    "BuildReport",
    "BuildTicket",
    "IndexCaller",
    "IndexManager",
    "IndexReader",
    "JobRunner",
    "SyncWatch",
    "admit_folder",
    "confine",
    "folder_signature",
    "indexable_folder",
    "phase_of",
    "reindex_entrypoint",
]
