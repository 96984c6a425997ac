"""Faults a test injects into a cluster: cut network links (proxy.LinkProxy) and full or slow disks
(disk.LoopDisk). EmbeddedCluster (kafka_compat.testing) wires them in; see its network_faults and disks."""
