"""Share groups (KIP-932) in the group coordinator: ShareGroup, its members and ShareGroupHeartbeat."""
