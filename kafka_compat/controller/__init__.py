"""The ZooKeeper-mode controller's pure parts: replica placement (replica_assignment) and leader
election rules (election)."""
