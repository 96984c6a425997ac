"""Classic groups: JoinGroup/SyncGroup, the leader assigns."""
