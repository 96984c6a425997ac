"""Measurements shared by the quotas of the network and server layers."""
