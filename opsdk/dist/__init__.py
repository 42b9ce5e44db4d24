"""opsdk.dist: a graph's partitions run as tasks of a Ray cluster (docs/distributed.md).

    from opsdk.dist import ClusterSpec, ClusterSession, replica_device_setter

Importing this package does not start Ray: the first ClusterSession connects (an embedded local
instance, or the cluster at `address` / RAY_ADDRESS).
"""

from opsdk.dist.cluster import ClusterSpec
from opsdk.dist.device_setter import replica_device_setter
from opsdk.dist.master import ClusterSession
from opsdk.dist.replicated import ReplicatedOptimizer, ShardedEmbedding

__all__ = ["ClusterSpec", "ClusterSession", "ReplicatedOptimizer", "ShardedEmbedding",
           "replica_device_setter"]
