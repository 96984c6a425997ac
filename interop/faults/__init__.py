"""Cluster fault campaigns (python -m interop.faults): see campaign.py."""
