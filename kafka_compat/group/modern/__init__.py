"""Consumer groups (KIP-848): the coordinator assigns, members reconcile by heartbeat."""
